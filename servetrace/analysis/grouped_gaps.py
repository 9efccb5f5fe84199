"""Every ``--by`` group's sample of a metric, sorted once and described from the sort.

A trace's gaps outnumber its requests a thousand to one, so ``--by`` sorts them (and each
per-request metric) once by (group, value) (``stats.grouped_order``) and takes from that
one array each group's
``describe`` (count, min, percentiles, max by index; mean and std from exact integer
sums) and its percentile intervals (``grouped_intervals``). Groups are numbered by
their position in the sorted list of values (column ``CODE``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.summary import Distribution
from servetrace.stats.describe import STATISTICS, percentile_of
from servetrace.stats.grouped_order import GroupedSample, percentiles, sort_by_group
from servetrace.stats.moments import integer_moments

CODE = "_code"


def codes(frame: pl.DataFrame, group: str, values: Sequence[Any]) -> pl.DataFrame:
    """``frame`` with ``CODE``: the index of each row's group in ``values``, order kept."""
    table = pl.DataFrame(
        {group: list(values), CODE: np.arange(len(values), dtype=np.int64)},
        schema={group: frame.schema[group], CODE: pl.Int64},
    )
    return frame.join(table, on=group, how="left", nulls_equal=True, maintain_order="left")


def sample_of(frame: pl.DataFrame, column: str, groups: int) -> GroupedSample:
    """The non-null, non-NaN values of ``column`` (``frame`` has ``CODE``), by group."""
    value = pl.col(column)
    keep = value.is_not_null()
    if frame.schema[column].is_float():
        keep = keep & ~value.is_nan()
    part = frame.select(CODE, column).filter(keep)
    return sort_by_group(part[CODE].to_numpy(), part[column].to_numpy(), groups)


def describe_sample(
    sample: GroupedSample,
    values: Sequence[Any],
    moments: Mapping[Any, tuple[float, float]] | None = None,
) -> dict[Any, Distribution]:
    """``stats.describe`` of each group's sample (``grouped_figures.describe_groups`` of
    its column, from the sort): mean and std exact for integers, else from ``moments``
    (``stats.grouped_moments.float_moments_by`` of a float column)."""
    sizes = sample.sizes
    picked: dict[str, np.ndarray] = {}
    for name in STATISTICS:
        q = percentile_of(name)
        if q is None or name in ("mean", "std"):
            continue
        if q == 0.0:
            picked[name] = sample.at(np.ones_like(sizes))
        elif q == 100.0:
            picked[name] = sample.at(sizes)
        else:
            picked[name] = percentiles(sample, q / 100)
    sums = _deviation_sums(sample) if moments is None else ([], [], [])
    columns = {name: array.tolist() for name, array in picked.items()}
    out: dict[Any, Distribution] = {}
    for i, (value, n) in enumerate(zip(values, sizes.tolist(), strict=True)):
        if n == 0:
            out[value] = {name: (0 if name == "count" else None) for name in STATISTICS}
            continue
        if moments is None:
            mean, std = integer_moments(n, sums[0][i], sums[1][i], sums[2][i])
        else:
            mean, std = moments[value]
        found: dict[str, float | int | None] = {"count": n, "mean": mean, "std": std}
        out[value] = {
            name: found[name] if name in found else float(columns[name][i]) for name in STATISTICS
        }
    return out


_HALF = 21  # d = hi · 2^21 + lo, as ``stats.moments.integer_sums``
_INT64 = 2**63


def _deviation_sums(sample: GroupedSample) -> tuple[list[int], list[int], list[int]]:
    """Per group: its minimum, and the exact ``Σd``, ``Σd²`` of ``d = x − minimum``.

    Group sums of a sorted array are ``reduceat`` sums at the group offsets, in int64:
    ``d²`` as ``hi²·2^42 + 2·hi·lo·2^21 + lo²``, whose three sums are bounded first so
    none can overflow; beyond those bounds (hours-long gaps in groups of millions) the
    sums are Int128 in Polars."""
    sizes, offsets = sample.sizes, sample.offsets
    filled = np.flatnonzero(sizes > 0)
    n = len(sizes)
    pivots, s1, s2 = [0] * n, [0] * n, [0] * n
    if filled.size == 0:
        return pivots, s1, s2
    ordered = sample.ordered.astype(np.int64)
    minimum = ordered[offsets[filled]]  # sorted: the first of each group
    d = ordered - np.repeat(minimum, sizes[filled])
    widest, most = int(d.max()), int(sizes.max())
    hi_max, lo_max = widest >> _HALF, (1 << _HALF) - 1
    if most * widest >= _INT64 or most * max(hi_max * hi_max, hi_max * lo_max, lo_max**2) >= _INT64:
        return _wide_sums(sample, filled, minimum, d)
    hi, lo = d >> _HALF, d & ((1 << _HALF) - 1)
    at = offsets[filled]
    sum_d = np.add.reduceat(d, at).tolist()
    hh = np.add.reduceat(hi * hi, at).tolist()
    hl = np.add.reduceat(hi * lo, at).tolist()
    ll = np.add.reduceat(lo * lo, at).tolist()
    for j, i in enumerate(filled.tolist()):
        pivots[i] = int(minimum[j])
        s1[i] = sum_d[j]
        s2[i] = (hh[j] << (2 * _HALF)) + (hl[j] << (_HALF + 1)) + ll[j]
    return pivots, s1, s2


def _wide_sums(
    sample: GroupedSample, filled: np.ndarray, minimum: np.ndarray, d: np.ndarray
) -> tuple[list[int], list[int], list[int]]:
    n = len(sample.sizes)
    pivots, s1, s2 = [0] * n, [0] * n, [0] * n
    code = np.repeat(filled, sample.sizes[filled])
    dev = pl.col("d").cast(pl.Int128)
    sums = (
        pl.DataFrame({"c": code, "d": d})
        .group_by("c")
        .agg(dev.sum().alias("s1"), (dev * dev).sum().alias("s2"))
    )
    for c, one, two in sums.iter_rows():
        s1[c], s2[c] = int(one), int(two)
    for j, i in enumerate(filled.tolist()):
        pivots[i] = int(minimum[j])
    return pivots, s1, s2
