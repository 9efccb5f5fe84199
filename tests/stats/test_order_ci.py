"""Order-statistic intervals for percentiles, against a brute-force binomial computation."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import binom

from servetrace.analysis.intervals import order_statistics, percentile_intervals
from servetrace.stats.order_ci import interval, needed_for_bounds, ranks, smallest_decisive_n


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


def test_polars_selection_is_the_order_statistic() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 1000, 4097):
        values = rng.integers(0, 1000, n)
        ordered = np.sort(values)
        wanted = {f"r{r}": r for r in {1, n, max(1, n // 3), max(1, n - 1)}}
        got = order_statistics(pl.Series(values), wanted)
        assert got == {k: float(ordered[r - 1]) for k, r in wanted.items()}


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
