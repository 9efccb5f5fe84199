"""Text from a trace (ids, attribute values, file names, rule texts) inside Markdown.

Every Markdown writer puts such text through ``md_text`` (plain text: a table cell, a
heading, a bullet) or ``md_code`` (a code span). A raw ``|`` would split a table cell in
two; a line break (``\\n``, ``\\r``, U+0085, U+2028, U+2029) would end the row or the
bullet; a ``<`` that opens a tag, comment or declaration (``<!--`` hides the rest of a
pull-request comment) and an ``&`` that spells an entity would be read as HTML. Escaped,
each renders as the character it was; a ``<`` that cannot open HTML (``ttft<=200ms``)
is left as it reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_LINE_BREAKS = str.maketrans({c: " " for c in "\n\r\v\f\x85\u2028\u2029"})
_CELL = str.maketrans({"\\": "\\\\", "|": "\\|"})
_LINE = str.maketrans({"\\": "\\\\"})
# CommonMark reads "<" as HTML only before a letter, "/", "!" or "?", and "&" only when
# it spells an entity ("&amp;", "&#60;").
_HTML_OPENING = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?\w+;)")
_BACKTICKS = re.compile("`+")


def md_text(value: Any, *, cell: bool = True) -> str:
    """``value`` as Markdown text that renders as it reads: in a table cell, or (``cell``
    false: a ``|`` outside a table is plain text) in a heading or a bullet."""
    text = str(value).translate(_LINE_BREAKS).translate(_CELL if cell else _LINE)
    return _HTML_OPENING.sub("&lt;", _ENTITY.sub("&amp;", text))


def md_code(value: Any) -> str:
    """``value`` as a Markdown code span (backticks included), safe in a table cell.

    A code span shows ``<`` and ``&`` literally, so only ``|`` is escaped (GitHub takes
    ``\\|`` for a pipe even there); the fence is longer than any run of backticks inside.
    """
    text = str(value).translate(_LINE_BREAKS).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_row(cells: Iterable[str]) -> str:
    """One row of a Markdown table (cells already escaped)."""
    return "| " + " | ".join(cells) + " |"


def md_table(head: Sequence[str], rows: Iterable[Sequence[str]], align: str) -> list[str]:
    """A Markdown table's lines: the head, the rule (``align``: ``l`` or ``r`` for each
    column), the rows; cells already escaped."""
    rule = "|" + "|".join("---:" if side == "r" else "---" for side in align) + "|"
    return [md_row(head), rule, *(md_row(row) for row in rows)]
