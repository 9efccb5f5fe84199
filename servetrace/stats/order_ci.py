"""Distribution-free confidence intervals for percentiles, from order statistics.

For a sample of ``n`` independent draws of a continuous distribution with ``q``-quantile
ξ, the number of draws below ξ is ``B ~ Binomial(n, q)``, so for 1-based ranks ``l < u``
of the sorted sample ``X_(1) ≤ … ≤ X_(n)``::

    P(X_(l) ≤ ξ ≤ X_(u)) ≥ P(l ≤ B < u) = F(u − 1) − F(l − 1),     F the CDF of B.

With ``α = 1 − confidence`` the interval ``[X_(l), X_(u)]`` is **equal-tailed** (as
symmetric as a discrete B allows, each tail at most α/2):

- ``l`` = the largest rank in 1..n with ``P(B ≤ l − 1) ≤ α/2``;
- ``u`` = the smallest rank in 1..n with ``P(B ≥ u) ≤ α/2``;

so the coverage ``P(l ≤ B < u) ≥ 1 − α``. When ``(1 − q)^n > α/2`` no rank qualifies
as ``l`` and the lower bound is unavailable (−∞: the sample is too small to bound the
quantile from below at that confidence); when ``q^n > α/2`` the upper bound is (+∞).
A one-sided bound keeps its own guarantee (``P(X_(l) ≤ ξ) ≥ 1 − α/2``).

This is the interval of Hahn & Meeker (*Statistical Intervals*, §5.2) and of MLPerf
LoadGen's early stopping, before its sequential correction. Pooled ITL gaps are not
independent (the gaps of one request are correlated); their interval is the same
computation and is narrower than the truth.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from servetrace.stats.binomial import pmf_pairs, width_blocks, windows

IntArray = npt.NDArray[np.int64]
TIE_TOLERANCE = 1e-12


def _exact_ranks(sizes: IntArray, q: float, tail: float) -> tuple[IntArray, IntArray]:
    """``(l, u)`` of each size (all ≥ 1) from the exact tail sums (``stats.binomial``; no
    SciPy), every size at once.

    The pmf of every size's window is one elementwise pass; the tail sums are cumulative
    sums per size, done on matrices of the sizes whose windows are about as wide (padded
    with zeros, which leave a running sum's bits as they are): one pass per power of two
    of the window width, not one per size.
    At most ~``binomial.CELLS`` window points per matrix, so memory stays a few MB.
    """
    lo, hi = windows(sizes, q)
    width = hi - lo + 1
    below = np.zeros(sizes.size, dtype=np.int64)
    above = np.zeros(sizes.size, dtype=np.int64)
    for rows in width_blocks(width):
        _tails_of(rows, lo, width, sizes, q, tail, below, above)
    # l − 1 = the largest j with P(B ≤ j) ≤ tail; below the window P(B ≤ j) < 1e-25.
    l_rank = np.minimum(lo + below, sizes)  # j = lo + below − 1, so l = j + 1
    # u = the smallest j with P(B ≥ j) ≤ tail; above the window P(B ≥ j) < 1e-25.
    u_rank = np.maximum(lo + above, 1)
    return l_rank, np.where(u_rank <= sizes, u_rank, sizes + 1)


def _tails_of(
    rows: IntArray,
    lo: IntArray,
    width: IntArray,
    sizes: IntArray,
    q: float,
    tail: float,
    below: IntArray,
    above: IntArray,
) -> None:
    """Fill ``below`` (window points with P(B ≤ j) ≤ tail) and ``above`` (points with
    P(B ≥ j) > tail) of ``rows``, sizes whose windows are stacked in one zero-padded matrix."""
    inside = np.arange(int(width[rows].max())) < width[rows, None]
    x = np.broadcast_to(lo[rows, None] + np.arange(inside.shape[1]), inside.shape)[inside]
    n = np.broadcast_to(sizes[rows, None], inside.shape)[inside]
    padded = np.zeros(inside.shape, dtype=np.longdouble)
    padded[inside] = pmf_pairs(x, n, q)  # row-major: each size's window in order
    low = np.cumsum(padded, axis=1)  # P(B ≤ j), the same running sum as one size alone
    high = np.cumsum(padded[:, ::-1], axis=1)[:, ::-1]  # P(B ≥ j)
    below[rows] = ((low <= tail) & inside).sum(axis=1)
    above[rows] = width[rows] - ((high <= tail) & inside).sum(axis=1)


def _largest_lower(n: IntArray, q: float, tail: float) -> IntArray:
    """Per n, the largest ``l`` in 1..n with ``P(B ≤ l − 1) ≤ tail`` (SciPy; for scans)."""
    from scipy.stats import binom

    guess = np.asarray(binom.ppf(tail, n, q), dtype=np.float64)
    guess = np.nan_to_num(guess, nan=0.0).astype(np.int64)
    best = np.zeros_like(n)
    # ppf is the smallest j with F(j) ≥ tail; the answer j = l − 1 is next to it. Check
    # the neighbours with the CDF itself so floating ppf rounding cannot move a rank.
    for j in (guess - 2, guess - 1, guess, guess + 1):
        ok = (j >= 0) & (j <= n - 1) & (binom.cdf(j, n, q) <= tail)
        best = np.where(ok & (j + 1 > best), j + 1, best)
    return best


def _smallest_upper(n: IntArray, q: float, tail: float) -> IntArray:
    """Per n, the smallest ``u`` in 1..n with ``P(B ≥ u) ≤ tail`` (SciPy; for scans)."""
    from scipy.stats import binom

    guess = np.asarray(binom.isf(tail, n, q), dtype=np.float64)
    guess = np.nan_to_num(guess, nan=0.0).astype(np.int64)
    best = n + 1
    # P(B ≥ u) = sf(u − 1); isf gives the m = u − 1 up to rounding: check neighbours.
    for m in (guess + 2, guess + 1, guess, guess - 1, guess - 2):
        u = m + 1
        ok = (u >= 1) & (u <= n) & (binom.sf(m, n, q) <= tail)
        best = np.where(ok & (u < best), u, best)
    return best


def _check(q: float, confidence: float) -> float:
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    # An exact tie (P(B ≥ 1) = 0.05 with α/2 = 0.05) qualifies, as in exact arithmetic.
    return (1.0 - confidence) / 2.0 + TIE_TOLERANCE


def scan_ranks(sizes: IntArray, q: float, confidence: float) -> tuple[IntArray, IntArray]:
    """``ranks`` for very many sizes at once (``smallest_decisive_n`` scans up to 2^18 at a
    time): SciPy's O(1) incomplete beta, imported here and only here, since the exact sums
    of ``ranks`` cost O(sqrt(n)) per size. Both agree wherever the CDF is not within
    1e-12 of the tail (the tests check them against each other)."""
    tail = _check(q, confidence)
    return _largest_lower(sizes, q, tail), _smallest_upper(sizes, q, tail)


def ranks(n: int | IntArray, q: float, confidence: float) -> tuple[IntArray, IntArray]:
    """1-based ranks ``(l, u)`` of the interval for each n; 0 / n + 1 mean unavailable.

    Exact tail sums without SciPy (``stats.binomial``), once per distinct n, all in one
    pass (``--by`` asks for one size per metric and group). A size of 0 has neither
    bound (0, 1)."""
    tail = _check(q, confidence)
    sizes = np.atleast_1d(np.asarray(n, dtype=np.int64))
    distinct, where = np.unique(sizes, return_inverse=True)
    low = np.zeros(distinct.size, dtype=np.int64)
    high = np.ones(distinct.size, dtype=np.int64)
    some = distinct >= 1
    if some.any():
        low[some], high[some] = _exact_ranks(distinct[some], q, tail)
    return low[where.reshape(-1)], high[where.reshape(-1)]


def interval(
    ordered: npt.NDArray[np.float64], q: float, confidence: float
) -> tuple[float | None, float | None]:
    """``(X_(l), X_(u))`` of a sorted sample; None for a bound the sample cannot give."""
    n = int(ordered.size)
    if n == 0:
        return None, None
    low, high = ranks(n, q, confidence)
    lo = float(ordered[int(low[0]) - 1]) if low[0] >= 1 else None
    hi = float(ordered[int(high[0]) - 1]) if high[0] <= n else None
    return lo, hi


def smallest_decisive_n(n: int, q: float, share_below: float, confidence: float) -> int | None:
    """The smallest sample size n' ≥ n at which the interval would exclude a limit.

    Assumption: the limit keeps its position in the distribution — a fraction
    ``share_below`` of the samples lies on or below it (for ``<`` rules: strictly below),
    as in the observed sample, so ``⌊n'·share_below⌋`` order statistics of n' samples do.
    When ``share_below > q`` the interval ends inside once ``u(n') ≤ ⌊n'·share_below⌋``;
    when ``share_below < q`` it starts outside once ``l(n') > ⌊n'·share_below⌋``. Equal
    shares never decide (None), nor does a limit beyond every sample of a size we can
    scan (up to 2^31 samples).
    """
    if share_below == q or not 0.0 < q < 1.0:
        return None
    upper_side = share_below > q
    start, limit = max(n, 1), 2**31

    def hits(sizes: IntArray) -> npt.NDArray[np.bool_]:
        low, high = scan_ranks(sizes, q, confidence)
        below = np.floor(sizes * share_below).astype(np.int64)
        if upper_side:
            return np.asarray((high <= sizes) & (high <= below))
        return np.asarray((low >= 1) & (low > below))

    # Scan contiguous blocks, each twice as long as the last, so the first hit is the
    # smallest n'; blocks beyond 2^18 sizes are sampled on a grid (the answer is then
    # rounded up to at most 1/4 of a percent of itself).
    lo = start
    while lo <= limit:
        hi = min(lo * 2, limit)
        step = max(1, (hi - lo) // (1 << 18))
        sizes = np.arange(lo, hi + 1, step, dtype=np.int64)
        found = np.flatnonzero(hits(sizes))
        if found.size:
            return int(sizes[found[0]])
        if hi == limit:
            return None
        lo = hi + 1
    return None


def needed_for_bound(q: float, confidence: float, upper: bool) -> int:
    """The smallest n whose interval has an upper bound (``q^n ≤ α/2``: the top order
    statistic is then beyond the α/2 tail) or a lower one (``(1−q)^n ≤ α/2``)."""
    tail = (1.0 - confidence) / 2.0
    return max(1, math.ceil(math.log(tail) / math.log(q if upper else 1.0 - q)))


def needed_for_bounds(q: float, confidence: float) -> int:
    """The smallest n that gives both bounds."""
    return max(needed_for_bound(q, confidence, True), needed_for_bound(q, confidence, False))
