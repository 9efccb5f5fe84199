"""What a Parquet file's footer already knows about its integer columns: their range.

The ingest checks (``normalise``) need to know, per file, whether every time lies within
±2^62 ns and every token count below ``MAX_COUNT``. For an integer column of a Parquet
file the row-group statistics answer that exactly, without decoding a row: the minimum
and maximum of a signed or unsigned integer column are exact values (only byte-array
statistics may be truncated), and every value lies between them. At 10⁸ events the
decode of ``ts`` and the three counts that the statistics replace costs ≈ 1.7 CPU-s per
file (``docs/scale.md``).

A column is answered only when every row group carries statistics for it (or holds only
nulls); otherwise it is left out and the check reads the column, as for any other format.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class IntegerRange:
    """The smallest and largest value of a column (None, None: every value is null)."""

    low: int | None
    high: int | None
    nulls: int  # rows that hold no value


def _footer(path: Path) -> Any:
    """The file's footer metadata, read once for the three questions below (ingest asks
    them of each file in turn): cached by path, size and modification time."""
    found = path.stat()
    return _footer_of(str(path), found.st_size, found.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _footer_of(path: str, size: int, mtime_ns: int) -> Any:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata


def integer_ranges(path: Path, columns: Mapping[str, str]) -> dict[str, IntegerRange]:
    """``{canonical: range}`` of the file's integer columns named by ``columns``
    (canonical name → the file's column); columns the statistics cannot answer (absent,
    not integer, a row group without statistics) are left out. Never raises: a footer that
    cannot be read answers nothing, and the checks read the rows instead."""
    try:
        metadata = _footer(path)
        schema = metadata.schema.to_arrow_schema()
    except Exception:  # any unreadable footer: the row-reading checks name the problem
        return {}
    out: dict[str, IntegerRange] = {}
    names = list(schema.names)
    for canonical, source in columns.items():
        if source not in names or names.count(source) != 1:
            continue
        if not _is_integer(schema.field(source).type):
            continue
        found = _range_of(metadata, names.index(source))
        if found is not None:
            out[canonical] = found
    return out


def no_nulls(path: Path, columns: Sequence[str]) -> bool:
    """Whether the footer proves that none of ``columns`` holds a null (every row group
    counts its nulls, and each count is zero); False when it cannot tell."""
    try:
        metadata = _footer(path)
        names = list(metadata.schema.to_arrow_schema().names)
        indices = [names.index(c) for c in columns if names.count(c) == 1]
        if len(indices) != len(columns):
            return False
        for group in range(metadata.num_row_groups):
            for index in indices:
                stats = metadata.row_group(group).column(index).statistics
                if stats is None or not stats.has_null_count or stats.null_count != 0:
                    return False
    except Exception:  # any unreadable footer: the answer is "cannot tell"
        return False
    return True


def is_integer_or_text(path: Path, column: str) -> bool:
    """Whether the file's ``column`` is of an integer or text type (ids that ingest
    turns into Int64 or String without making a null)."""
    try:
        import pyarrow.types as pt

        schema = _footer(path).schema.to_arrow_schema()
        kind = schema.field(column).type
    except Exception:  # any unreadable footer, or no such column
        return False
    return bool(pt.is_integer(kind) or pt.is_string(kind) or pt.is_large_string(kind))


def _is_integer(arrow_type: object) -> bool:
    import pyarrow.types as pt

    return bool(pt.is_integer(arrow_type))


def _range_of(metadata: object, index: int) -> IntegerRange | None:
    low: int | None = None
    high: int | None = None
    nulls = 0
    for group in range(metadata.num_row_groups):  # type: ignore[attr-defined]
        column = metadata.row_group(group).column(index)  # type: ignore[attr-defined]
        stats = column.statistics
        rows = metadata.row_group(group).num_rows  # type: ignore[attr-defined]
        if stats is None or not stats.has_null_count:
            return None
        nulls += stats.null_count
        if stats.null_count == rows:
            continue  # only nulls: nothing to range-check
        if not stats.has_min_max:
            return None
        lo, hi = stats.min, stats.max
        if not (isinstance(lo, int) and isinstance(hi, int)) or lo > hi:
            return None
        low = lo if low is None else min(low, lo)
        high = hi if high is None else max(high, hi)
    return IntegerRange(low, high, nulls)


def scaled_within(found: IntegerRange, scale: float, limit: float) -> bool:
    """Whether ``|value × scale| < limit`` for every value, computed as the row check
    computes it (``value`` as a double, times ``scale`` > 0): the product is monotone in
    the value, so the two ends decide."""
    return all(abs(float(v) * scale) < limit for v in _ends(found))


def strictly_within(found: IntegerRange, limit: int) -> bool:
    """Whether ``-limit < value < limit`` for every value (exact integers)."""
    return all(-limit < v < limit for v in _ends(found))


def _ends(found: IntegerRange) -> Sequence[int]:
    return [v for v in (found.low, found.high) if v is not None]
