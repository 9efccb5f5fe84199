"""Find the line where a text trace (CSV, JSON Lines) stops being readable.

Polars reports a broken text file with a message about its own parser ("invalid utf-8
sequence", "TapeError", "failed to determine supertype of struct[3]"); these helpers run
only after such a failure and re-read the file in Python to name the line and the column.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path

from servetrace.errors import InputError

_JSONL_HINT = "every line of a JSON Lines trace must be one JSON object"


def _kind(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a single value"


def json_lines_problem(path: Path, lines: Iterable[bytes]) -> InputError | None:
    """The first line that is not JSON, not an object, or gives a field another shape
    (a list where earlier lines had a single value) — or None when every line is fine."""
    shapes: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(lines, start=1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except UnicodeDecodeError as error:
            return InputError(f"{path}: line {number} is not UTF-8 text ({error.reason})")
        except json.JSONDecodeError as error:
            return InputError(
                f"{path}: line {number} is not valid JSON ({error.msg} at column {error.colno})",
                hint=_JSONL_HINT,
            )
        if not isinstance(record, dict):
            return InputError(
                f"{path}: line {number} is {_kind(record)} ({_show(record)}), not a JSON object",
                hint=_JSONL_HINT,
            )
        for key, value in record.items():
            kind = _kind(value)
            if kind is None:
                continue
            first = shapes.setdefault(key, (kind, number))
            if first[0] != kind:
                return InputError(
                    f"{path}: line {number}: field {key!r} is {kind}, but on line "
                    f"{first[1]} it is {first[0]}: one column cannot hold both",
                    hint="give the field the same shape on every line",
                )
    return None


def _show(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def csv_problem(path: Path, data: bytes, separator: str) -> InputError | None:
    """The first line of a CSV that is not UTF-8 or has an unterminated quote, or None."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        line = data.count(b"\n", 0, error.start) + 1
        field = data.count(separator.encode(), line_start, error.start)
        header = data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
        names = header.split(separator)
        column = f", column {names[field]!r}" if line > 1 and field < len(names) else ""
        return InputError(
            f"{path}: line {line}{column}: not UTF-8 text "
            f"(byte 0x{data[error.start]:02x} at offset {error.start:,})",
            hint="re-export the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
        )
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator, strict=True)
    start = 1
    try:
        for _ in reader:
            start = reader.line_num + 1
    except csv.Error as error:
        return InputError(
            f"{path}: line {start}: {error} (a quote that is never closed?)",
            hint='a field in quotes must end with a quote; a quote inside it is written ""',
        )
    return None
