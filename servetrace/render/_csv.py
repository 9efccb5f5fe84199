"""CSV for every report and table servetrace writes: one place that says how a value is
quoted, and how a text cell is kept from running as a spreadsheet formula.

Rows end with ``\\n``, but a value holding a carriage return is quoted like one holding a
newline: Python's writer quotes only the characters of its line terminator, and an RFC
4180 reader takes a bare ``\\r`` for the end of a row.

Text cells. A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and,
in some, a tab or carriage return first) as a formula, so a request id ``=HYPERLINK(…)``
in a trace would run on the machine of whoever opens the CSV. As OWASP recommends, such
a *text* cell is written with a ``'`` in front; numbers are written as they are (a
negative number is not text). Machine consumers that want the text exactly
(``--csv-raw-text``) switch this off for the command; Parquet, Arrow and JSON Lines are
never altered.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the CLI imports this module to build its options: no Polars then
    import polars as pl

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_PATTERN = "^[=+\\-@\t\r]"
# One command writes its CSV one way: the CLI sets this once from --csv-raw-text (a
# context variable, so threads and tests that run commands side by side do not share it).
_raw_text: ContextVar[bool] = ContextVar("servetrace_csv_raw_text", default=False)


def write_text_raw(raw: bool) -> bool:
    """Write CSV text cells as they are (``True``) or neutralised (``False``, the default),
    from now on in this context; returns ``raw`` (a Typer option callback)."""
    _raw_text.set(bool(raw))
    return raw


def neutral_cell(value: Any) -> Any:
    """A text value that would start a formula, with ``'`` in front; anything else as is."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _raw_text.get():
        return "'" + value
    return value


def neutral_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every text cell that would start a formula neutralised."""
    import polars as pl

    if _raw_text.get():
        return frame
    text = [name for name, dtype in frame.schema.items() if dtype in (pl.String, pl.Categorical)]
    return frame.with_columns(
        pl.when(pl.col(name).cast(pl.String).str.contains(_FORMULA_PATTERN))
        .then(pl.lit("'") + pl.col(name).cast(pl.String))
        .otherwise(pl.col(name).cast(pl.String))
        .alias(name)
        for name in text
    )


class _Text(Protocol):
    def write(self, text: str, /) -> Any: ...


class _LineFeedRows:
    """Takes each row the writer ends with ``\\r\\n`` (so that both characters count as
    line breaks when it decides what to quote) and ends it with ``\\n``."""

    def __init__(self, out: _Text) -> None:
        self._out = out

    def write(self, row: str) -> Any:
        return self._out.write(row[:-2] + "\n" if row.endswith("\r\n") else row)


class _NeutralRows:
    """A ``csv.writer`` whose text cells are neutralised (``neutral_cell``)."""

    def __init__(self, out: _Text) -> None:
        self._writer = csv.writer(_LineFeedRows(out), lineterminator="\r\n")

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([neutral_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def rows_writer(out: _Text) -> _NeutralRows:
    """A CSV writer into ``out``: rows end with ``\\n``, a value holding ``\\r`` or ``\\n``
    is quoted, and a text cell that would start a formula is neutralised."""
    return _NeutralRows(out)
