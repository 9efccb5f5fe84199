"""Mean and std that do not depend on order: the ones every report gives.

A float sum's rounding depends on the order of its terms (and a parallel sum's on how
the work was split), so the same values could give a std that differs in the 14th digit
from run to run, or between the streamed and the in-memory engine. These are functions of
the values alone, and vectorised (numpy; a Python loop runs only
over blocks of a million values):

- integers (every time in ns): ``d = x - pivot`` is split as ``hi · 2^21 + lo`` so that
  ``Σd`` and ``Σd² = Σhi²·2^42 + Σhi·lo·2^22 + Σlo²`` are int64 sums that cannot
  overflow (blocks of 2^15 values, ``|d| < 2^42``, i.e. 73 minutes in ns; wider ranges
  take 128-bit integers in Polars). Mean and variance are then exact rationals rounded
  once (``integer_moments``);
- floats (per-request means such as ``tpot_ns``, one per request) are summed in
  sorted order: not exact, but a function of the values alone, at the cost of a sort.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import polars as pl

_HALF = 21  # bits of the low half of an integer deviation
_MAX_SPLIT = 1 << (2 * _HALF)  # |d| below this: both halves fit 21 bits
_BLOCK = 1 << 15  # values per int64 block sum (2^20 · 2^42 < 2^63 would still be exact)
# A small sample's deviations are squared and summed in int64 directly: 2^10 · (2^26)^2
# = 2^62 cannot overflow, and a group of ``--by`` is usually that small.
_SMALL, _SMALL_SPAN = 1 << 10, 1 << 26


def integer_moments(n: int, pivot: int, sum_d: int, sum_d2: int) -> tuple[float, float]:
    """Mean and population std from exact sums of deviations ``d = x - pivot``.

    Both are rounded once from exact integers (Python's int division is correctly
    rounded), so they do not depend on the pivot or on the order of the values.
    """
    mean = (n * pivot + sum_d) / n
    spread = n * sum_d2 - sum_d * sum_d  # n² · variance, exact
    return mean, math.sqrt(max(spread, 0) / (n * n))


def integer_sums(values: npt.NDArray[np.int64], pivot: int = 0) -> tuple[int, int, int]:
    """``(n, Σd, Σd²)`` of integers, ``d = x - pivot``, exactly.

    Sums of several batches add up to the sums of the whole, so a streamed trace can
    keep them and get from ``integer_moments`` the very bits the in-memory path gets.
    """
    n = int(values.size)
    if n == 0:
        return 0, 0, 0
    low, high = int(values.min()), int(values.max())
    widest = max(abs(low - pivot), abs(high - pivot))
    if widest >= _MAX_SPLIT:
        return _wide_integer_sums(values, pivot)
    if n <= _SMALL and widest < _SMALL_SPAN:  # every square and their sum fit an int64
        d = values.astype(np.int64) - np.int64(pivot)
        return n, int(d.sum()), int(np.dot(d, d))
    mask = np.int64((1 << _HALF) - 1)
    s1 = s_hh = s_hl = s_ll = 0
    # Block by block into three buffers that stay in cache, each sum of products a dot
    # product: no temporary per product (3× faster than squaring into new arrays).
    block = min(n, _BLOCK)
    values = values.astype(np.int64, copy=False)
    d, hi, lo = (np.empty(block, dtype=np.int64) for _ in range(3))
    for start in range(0, n, _BLOCK):
        chunk = values[start : start + _BLOCK]
        size = chunk.shape[0]
        dd, hh, ll = d[:size], hi[:size], lo[:size]
        np.subtract(chunk, np.int64(pivot), out=dd)
        np.right_shift(dd, _HALF, out=hh)  # arithmetic: d = hi · 2^21 + lo, 0 <= lo < 2^21
        np.bitwise_and(dd, mask, out=ll)
        s1 += int(dd.sum())
        s_hh += int(np.dot(hh, hh))
        s_hl += int(np.dot(hh, ll))
        s_ll += int(np.dot(ll, ll))
    return n, s1, (s_hh << (2 * _HALF)) + (s_hl << (_HALF + 1)) + s_ll


def _wide_integer_sums(values: npt.NDArray[np.int64], pivot: int) -> tuple[int, int, int]:
    deviation = pl.col("v").cast(pl.Int128) - pl.lit(pivot, pl.Int128)
    s1, s2 = (
        pl.Series("v", values)
        .to_frame()
        .select(deviation.sum().alias("s1"), (deviation * deviation).sum().alias("s2"))
        .row(0)
    )
    return int(values.size), int(s1), int(s2)


def integer_series_moments(values: npt.NDArray[np.int64]) -> tuple[float, float]:
    """Mean and population std of integers (at least one), exactly rounded."""
    # Deviations from the minimum keep the squares small; the result does not depend
    # on the pivot, since both sums are exact.
    pivot = int(values.min())
    n, sum_d, sum_d2 = integer_sums(values, pivot)
    return integer_moments(n, pivot, sum_d, sum_d2)


def float_moments(values: npt.NDArray[np.float64]) -> tuple[float, float]:
    """Mean and population std of floats (at least one), independent of their order.

    The values are summed in sorted order (numpy's pairwise sum over a sorted copy), so
    the result is a function of the multiset: any permutation of the same values gives
    the same bits.
    """
    ordered = np.sort(values)
    mean = float(ordered.mean())
    return mean, float(np.sqrt(np.mean(np.square(ordered - mean))))
