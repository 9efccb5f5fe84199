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


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99, 0.999, 0.01, 0.3])
def test_every_size_from_100_to_3000_is_verified_and_exact(q: float) -> None:
    """A dense sweep: the guessed window brackets every crossing and the margin clears
    every candidate, so no size falls back to the exact sums, and the ranks are theirs."""
    sizes = np.arange(100, 3001)
    tail = _check(q, 0.95)
    low, high, verified = crossing_ranks(sizes, q, tail)
    assert verified.all()
    want_low, want_high = _exact_ranks(sizes, q, tail)
    assert low.tolist() == want_low.tolist() and high.tolist() == want_high.tolist()
    assert low.dtype == high.dtype == np.dtype(np.int64)


def test_a_tie_on_one_side_or_in_one_row_leaves_only_that_size_unverified() -> None:
    """q = 0.9 (not symmetric): τ on the lower crossing of n = 2000 is no tie for its upper
    tail, nor for the other sizes of the same matrix."""
    q = 0.9
    low, _ = _exact_ranks(np.array([2000]), q, _check(q, 0.95))
    tail = float(binomial.cdf([int(low[0]) - 1], 2000, q)[0])
    _, _, verified = crossing_ranks(np.array([2000, 2001, 2002, 2003]), q, tail)
    assert verified.tolist() == [False, True, True, True]


def test_the_margin_grows_with_the_row_s_rounding() -> None:
    """n = 2·10^9, q = 1/2: rows of ~125,000 terms, so the margin is (1e-10 + w·2^-50)·τ
    ≈ 2.1e-10·τ: a tail 1.8e-10 (relative) from a candidate's mass is not verified, one
    3e-10 away is."""
    n, q = 2 * 10**9, 0.5
    low, _ = _exact_ranks(np.array([n]), q, _check(q, 0.95))
    at = float(binomial.cdf([int(low[0]) - 1], n, q)[0])
    near = crossing_ranks(np.array([n]), q, at * (1 + 1.8e-10))
    clear = crossing_ranks(np.array([n]), q, at * (1 + 3e-10))
    assert (bool(near[2][0]), bool(clear[2][0])) == (False, True)
    assert int(clear[0][0]) == int(low[0])


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shift", [-40, 40])
def test_a_crossing_outside_one_sides_window_is_not_verified(
    upper: bool, shift: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only one tail's candidate window misses its crossing (before or past it): that
    size is handed back, though the other tail is fine."""
    guessed = binomial_ranks._window

    def off(n: np.ndarray, q: float, tail: float, side: bool) -> tuple[np.ndarray, np.ndarray]:
        a, b = guessed(n, q, tail, side)
        if bool(side) == upper:
            return np.clip(a + shift, 0, n), np.clip(b + shift, 0, n)
        return a, b

    monkeypatch.setattr(binomial_ranks, "_window", off)
    sizes = np.array([1000, 3001, 20_000])
    _, _, verified = crossing_ranks(sizes, 0.5, _check(0.5, 0.95))
    assert not verified.any()


def test_the_cornish_fisher_guess_is_within_one_point_of_each_crossing() -> None:
    """The candidate window is centred on the guess; the guess (normal quantile, skewness
    term, continuity correction) lands within one point of the exact crossing (c = l − 1
    below, d = u above) for every size and quantile tried, so the window can stay narrow."""
    sizes = np.concatenate([np.arange(100, 3001, 3), [10**4 + 7, 10**5, 10**6, 10**7]])
    checked = 0
    for q in (0.5, 0.9, 0.99, 0.999, 0.01, 0.3, 0.001):
        for confidence in (0.9, 0.95, 0.99):
            tail = _check(q, confidence)
            low, high = _exact_ranks(sizes, q, tail)
            for upper, crossing in ((False, low - 1), (True, high)):
                a, b = binomial_ranks._window(sizes, q, tail, upper)
                inside = (a > 0) & (b < sizes)  # windows not clipped at 0 or n
                off = np.abs(crossing - (a + b) / 2)[inside]
                assert off.max(initial=0.0) <= 1.0, (q, confidence, upper)
                checked += int(inside.sum())
    assert checked > 20_000  # 30,448 windows here
