"""GuideLLM's own ``benchmarks.csv``: its summary, one row per benchmark.

The file has three header rows, a group (``Time to First Token``), a field with its unit
(``Successful ms``) and a statistic (``Mean``, ``Median``, ``Std Dev``, ``Percentiles``),
so one name alone repeats; a cell is a number, a date, or a JSON document (a strategy's
``Constraints``, a ``Percentiles`` list). ``Percentiles`` lists eleven values: the
minimum, p0.1, p1, p5, p10, p25, p75, p90, p95, p99 and the maximum (the median has its
own column), as GuideLLM's ``benchmarks.json`` shows them under ``min``,
``percentiles.p001`` … ``percentiles.p99`` and ``max``.

It holds no request: a run read from it is a *reported* run (``runs.reported``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.sources.reading import read_text

FIRST_GROUP = "Run Info"
# The statistics a ``Percentiles`` cell lists, in order.
PERCENTILE_KEYS = ("min", "p001", "p01", "p05", "p10", "p25", "p75", "p90", "p95", "p99", "max")
_PEEK = 64  # enough bytes to tell the header from any other CSV's


def is_benchmarks_csv(path: Path) -> bool:
    """Whether ``path`` starts like GuideLLM's ``benchmarks.csv``."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_PEEK)
    except OSError:
        return False
    return head.lstrip(b"\xef\xbb\xbf").startswith(FIRST_GROUP.encode() + b",")


Row = dict[tuple[str, str, str], str]


def read_rows(path: Path) -> list[Row]:
    """One ``{(group, field, statistic): cell}`` per benchmark, in file order."""
    lines = list(csv.reader(read_text(path).splitlines()))
    if len(lines) < 3 or lines[0][:1] != [FIRST_GROUP]:
        raise InputError(
            f"{path}: not GuideLLM's benchmarks.csv: it starts with three header rows, "
            f"the first '{FIRST_GROUP},…'"
        )
    groups, fields, stats = lines[0], lines[1], lines[2]
    if not len(groups) == len(fields) == len(stats):
        raise InputError(f"{path}: its three header rows differ in length")
    header = list(zip(groups, fields, stats, strict=True))
    rows: list[Row] = []
    for number, cells in enumerate(lines[3:], start=4):
        if not any(cells):
            continue
        if len(cells) != len(header):
            raise InputError(
                f"{path}: row {number}: {len(cells)} cells under {len(header)} columns"
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def count_rows(path: Path) -> int:
    """How many benchmarks the file holds (0 when it cannot be read)."""
    try:
        return len(read_rows(path))
    except InputError:
        return 0


def cell(row: Row, group: str, field: str, stat: str = "") -> str | None:
    value = row.get((group, field, stat))
    return value if value not in (None, "") else None


def json_cell(row: Row, group: str, field: str, stat: str = "", *, where: str) -> Any:
    """A cell holding a JSON document, parsed (None when empty); InputError otherwise."""
    text = cell(row, group, field, stat)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise InputError(
            f"{where}: column '{group} / {field}{f' / {stat}' if stat else ''}' is not "
            f"JSON: {text[:40]!r}"
        ) from None
