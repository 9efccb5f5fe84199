"""``describe.moments`` of a float column in every group at once, the same bits per group.

``moments`` of one sample takes the exact integer path when every value is a whole
number below 2^53, else sums in sorted order (``moments.float_moments``: NumPy's
pairwise mean of the sorted values, then of the squared deviations). Per group, here:

- whole-number groups: Int128 sums of deviations from the group's minimum in one
  ``group_by``, rounded once by ``integer_moments`` (exact, so the pivot cannot matter);
- the other groups: one sort by (group, value); the groups of one size are stacked as
  the rows of a matrix and reduced along the rows. A NumPy reduction along the last,
  contiguous axis runs the same pairwise sum on each row as on that row alone, so each
  group gets ``float_moments`` of its values to the bit. One reduction per distinct
  group size, not per group.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from servetrace.stats.grouped_order import GroupedSample
from servetrace.stats.moments import integer_moments

_EXACT = 2.0**53  # whole floats below this convert to int64 exactly


def float_moments_by(
    frame: pl.DataFrame, group: str, column: str
) -> dict[Any, tuple[float, float]]:
    """``(mean, population std)`` of the non-null, non-NaN values of ``column`` in each
    group that has some (groups without values are left out)."""
    v = pl.col(column)
    values = frame.select(group, column).filter(v.is_not_null() & ~v.is_nan())
    whole = ((v.abs() < _EXACT) & (v.floor() == v)).all().alias("_whole")
    kinds = values.group_by(group).agg(whole)
    values = values.join(kinds, on=group, how="left", nulls_equal=True)
    out: dict[Any, tuple[float, float]] = {}
    integral = values.filter(pl.col("_whole"))
    if integral.height:
        ints = v.cast(pl.Int64)
        d = ints.cast(pl.Int128) - ints.min().cast(pl.Int128)
        sums = integral.group_by(group).agg(
            pl.len().alias("n"),
            ints.min().alias("pivot"),
            d.sum().alias("s1"),
            (d * d).sum().alias("s2"),
        )
        for value, n, pivot, s1, s2 in sums.iter_rows():
            out[value] = integer_moments(int(n), int(pivot), int(s1), int(s2))
    rest = values.filter(~pl.col("_whole")).sort(group, column, nulls_last=True)
    if rest.height == 0:
        return out
    sizes = rest.group_by(group, maintain_order=True).len()
    keys, counts = sizes[group].to_list(), sizes["len"].to_numpy().astype(np.int64)
    starts = np.cumsum(counts) - counts
    ordered = rest[column].to_numpy().astype(np.float64)
    for size in np.unique(counts).tolist():
        rows = np.flatnonzero(counts == size)
        block = ordered[starts[rows, None] + np.arange(size)]  # each row one group, sorted
        means = block.mean(axis=1)
        stds = np.sqrt(np.mean(np.square(block - means[:, None]), axis=1))
        for i, mean, std in zip(rows.tolist(), means.tolist(), stds.tolist(), strict=True):
            out[keys[i]] = (float(mean), float(std))
    return out


def float_moments_of(sample: GroupedSample) -> list[tuple[float, float] | None]:
    """``float_moments_by`` of a float column already sorted by group (``GroupedSample``,
    no nulls or NaNs): per group index, ``(mean, std)`` or None for an empty group. The
    same two paths, without sorting the column again: whole-number groups from exact
    integer sums, the others as same-size rows of a matrix (the sorted order Polars'
    sort gives, so the same pairwise sums)."""
    ordered = np.asarray(sample.ordered, dtype=np.float64)
    sizes, offsets = sample.sizes, sample.offsets
    out: list[tuple[float, float] | None] = [None] * sizes.size
    filled = np.flatnonzero(sizes > 0)
    if filled.size == 0:
        return out
    whole_value = (np.abs(ordered) < _EXACT) & (np.floor(ordered) == ordered)
    not_whole = np.add.reduceat((~whole_value).astype(np.int64), offsets[filled])
    whole = filled[not_whole == 0]
    if whole.size:  # exact Int128 sums, one query (whole-number groups are rare)
        of_whole = np.repeat(np.isin(np.arange(sizes.size), whole), sizes)
        ints = pl.col("v")
        d = ints.cast(pl.Int128) - ints.min().cast(pl.Int128)
        sums = (
            pl.DataFrame(
                {
                    "g": np.repeat(np.arange(sizes.size), sizes)[of_whole],
                    "v": ordered[of_whole].astype(np.int64),
                }
            )
            .group_by("g")
            .agg(pl.len(), ints.min(), d.sum().alias("s1"), (d * d).sum().alias("s2"))
        )
        for i, n, pivot, s1, s2 in sums.iter_rows():
            out[i] = integer_moments(int(n), int(pivot), int(s1), int(s2))
    rest = filled[not_whole > 0]
    counts = sizes[rest]
    for size in np.unique(counts).tolist():
        rows = rest[counts == size]
        block = ordered[offsets[rows, None] + np.arange(size)]  # each row one group, sorted
        means = block.mean(axis=1)
        stds = np.sqrt(np.mean(np.square(block - means[:, None]), axis=1))
        for i, mean, std in zip(rows.tolist(), means.tolist(), stds.tolist(), strict=True):
            out[i] = (float(mean), float(std))
    return out
