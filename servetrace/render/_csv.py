"""CSV rows for every report: one place that says how a value is quoted.

Rows end with ``\\n``, but a value holding a carriage return is quoted like one holding a
newline: Python's writer quotes only the characters of its line terminator, and an RFC
4180 reader takes a bare ``\\r`` for the end of a row.
"""

from __future__ import annotations

import csv
from typing import Any, Protocol


class _Text(Protocol):
    def write(self, text: str, /) -> Any: ...


class _LineFeedRows:
    """Takes each row the writer ends with ``\\r\\n`` (so that both characters count as
    line breaks when it decides what to quote) and ends it with ``\\n``."""

    def __init__(self, out: _Text) -> None:
        self._out = out

    def write(self, row: str) -> Any:
        return self._out.write(row[:-2] + "\n" if row.endswith("\r\n") else row)


def rows_writer(out: _Text) -> Any:
    """A ``csv.writer`` into ``out``: rows end with ``\\n``, and a value holding ``\\r`` or
    ``\\n`` is quoted."""
    return csv.writer(_LineFeedRows(out), lineterminator="\r\n")
