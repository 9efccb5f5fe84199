"""Order-statistic intervals for percentiles, against a brute-force binomial computation."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import binom

from servetrace.analysis.intervals import percentile_intervals
from servetrace.stats import binomial, order_ci
from servetrace.stats.order_ci import (
    _exact_ranks,
    _largest_lower,
    _smallest_upper,
    interval,
    needed_for_bounds,
    ranks,
    scan_ranks,
    smallest_decisive_n,
)


def brute_ranks(n: int, q: float, confidence: float) -> tuple[int, int]:
    """The definition, term by term: pmf sums, every rank tried."""
    tail = (1 - confidence) / 2
    pmf = binom.pmf(np.arange(n + 1), n, q)
    below = [pmf[:k].sum() for k in range(n + 2)]  # below[k] = P(B <= k - 1) = P(B < k)
    lows = [k for k in range(1, n + 1) if below[k] <= tail + 1e-12]
    highs = [k for k in range(1, n + 1) if 1 - below[k] <= tail + 1e-12]
    return (max(lows) if lows else 0), (min(highs) if highs else n + 1)


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99, 0.999, 0.05])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_ranks_equal_brute_force(q: float, confidence: float) -> None:
    sizes = [*range(1, 120), 250, 368, 1000, 2733]
    low, high = ranks(np.array(sizes), q, confidence)
    for n, lo, hi in zip(sizes, low, high, strict=True):
        assert (lo, hi) == brute_ranks(n, q, confidence), n


def test_coverage_is_at_least_the_confidence() -> None:
    for n in (20, 100, 1000):
        (lo,), (hi,) = ranks(n, 0.9, 0.95)
        coverage = binom.cdf(hi - 1, n, 0.9) - binom.cdf(lo - 1, n, 0.9)
        assert coverage >= 0.95


def test_hand_computed_median_of_ten() -> None:
    # P(B <= 1) = 11/1024 = 0.0107 <= 0.025 < P(B <= 2) = 56/1024: l = 2, u = 9 by symmetry
    assert [int(r[0]) for r in ranks(10, 0.5, 0.95)] == [2, 9]
    values = np.arange(10, 110, 10, dtype=np.float64)
    assert interval(values, 0.5, 0.95) == (20.0, 90.0)


def test_too_few_samples_for_a_bound() -> None:
    # p99 of 100: 0.99^100 = 0.366 > 0.025, no upper rank; (0.01)^... lower rank exists
    lo, hi = interval(np.arange(1.0, 101.0), 0.99, 0.95)
    assert lo is not None and hi is None
    n = needed_for_bounds(0.99, 0.95)
    assert 0.99**n <= 0.025 < 0.99 ** (n - 1)
    assert n == math.ceil(math.log(0.025) / math.log(0.99)) == 368
    assert ranks(n, 0.99, 0.95)[1][0] == n and ranks(n - 1, 0.99, 0.95)[1][0] == n


def test_percentile_intervals_equal_sorted_sample_at_brute_ranks() -> None:
    rng = np.random.default_rng(4)
    values = rng.lognormal(3, 1, 2733)
    ordered = np.sort(values)
    block = percentile_intervals(pl.Series(values))
    for stat, q in {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}.items():
        lo, hi = brute_ranks(2733, q, 0.95)
        assert block["intervals"][stat] == [ordered[lo - 1], ordered[hi - 1]]
    lo, _ = brute_ranks(2733, 0.999, 0.95)
    assert block["intervals"]["p99_9"] == [ordered[lo - 1], None]
    assert block["needed"] == {"p99_9": needed_for_bounds(0.999, 0.95)}


def brute_decisive(n: int, q: float, share: float, confidence: float) -> int | None:
    for size in range(n, 20_000):
        lo, hi = brute_ranks(size, q, confidence)
        below = math.floor(size * share)
        if (share > q and hi <= size and hi <= below) or (share < q and lo >= 1 and lo > below):
            return size
    return None


@pytest.mark.parametrize(
    ("n", "q", "share"), [(50, 0.9, 0.97), (50, 0.9, 0.8), (30, 0.5, 0.6), (100, 0.99, 0.998)]
)
def test_smallest_decisive_n_equals_a_scan(n: int, q: float, share: float) -> None:
    assert smallest_decisive_n(n, q, share, 0.95) == brute_decisive(n, q, share, 0.95)


def test_a_limit_at_the_quantile_never_decides() -> None:
    assert smallest_decisive_n(100, 0.9, 0.9, 0.95) is None


def test_one_sample_bounds_an_extreme_quantile_from_one_side() -> None:
    """n = 1: P(X_(1) ≥ ξ_0.01) = 0.99 ≥ 0.975, so X_(1) is an upper bound of p1 (u = 1 = n);
    for p99 it is a lower bound (P(B ≤ 0) = 0.01 ≤ 0.025: l = 1). n = 10, p1: no lower
    rank ((0.99)^10 = 0.904 > 0.025), u = 2 (P(B ≥ 2) = 0.0043 ≤ 0.025 < P(B ≥ 1) = 0.096)."""
    assert interval(np.array([7.0]), 0.01, 0.95) == (None, 7.0)
    assert interval(np.array([7.0]), 0.99, 0.95) == (7.0, None)
    assert interval(np.arange(1.0, 11.0), 0.01, 0.95) == (None, 2.0)
    assert interval(np.array([]), 0.5, 0.95) == (None, None)


@pytest.mark.parametrize("q", [0.001, 0.01, 0.05, 0.1, 0.3])
def test_scan_ranks_equal_the_exact_sums_below_the_median(q: float) -> None:
    """The SciPy scan and the exact sums agree for low quantiles too, where the upper
    rank can be 1 (n = 1, 2 at p1) and the lower one is often missing."""
    sizes = np.array([*range(1, 80), 367, 2995, 10**4 + 7, 123_457])
    for confidence in (0.9, 0.95, 0.99):
        got = scan_ranks(sizes, q, confidence)
        want = ranks(sizes, q, confidence)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert scan_ranks(np.array([1, 2]), 0.01, 0.95)[1].tolist() == [1, 1]


def test_a_tail_mass_equal_to_the_tail_qualifies_in_both_methods() -> None:
    """Binomial(1, 1/2): P(B ≤ 0) = P(B ≥ 1) = 1/2; Binomial(2, 1/2): P(B ≤ 0) = P(B ≥ 2)
    = 1/4, all exact in binary: the definition's ≤ takes them (l, u) = (1, 1) and (1, 2)."""
    for n, tail, want in ((1, 0.5, [1, 1]), (2, 0.25, [1, 2])):
        sizes = np.array([n])
        assert [int(v[0]) for v in _exact_ranks(sizes, 0.5, tail)] == want
        scan = [int(_largest_lower(sizes, 0.5, tail)[0]), int(_smallest_upper(sizes, 0.5, tail)[0])]
        assert scan == want


@pytest.mark.parametrize("shift", [-2, -1, 0, 1, 2])
def test_scan_ranks_survive_a_ppf_or_isf_off_by_up_to_two(
    shift: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SciPy's ppf / isf only place the search; the CDF decides. A guess off by one or two
    either way (as floating rounding could make it) gives the same ranks (lower: −2..+1,
    the neighbours it checks)."""
    import scipy.stats

    sizes = np.array([5, 37, 500, 4097, 10**5])
    want = {q: ranks(sizes, q, 0.95) for q in (0.5, 0.9, 0.01)}
    real = scipy.stats.binom

    class Shifted:
        cdf, sf = real.cdf, real.sf

        @staticmethod
        def ppf(*args: object) -> np.ndarray:
            return np.asarray(real.ppf(*args)) + min(shift, 1)

        @staticmethod
        def isf(*args: object) -> np.ndarray:
            return np.asarray(real.isf(*args)) + shift

    monkeypatch.setattr(scipy.stats, "binom", Shifted)
    for q, (low, high) in want.items():
        got_low, got_high = scan_ranks(sizes, q, 0.95)
        assert got_high.tolist() == high.tolist(), (q, shift)
        assert got_low.tolist() == low.tolist(), (q, shift)


def test_ranks_are_integer_arrays() -> None:
    """Ranks index the sorted sample (``ordered[rank − 1]``, ``GroupedSample.at``)."""
    sizes = np.array([1, 10, 99, 100, 3000])
    tail = order_ci._check(0.9, 0.95)
    for pair in (
        ranks(sizes, 0.9, 0.95),
        scan_ranks(sizes, 0.9, 0.95),
        _exact_ranks(sizes, 0.9, tail),
    ):
        assert [a.dtype for a in pair] == [np.dtype(np.int64)] * 2


def test_the_exact_sums_cover_the_window_and_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each size's tail sums run over its window [⌊nq⌋ − W, ⌈nq⌉ + W] (stats.binomial):
    a wider row costs O(n) instead of O(σ) (at n = 10^9, q = 0.5: 10^9 points)."""
    widths: list[int] = []
    real = order_ci._tails_of

    def recording(rows: np.ndarray, lo: np.ndarray, width: np.ndarray, *rest: object) -> None:
        widths.extend(width[rows].tolist())
        real(rows, lo, width, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(order_ci, "_tails_of", recording)
    sizes = np.array([10, 1000, 123_457])
    _exact_ranks(sizes, 0.9, 0.025)
    lo, hi = binomial.windows(sizes, 0.9)
    assert sorted(widths) == sorted((hi - lo + 1).tolist())


@pytest.mark.skipif(
    np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps, reason="no extended precision"
)
def test_the_exact_tail_sums_run_in_extended_precision() -> None:
    """At a tail τ between the float64 running sum and the extended one, the lower rank
    follows the extended sum (the one closer to the true CDF)."""
    n, q = 10**6, 0.5
    lo, hi = binomial.windows(np.array([n]), q)
    x = np.arange(lo[0], hi[0] + 1)
    mass = binomial.pmf_pairs(x, np.full(x.size, n), q)
    wide = np.cumsum(mass.astype(np.longdouble))
    short = np.cumsum(mass)
    region = np.flatnonzero((short > 1e-4) & (short < 0.5) & (short < wide))
    assert region.size  # the two sums differ somewhere in the lower tail
    j = int(region[0])
    tau = float(short[j])  # float64 says P(B <= lo + j) <= tau; the extended sum says no
    low, _ = _exact_ranks(np.array([n]), q, tau)
    assert int(low[0]) == int(lo[0]) + int((wide <= tau).sum()) == int(lo[0]) + j


@pytest.mark.parametrize("q", [0.0, 1.0, 1.5, -0.1])
def test_smallest_decisive_n_of_a_quantile_outside_0_1_is_none(q: float) -> None:
    assert smallest_decisive_n(100, q, 0.5, 0.95) is None


def test_smallest_decisive_n_edges_by_hand() -> None:
    # every sample at or below the limit: p99's upper bound decides once it exists, at
    # u = n = 368 (0.99^368 <= 0.025 < 0.99^367)
    assert smallest_decisive_n(100, 0.99, 1.0, 0.95) == 368 == needed_for_bounds(0.99, 0.95)
    # one sample: a lower bound of p99 (l = 1) above the limit's floor(0.5) = 0 decides
    assert smallest_decisive_n(1, 0.99, 0.5, 0.95) == 1
    assert smallest_decisive_n(0, 0.99, 0.5, 0.95) == 1
    assert smallest_decisive_n(0, 0.01, 1.0, 0.95) == 1  # u = 1 <= floor(1 * 1.0)
    # the scan stops at 2^31 samples: that size is still tried, larger ones are not
    assert smallest_decisive_n(2**31, 0.5, 0.6, 0.95) == 2**31
    assert smallest_decisive_n(2**31 + 1, 0.5, 0.6, 0.95) is None


@pytest.mark.parametrize(("q", "share"), [(0.9, 0.97), (0.5, 0.6), (0.9, 0.85), (0.5, 0.4)])
def test_smallest_decisive_n_from_any_start_is_the_first_decisive_size(
    q: float, share: float
) -> None:
    """Against every size's ranks from the exact sums (not the scan's SciPy), from starts
    around the block boundaries of the doubling scan (s..2s, 2s+1..4s+2, ...)."""
    sizes = np.arange(1, 5001)
    low, high = ranks(sizes, q, 0.95)
    below = np.floor(sizes * share).astype(np.int64)
    hit = (high <= sizes) & (high <= below) if share > q else (low >= 1) & (low > below)
    decisive = sizes[hit]
    first = int(decisive[0])
    starts = {*range(0, 8), first - 1, first, first + 1}
    starts |= {first // 2 + d for d in (-2, -1, 0, 1)} | {(first - 2) // 4 + d for d in (-1, 0, 1)}
    for start in sorted(s for s in starts if s >= 0):
        want = int(decisive[decisive >= max(start, 1)][0])
        assert smallest_decisive_n(start, q, share, 0.95) == want, start


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5])
def test_a_quantile_or_confidence_outside_0_1_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"quantile must be in \(0, 1\), got {bad}"):
        ranks(10, bad, 0.95)
    with pytest.raises(ValueError, match=rf"confidence must be in \(0, 1\), got {bad}"):
        ranks(10, 0.5, bad)
