"""Describe a sample: the statistics every report gives, and how they are computed.

``describe`` gives ``STATISTICS`` (count, mean, population std, min, p50, p90, p95, p99,
p99_9, max); ``statistic`` gives one of them, or any ``pNN``. Nulls and NaNs are dropped.

Percentiles use linear interpolation between order statistics (numpy's default,
``PERCENTILE_METHOD``), computed by Polars for every container, so a list, an array and
a Series of the same values give the same bits. Mean and standard deviation are
**deterministic functions of the values as a multiset**: the same values in any order,
on any number of threads, in memory or streamed, give the same bits. A parallel float
sum does not (its rounding depends on how the work was split; the pooled ITL std of one
trace differed in the 14th digit from run to run), so ``servetrace.stats.moments`` sums
integer samples (every time in ns) exactly and rounds once, and float samples
(per-request means such as ``tpot_ns``) in sorted order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.stats.moments import float_moments, integer_series_moments
from servetrace.stats.names import PERCENTILE_STATS, STATISTICS, canonical_stat, percentile_of

FloatArray = npt.NDArray[np.float64]
ArrayLike = pl.Series | npt.NDArray[np.generic] | Sequence[float] | Sequence[int]


# --------------------------------------------------------------------------- moments
def to_array(values: ArrayLike) -> FloatArray:
    """Float64 numpy array of the values, nulls and NaNs dropped."""
    if isinstance(values, pl.Series):
        values = values.drop_nulls().cast(pl.Float64).to_numpy()
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size and np.isnan(array).any():
        array = array[~np.isnan(array)]
    return array


def paired_array(values: ArrayLike) -> FloatArray:
    """Float64 array aligned with the input: nulls become NaN, nothing is dropped."""
    if isinstance(values, pl.Series):
        return values.cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)
    return np.asarray(values, dtype=np.float64).ravel()


def _integral(array: FloatArray) -> bool:
    """Whether every value is a whole number that float64 holds exactly."""
    return bool(np.all(np.abs(array) < 2.0**53)) and bool(np.all(np.floor(array) == array))


def moments(values: ArrayLike) -> tuple[float, float] | None:
    """``(mean, population std)`` of the values, order-independent (module docstring).

    None when there are no values. Integer dtypes, and float arrays holding only whole
    numbers, take the exact integer path; other floats a sum in sorted order
    (``servetrace.stats.moments``).
    """
    if isinstance(values, pl.Series) and values.dtype.is_integer():
        ints = values.drop_nulls().cast(pl.Int64).to_numpy()
        return integer_series_moments(ints) if ints.size else None
    array = to_array(values)
    if array.size == 0:
        return None
    return _float_moments(array)


def _float_moments(array: FloatArray) -> tuple[float, float]:
    """Moments of floats: whole numbers take the exact integer path."""
    if _integral(array):
        return integer_series_moments(array.astype(np.int64))
    return float_moments(array)


# --------------------------------------------------------------------------- describe
def statistic(values: ArrayLike, stat: str) -> float | None:
    """One statistic of the values (None when there are none): bit for bit the number
    ``describe`` gives, so a rule, a compare row and the report never disagree."""
    stat = canonical_stat(stat)
    if stat == "count":
        return float(to_array(values).size)
    if stat in ("mean", "std"):
        result = moments(values)
        if result is None:
            return None
        return result[0] if stat == "mean" else result[1]
    q = percentile_of(stat)
    if q is None:
        raise ValueError(f"unknown statistic {stat!r}")
    ordered = sorted_values(values)
    return percentile_sorted(ordered, q) if ordered.size else None


def _empty() -> dict[str, float | int | None]:
    return {name: (0 if name == "count" else None) for name in STATISTICS}


def sorted_values(values: ArrayLike) -> npt.NDArray[np.generic]:
    """The values without nulls or NaNs, ascending (integers stay integers)."""
    if isinstance(values, pl.Series) and values.dtype.is_numeric():
        values = values.drop_nulls()
        if values.dtype.is_float():
            values = values.drop_nans()
        return np.sort(values.to_numpy())
    return np.sort(to_array(values))


def percentile_sorted(ordered: npt.NDArray[np.generic], q: float) -> float:
    """The ``q``-th percentile (0-100) of a sorted, non-empty sample: linear interpolation
    between the order statistics around rank ``(n − 1) · q / 100``, computed as Polars'
    ``quantile(interpolation="linear")`` computes it (the same bits: the tests hold the
    two equal), so a percentile is the same number whichever engine found it."""
    n = ordered.size
    if q <= 0.0:
        return float(ordered[0])
    if q >= 100.0:
        return float(ordered[n - 1])
    position = (n - 1) * (q / 100)
    below = int(position)
    lower = float(ordered[below])
    upper = float(ordered[min(math.ceil(position), n - 1)])
    if lower == upper:
        return lower
    return (position - below) * (upper - lower) + lower


# Each percentile statistic of the report with its percentile (0-100), parsed once.
_PERCENTILE_POINTS = tuple((name, percentile_of(name) or 0.0) for name in PERCENTILE_STATS)


def describe_sorted(ordered: npt.NDArray[np.generic]) -> dict[str, float | int | None]:
    """``describe`` of a sample already sorted, without nulls or NaNs (one group's slice
    of a sorted column: every statistic is an index, the moments exact sums)."""
    if ordered.size == 0:
        return _empty()
    if ordered.dtype.kind in "iu":
        mean, std = integer_series_moments(ordered.astype(np.int64, copy=False))
    else:
        mean, std = _float_moments(ordered.astype(np.float64, copy=False))
    row: dict[str, float | int | None] = {"count": int(ordered.size), "mean": mean, "std": std}
    for name, q in _PERCENTILE_POINTS:
        row[name] = percentile_sorted(ordered, q)
    return {name: row[name] for name in STATISTICS}


def describe(values: ArrayLike) -> dict[str, float | int | None]:
    """count, mean, std (population), min, p50, p90, p95, p99, p99_9, max.

    With no values, count is 0 and the rest None. Whatever the container (a Series, an
    array, a list), the values are sorted once and described from the sort.
    """
    return describe_sorted(sorted_values(values))
