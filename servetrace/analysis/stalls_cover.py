"""Which engine steps cover each inter-token gap, and their sums (docs/design.md §10).

A gap ``(a, b]`` of a request is covered by the steps of its replica whose end lies in
it. Per replica the steps are sorted by end (`stalls_join.prepare_steps`), so the
covering steps of a gap are one run of rows ``[lo, hi)``: ``hi`` the steps ending at or
before ``b``, ``lo`` those ending at or before ``a``, two sorted searches per gap and no
loop over gaps (the loop is over replicas). A column's sum over the run is a difference
of its cumulative sums; only the columns a caller asks for are summed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

# Rows (gaps, ticks, membership pairs) are worked on a block at a time: at 10^7 rows
# every array is 80 MB of fresh memory, whose first touch costs more than the arithmetic
# on it, while a block's arrays are reused from one block to the next. A block's Int64
# column is 4 MiB: at 8 MiB (jemalloc's oversize threshold) Polars maps each afresh and
# returns it when freed, and a run at 10^7 gaps took 10% more page faults.
BLOCK = 1 << 19
# Why a gap is covered by no step, as a code (`reasons`): its index here.
REASON_CODES = ("replica_without_steps", "outside_steps", "zero_length", "no_step_ends_in_gap")


@dataclass(frozen=True)
class Cover:
    """Per gap: the rows ``[lo, hi)`` of the prepared steps that cover it (``lo == hi``
    for none), whether its replica has steps, that replica's first start and last end, and
    its first row (with one replica, one value for every gap)."""

    lo: np.ndarray
    hi: np.ndarray
    known: np.ndarray
    span_start: np.ndarray
    span_end: np.ndarray
    first_row: np.ndarray

    @property
    def steps(self) -> np.ndarray:
        return self.hi - self.lo

    def first(self) -> np.ndarray:
        """The row of the first covering step (-1 for none)."""
        return np.where(self.hi > self.lo, self.lo, -1)

    def last(self) -> np.ndarray:
        """The row of the last covering step, the one that emitted the tick (-1 for none)."""
        return np.where(self.hi > self.lo, self.hi - 1, -1)

    def ending_at(self, ends: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether a step of each gap's replica ends at the gap's end ``b`` (of the prepared
        steps' ``ends``): the last such step is then row ``hi - 1``."""
        if not ends.shape[0]:
            return np.zeros(b.shape[0], dtype=bool)
        hit = np.take(ends, np.maximum(self.hi - 1, 0)) == b
        hit &= self.hi > self.first_row
        return hit

    def reasons(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Why each gap is unjoined: an index into `REASON_CODES`, -1 for a joined gap."""
        code = np.full(a.shape[0], REASON_CODES.index("no_step_ends_in_gap"), dtype=np.int8)
        code[b == a] = REASON_CODES.index("zero_length")
        code[(b < self.span_start) | (a >= self.span_end)] = REASON_CODES.index("outside_steps")
        known = np.broadcast_to(self.known, a.shape)
        code[~known] = REASON_CODES.index("replica_without_steps")
        code[self.hi > self.lo] = -1
        return code


def replica_runs(prepared: pl.DataFrame) -> list[tuple[str, int, int]]:
    """(replica, first row, end row) of each replica's run of the prepared steps."""
    if prepared.is_empty():
        return []
    runs = prepared["replica"].rle()
    out, start = [], 0
    for count, replica in runs.struct.unnest().iter_rows():
        out.append((replica, start, start + count))
        start += count
    return out


def cover(gaps: pl.DataFrame, prepared: pl.DataFrame) -> Cover:
    """The covering rows of every gap of ``gaps`` (``replica``, ``gap_start_ns``,
    ``gap_end_ns``; each request's gaps in time order) in ``prepared``."""
    n = gaps.height
    a, b = gaps["gap_start_ns"].to_numpy(), gaps["gap_end_ns"].to_numpy()
    where = {replica: (first, end) for replica, first, end in replica_runs(prepared)}
    ends_all, starts_all = prepared["ts_end"].to_numpy(), prepared["ts_start"].to_numpy()
    replicas = gaps.select(pl.col("replica").unique()).to_series()  # no copy of a constant
    if replicas.len() <= 1:  # one replica: its arrays are the columns, no grouping
        replica = replicas[0] if replicas.len() else ""
        if replica not in where:
            zero = np.zeros(n, dtype=np.int64)
            none = np.asarray(0)
            return Cover(zero, zero, np.asarray(False), none, none, none)
        first, end = where[replica]
        lo, hi = _searches(ends_all[first:end], a, b)
        if first:
            lo += first
            hi += first
        span = (np.asarray(starts_all[first:end].min()), np.asarray(ends_all[first:end].max()))
        return Cover(lo, hi, np.asarray(True), *span, np.asarray(first))
    lo, hi = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    known = np.zeros(n, dtype=bool)
    span_start, span_end = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    first_row = np.zeros(n, dtype=np.int64)
    rows = gaps.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_g"), "replica")
    for (replica,), part in rows.group_by("replica"):
        if replica not in where:
            continue
        idx = part["_g"].to_numpy()
        first, end = where[replica]
        part_lo, part_hi = _searches(ends_all[first:end], a[idx], b[idx])
        lo[idx], hi[idx] = part_lo + first, part_hi + first
        known[idx] = True
        span_start[idx] = starts_all[first:end].min()
        span_end[idx] = ends_all[first:end].max()
        first_row[idx] = first
    return Cover(lo, hi, known, span_start, span_end, first_row)


def _searches(ends: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(steps ending at or before ``a``, at or before ``b``) of each gap, ``ends`` sorted."""
    hi = np.searchsorted(ends, b, side="right")
    # A request's gaps come in time order, each starting at the tick the one before it
    # ended on: its steps ending at or before ``a`` are the previous gap's at or before
    # ``b``. Only the other gaps (each request's first) are searched.
    lo = np.empty(a.shape[0], dtype=np.int64)
    if a.shape[0]:
        lo[1:] = hi[:-1]
        fresh = np.flatnonzero(np.concatenate(([True], a[1:] != b[:-1])))
        lo[fresh] = np.searchsorted(ends, a[fresh], side="right")
    return lo, hi


def cumulative(values: pl.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """(sums, null counts) through each row with a leading 0; no counts without nulls."""
    filled = values.fill_null(0).to_numpy().astype(np.int64)
    zero = np.zeros(1, dtype=np.int64)
    sums = np.concatenate([zero, np.cumsum(filled)])
    if not values.null_count():
        return sums, None
    nulls = values.is_null().to_numpy().astype(np.int64)
    return sums, np.concatenate([zero, np.cumsum(nulls)])


Cumulated = dict[str, tuple[np.ndarray, "np.ndarray | None"]]


def covering_sums(
    where: Cover, cumulated: Cumulated
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Each column's sum over every gap's covering rows, with whether a null is among
    them (None for a column without nulls); ``cumulated``: each column's `cumulative`."""
    lo, hi = where.lo, where.hi
    n = hi.shape[0]
    # A gap starting where the one before ended (its request's next gap): its lower sum
    # is that gap's upper one, so each sum is one gather at ``hi`` less the row before;
    # only the other gaps (each request's first) gather at ``lo``.
    fresh = np.flatnonzero(np.concatenate(([True], lo[1:] != hi[:-1]))) if n else lo[:0]
    # At 10^7 gaps an array is 80 MB whose first touch costs more than the arithmetic:
    # one gather buffer serves every column.
    upper = np.empty(n, dtype=np.int64)

    def summed(cum: np.ndarray) -> np.ndarray:
        np.take(cum, hi, out=upper)
        out = np.empty(n, dtype=np.int64)
        if n:
            np.subtract(upper[1:], upper[:-1], out=out[1:])
            out[fresh] = upper[fresh] - cum[lo[fresh]]
        return out

    result: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for name, (sums, nulls) in cumulated.items():
        # only a column with an unknown value can make a sum unknown
        result[name] = (summed(sums), None if nulls is None else summed(nulls) > 0)
    return result


def straddle(where: Cover, starts: np.ndarray, a: np.ndarray) -> np.ndarray:
    """The part of each gap's first covering step before the gap began."""
    # One more start past the last row: a gap with no covering step reads it, and is
    # then set to 0.
    padded = np.append(starts, 0)
    out = np.take(padded, where.lo)
    np.subtract(a, out, out=out)
    np.maximum(out, 0, out=out)
    out[where.hi <= where.lo] = 0
    return out
