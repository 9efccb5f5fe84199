"""The verified short tail sums (stats/binomial_ranks.py) give the exact method's ranks,
and hand a size back unverified whenever they cannot vouch for it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from servetrace.stats import binomial, binomial_ranks, order_ci
from servetrace.stats.binomial_ranks import crossing_ranks, fast_enough
from servetrace.stats.order_ci import _check, _exact_ranks, ranks

QUANTILES = [0.5, 0.9, 0.95, 0.99, 0.999, 0.3, 0.05, 0.001]
SIZES = np.array(
    [*range(100, 4000, 7), 4999, 10**4 + 7, 123_457, 999_983, 10**6, 3 * 10**6 + 1, 10**7]
)


@pytest.mark.parametrize("q", QUANTILES)
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_verified_ranks_equal_the_exact_sums(q: float, confidence: float) -> None:
    tail = _check(q, confidence)
    sizes = SIZES  # all from 100 on: fast_enough
    low, high, verified = crossing_ranks(sizes, q, tail)
    assert verified.all()  # else the comparison below would test the fallback only
    want_low, want_high = _exact_ranks(sizes, q, tail)
    assert low.tolist() == want_low.tolist()
    assert high.tolist() == want_high.tolist()


def test_hand_computed_median_of_a_hundred() -> None:
    # Binomial(100, 1/2): P(B <= 39) = 0.0176, P(B <= 40) = 0.0284 -> l = 40; by
    # symmetry P(B >= 61) = 0.0176 <= 0.025 < P(B >= 60) -> u = 61 (SciPy agrees).
    low, high, verified = crossing_ranks(np.array([100]), 0.5, _check(0.5, 0.95))
    assert (int(low[0]), int(high[0]), bool(verified[0])) == (40, 61, True)
    assert binom.cdf(39, 100, 0.5) <= 0.025 < binom.cdf(40, 100, 0.5)


def test_a_tail_at_a_candidate_is_left_to_the_exact_sums() -> None:
    """τ equal to P(B ≤ j) at a candidate: no margin either side, so not verified; the
    ranks then come from the exact method (and equal the definition)."""
    n, q = 2000, 0.5
    exact_low, _ = _exact_ranks(np.array([n]), q, _check(q, 0.95))
    j = int(exact_low[0]) - 1  # the lower crossing: P(B <= j) <= τ
    tail = float(binomial.cdf([j], n, q)[0])
    _, _, verified = crossing_ranks(np.array([n]), q, tail)
    assert not verified[0]
    got = order_ci._ranks_many(np.array([n]), q, tail)
    want = _exact_ranks(np.array([n]), q, tail)
    assert [int(v[0]) for v in got] == [int(v[0]) for v in want]


def test_a_crossing_outside_the_guessed_window_is_not_verified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guessed = binomial_ranks._window

    def off(n: np.ndarray, q: float, tail: float, upper: bool) -> tuple[np.ndarray, np.ndarray]:
        a, b = guessed(n, q, tail, upper)
        return np.minimum(a + 40, n), np.minimum(b + 40, n)  # past the crossing

    monkeypatch.setattr(binomial_ranks, "_window", off)
    sizes = np.array([1000, 3001, 20_000])
    tail = _check(0.5, 0.95)
    _, _, verified = crossing_ranks(sizes, 0.5, tail)
    assert not verified.any()
    got = ranks(sizes, 0.5, 0.95)
    want = _exact_ranks(sizes, 0.5, tail)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]


def test_a_sum_stopped_short_is_not_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """Terms only over the candidate window: the mass left out is larger than the margin."""
    monkeypatch.setattr(binomial_ranks, "_REACH_SIGMAS", 0.0)
    monkeypatch.setattr(binomial_ranks, "_REACH_EXTRA", 0)
    sizes = np.array([1000, 5000, 10**5])
    _, _, verified = crossing_ranks(sizes, 0.9, _check(0.9, 0.95))
    assert not verified.any()


def test_sizes_from_100_take_the_short_sums() -> None:
    assert fast_enough(np.array([1, 2, 99, 100, 3000])).tolist() == [False] * 3 + [True] * 2
