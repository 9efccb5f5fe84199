"""Engine log text as a frame of numbered lines, and the errors that name a line.

Engines write their step lines among every other log line; an importer keeps the lines
that carry its message, parses them with one regular expression (vectorised), and
refuses a line that starts like its message but does not parse: a changed format must
not pass as fewer steps.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.reading import json_lines
from servetrace.sources.sniff import read_all

# Terminal colours: vLLM colours its process prefix when the output is a terminal, and a
# log captured through `script` or a container runtime keeps the escapes.
_ANSI = r"\x1b\[[0-9;]*[A-Za-z]"


def log_lines(path: Path) -> pl.DataFrame:
    """``path``'s lines as ``line`` (1-based Int64) and ``text`` (colour escapes removed)."""
    # Split at line ends only (LF, CR LF, CR), as every reader does: a U+2028 or U+0085
    # inside a logged request id must not shift the line numbers errors name.
    lines = json_lines(read_all(path).decode("utf-8", errors="replace"))
    if lines and lines[-1] == "":
        lines.pop()
    frame = pl.DataFrame({"text": lines}, schema={"text": pl.String()})
    return frame.with_row_index("line", offset=1).select(
        pl.col("line").cast(pl.Int64()), pl.col("text").str.replace_all(_ANSI, "")
    )


def parse_marked(
    lines: pl.DataFrame, marker: str, pattern: str, required: str, path: Path, rule: str
) -> pl.DataFrame:
    """The lines matching the regex ``marker``, with ``pattern``'s named groups as columns.

    A marked line where ``pattern`` leaves the group ``required`` empty (it did not
    match) is an input error naming the file, the line and ``rule`` (what the line
    should look like).
    """
    marked = lines.filter(pl.col("text").str.contains(marker))
    parsed = marked.with_columns(pl.col("text").str.extract_groups(pattern).alias("groups")).unnest(
        "groups"
    )
    bad = parsed.filter(pl.col(required).is_null())
    if bad.height:
        line, text = bad.row(0)[:2]
        shown = text if len(text) <= 160 else text[:157] + "..."
        raise InputError(f"{path}: line {line}: {rule}: {shown!r}")
    return parsed
