"""servetrace.stats: golden numbers computed by hand, and properties of the bootstrap."""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from servetrace.render.compare_words import change_words
from servetrace.stats.bootstrap import (
    _order_stat_bootstrap,
    bootstrap_ratio_ci,
    bootstrap_ratio_cis,
)
from servetrace.stats.clusters import design_effect
from servetrace.stats.describe import describe, statistic
from servetrace.stats.names import STATISTICS, percentile_of
from servetrace.stats.rank_tests import paired_test, unpaired_test
from servetrace.stats.rates import rate_ratio_ci
from servetrace.stats.ratio import RatioCI
from servetrace.stats.verdicts import assess_change


@pytest.fixture(autouse=True)
def _no_warnings():
    """No numpy/scipy warning may leak out of the stats functions."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# --------------------------------------------------------------------------- describe
def test_describe_one_to_ten_by_hand() -> None:
    d = describe(list(range(1, 11)))
    assert d["count"] == 10
    assert d["mean"] == 5.5
    assert d["std"] == pytest.approx(math.sqrt(8.25))  # population: sum((x-5.5)^2)/10
    assert d["min"] == 1.0 and d["max"] == 10.0
    # linear interpolation: position (n-1)q = 9q between order statistics
    assert d["p50"] == pytest.approx(5.5)
    assert d["p90"] == pytest.approx(9.1)
    assert d["p95"] == pytest.approx(9.55)
    assert d["p99"] == pytest.approx(9.91)
    assert d["p99_9"] == pytest.approx(9.991)
    assert list(d) == list(STATISTICS)


def test_describe_empty_and_nulls() -> None:
    empty = describe([])
    assert empty["count"] == 0
    assert all(empty[k] is None for k in STATISTICS if k != "count")
    d = describe(pl.Series([1, None, 3], dtype=pl.Int64))
    assert d["count"] == 2 and d["mean"] == 2.0
    assert describe(np.array([1.0, np.nan, 3.0]))["count"] == 2


@pytest.mark.parametrize(
    ("stat", "q"),
    [
        ("p50", 50.0),
        ("p99_9", 99.9),
        ("min", 0.0),
        ("max", 100.0),
        ("p75", 75.0),
        ("median", 50.0),
        ("p999", 99.9),
        ("p100", 100.0),
        ("mean", None),
        ("p101", None),
        ("q99", None),
        ("p", None),
    ],
)
def test_percentile_names(stat: str, q: float | None) -> None:
    assert percentile_of(stat) == q


def test_statistic_matches_describe() -> None:
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    d = describe(values)
    for stat in ("mean", "std", "min", "p50", "p90", "p99", "max"):
        assert statistic(values, stat) == pytest.approx(d[stat])
    assert statistic(values, "p25") == pytest.approx(np.percentile(values, 25))
    assert statistic([], "p50") is None
    assert statistic([], "count") == 0


# --------------------------------------------------------------------------- bootstrap
@pytest.mark.parametrize("paired", [True, False])
def test_ratio_ci_on_constant_data_collapses_to_the_ratio(paired: bool) -> None:
    cis = bootstrap_ratio_cis(
        [5.0] * 20, [6.0] * 20, ["mean", "p50", "p99", "max"], paired=paired, resamples=500, seed=3
    )
    for ci in cis.values():
        assert ci.ratio == pytest.approx(1.2)
        assert ci.ci_low == pytest.approx(1.2) and ci.ci_high == pytest.approx(1.2)
        assert ci.p_value == pytest.approx(2 / 501)  # no resample at or below 1


def test_paired_constant_factor_collapses_and_identical_is_exactly_one() -> None:
    base = np.random.default_rng(0).lognormal(3, 1, 300)
    slow = bootstrap_ratio_ci(base, base * 1.2, "p90", paired=True, resamples=400)
    assert slow.ci_low == pytest.approx(1.2) and slow.ci_high == pytest.approx(1.2)
    same = bootstrap_ratio_ci(base, base, "p90", paired=True, resamples=400)
    assert (same.ratio, same.ci_low, same.ci_high, same.p_value) == (1.0, 1.0, 1.0, 1.0)


def test_bootstrap_is_seeded() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.lognormal(0, 1, 200), rng.lognormal(0.1, 1, 200)
    one = bootstrap_ratio_ci(a, b, "p90", paired=False, resamples=300, seed=7)
    two = bootstrap_ratio_ci(a, b, "p90", paired=False, resamples=300, seed=7)
    other = bootstrap_ratio_ci(a, b, "p90", paired=False, resamples=300, seed=8)
    assert one == two
    assert (one.ci_low, one.ci_high) != (other.ci_low, other.ci_high)
    assert one.seed == 7 and one.resamples == 300


positive = hs.floats(min_value=0.5, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(
    base=hs.lists(positive, min_size=2, max_size=40),
    factors=hs.lists(hs.floats(min_value=0.5, max_value=2.0), min_size=40, max_size=40),
    paired=hs.booleans(),
    stat=hs.sampled_from(["mean", "p50", "p90", "p99", "std", "max"]),
    seed=hs.integers(0, 2**16),
)
def test_swapping_sides_inverts_ratio_and_interval(
    base: list[float], factors: list[float], paired: bool, stat: str, seed: int
) -> None:
    cand = [b * f for b, f in zip(base, factors, strict=False)]
    if not paired:
        cand = cand[: max(2, len(cand) - 1)]
    forward = bootstrap_ratio_ci(base, cand, stat, paired, resamples=200, seed=seed)
    backward = bootstrap_ratio_ci(cand, base, stat, paired, resamples=200, seed=seed)
    assert forward.ratio is not None and backward.ratio is not None
    assert forward.ratio * backward.ratio == pytest.approx(1.0, rel=1e-9)
    if forward.ci_low and forward.ci_high and backward.ci_low and backward.ci_high:
        assert forward.ci_low * backward.ci_high == pytest.approx(1.0, rel=1e-9)
        assert forward.ci_high * backward.ci_low == pytest.approx(1.0, rel=1e-9)
    assert forward.p_value == pytest.approx(backward.p_value)


def test_interval_and_p_value_agree() -> None:
    rng = np.random.default_rng(5)
    for shift in (1.0, 1.02, 1.1, 1.3):
        a = rng.lognormal(0, 0.5, 400)
        b = rng.lognormal(math.log(shift), 0.5, 400)
        ci = bootstrap_ratio_ci(a, b, "p50", paired=False, resamples=1000, seed=1)
        assert ci.p_value is not None
        assert ci.excludes_one == (ci.p_value < 0.05) or abs(ci.p_value - 0.05) < 0.01


def test_order_statistic_bootstrap_matches_brute_force() -> None:
    """The Beta shortcut is the ordinary bootstrap of a percentile."""
    rng = np.random.default_rng(11)
    x = rng.lognormal(0, 1, 500)
    ordered = np.sort(x)
    fast = _order_stat_bootstrap(ordered, 90.0, x.size, 4000, np.random.default_rng(2))
    index = np.random.default_rng(3).integers(0, x.size, size=(4000, x.size))
    slow = np.percentile(x[index], 90.0, axis=1)
    assert fast.mean() == pytest.approx(slow.mean(), rel=0.01)
    assert fast.std() == pytest.approx(slow.std(), rel=0.08)


def test_m_out_of_n_keeps_the_interval_width() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.lognormal(0, 1, 4000), rng.lognormal(0, 1, 4000)
    full = bootstrap_ratio_ci(
        a, b, "mean", paired=True, resamples=800, seed=1, max_resample_size=10_000
    )
    capped = bootstrap_ratio_ci(
        a, b, "mean", paired=True, resamples=800, seed=1, max_resample_size=500
    )
    assert capped.m_baseline == 500 and full.m_baseline == 4000
    assert capped.ratio == full.ratio
    width = (full.ci_high - full.ci_low, capped.ci_high - capped.ci_low)
    assert width[1] == pytest.approx(width[0], rel=0.25)


def test_effective_sample_size_widens_the_interval() -> None:
    rng = np.random.default_rng(6)
    a, b = rng.lognormal(0, 1, 5000), rng.lognormal(0, 1, 5000)
    iid = bootstrap_ratio_ci(a, b, "p50", paired=False, resamples=800)
    clustered = bootstrap_ratio_ci(
        a, b, "p50", paired=False, resamples=800, n_eff_base=500, n_eff_cand=500
    )
    ratio = (clustered.ci_high - clustered.ci_low) / (iid.ci_high - iid.ci_low)
    assert ratio == pytest.approx(math.sqrt(10), rel=0.25)


def test_zero_statistics_give_defined_ratios() -> None:
    zeros = [0.0] * 30
    both = bootstrap_ratio_ci(zeros, zeros, "p50", paired=False, resamples=200)
    assert (both.ratio, both.ci_low, both.ci_high, both.p_value) == (1.0, 1.0, 1.0, 1.0)
    up = bootstrap_ratio_ci(zeros, [1.0] * 30, "mean", paired=True, resamples=200)
    assert up.ratio == math.inf and up.ci_low == math.inf


def test_empty_side_has_no_interval() -> None:
    ci = bootstrap_ratio_ci([], [1.0, 2.0], "p50", paired=False)
    assert ci.ratio is None and ci.ci_low is None and ci.method == "none"


def test_bootstrap_rejects_count_and_bad_arguments() -> None:
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0], "count", paired=False)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0, 2.0], "mean", paired=True)


# --------------------------------------------------------------------------- design effect
def test_design_effect() -> None:
    rng = np.random.default_rng(8)
    codes = np.repeat(np.arange(200), 10)
    assert design_effect(rng.normal(size=2000), codes) == pytest.approx(1.0, abs=0.2)
    # every value of a cluster equal: the cluster is one observation, deff = cluster size
    level = rng.normal(size=200)[codes]
    assert design_effect(level, codes) == pytest.approx(10.0, rel=0.05)
    assert design_effect(np.ones(50), np.arange(50)) == 1.0


# --------------------------------------------------------------------------- rates
def test_rate_ratio_by_hand() -> None:
    ci = rate_ratio_ci(np.ones(1000), np.ones(1100), base_exposure=10, cand_exposure=10)
    se = math.sqrt(1 / 1000 + 1 / 1100)
    z = 1.959963984540054
    assert ci.baseline == 100.0 and ci.candidate == 110.0
    assert ci.ratio == pytest.approx(1.1)
    assert ci.ci_low == pytest.approx(math.exp(math.log(1.1) - z * se))
    assert ci.ci_high == pytest.approx(math.exp(math.log(1.1) + z * se))
    assert ci.p_value == pytest.approx(math.erfc(math.log(1.1) / se / math.sqrt(2)))


def test_rate_ratio_edge_cases() -> None:
    none = rate_ratio_ci([], [])
    assert none.ratio == 1.0 and none.p_value == 1.0 and none.ci_low is None
    up = rate_ratio_ci([], [1.0] * 5)
    assert up.ratio == math.inf and up.ci_low is not None and up.ci_low > 1
    given_values = rate_ratio_ci(np.ones(10), np.ones(10), base_value=2.0, cand_value=3.0)
    assert given_values.ratio == 1.5


# --------------------------------------------------------------------------- rank tests
def test_paired_test_edge_cases_do_not_warn() -> None:
    assert paired_test([1, 2, 3], [1, 2, 3]).p_value == 1.0  # all differences zero
    assert paired_test([1], [2]).p_value == 1.0  # too few to test
    assert paired_test([], []).p_value is None
    exact = paired_test(np.zeros(7), np.arange(1, 8))  # 7 positive differences
    assert exact.name == "wilcoxon"
    assert exact.p_value == pytest.approx(2 / 2**7)


def test_unpaired_test_edge_cases_do_not_warn() -> None:
    assert unpaired_test([], [1.0]).p_value is None
    assert unpaired_test([1.0, 1.0], [1.0, 1.0]).p_value == 1.0
    exact = unpaired_test([1, 2, 3], [4, 5, 6])
    assert exact.name == "mannwhitneyu"
    assert exact.p_value == pytest.approx(0.1)  # 2 of 20 orderings are this extreme


# --------------------------------------------------------------------------- verdicts
def _ci(ratio: float, low: float, high: float, n: int = 100, method: str = "bootstrap"):
    return RatioCI("p99", 1.0, ratio, ratio, low, high, 0.01, 0.95, method, 2000, 0, n, n)


@pytest.mark.parametrize(
    ("ratio", "low", "high", "better", "verdict", "words"),
    [
        (1.14, 1.10, 1.18, "lower", "slower", "1.14x slower"),
        (1 / 1.08, 0.90, 0.95, "lower", "faster", "1.08x faster"),
        (1.02, 1.01, 1.03, "lower", "no significant change", "no significant change"),
        (1.14, 0.95, 1.30, "lower", "no significant change", "no significant change"),
        (1.25, 1.2, 1.3, "higher", "faster", "1.25x faster"),
        (0.8, 0.75, 0.85, "higher", "slower", "1.25x slower"),
        (1.2, 0.8, 0.9, "lower", "no significant change", "no significant change"),
    ],
)
def test_assess_change(ratio, low, high, better, verdict, words) -> None:
    change = assess_change(_ci(ratio, low, high), better, 0.05)
    assert change.verdict == verdict
    assert change_words(change.ratio, change.verdict) == words
    assert change.significant == (verdict != "no significant change")


def test_assess_change_needs_enough_samples_and_words_counts() -> None:
    assert not assess_change(_ci(2.0, 1.5, 2.5, n=5), "lower").significant
    assert assess_change(_ci(2.0, 1.5, 2.5, n=5, method="poisson"), "lower").significant
    change = assess_change(_ci(1.5, 1.2, 1.8), "lower")
    assert change_words(change.ratio, change.verdict, speed=False) == "1.50x worse"
    assert change_words(math.inf, "slower") == "slower (from or to zero)"


def test_effective_sizes_per_statistic_and_never_below_one_value() -> None:
    """``n_eff`` per statistic sets each one's resample size; below 1 it is 1."""
    rng = np.random.default_rng(9)
    a, b = rng.lognormal(0, 1, 400), rng.lognormal(0, 1, 400)
    per_stat = bootstrap_ratio_cis(
        a, b, ["p50"], paired=False, resamples=50, n_eff_base={"p50": 100}, n_eff_cand=40
    )["p50"]
    assert (per_stat.m_baseline, per_stat.m_candidate) == (100, 40)
    tiny = bootstrap_ratio_ci(a, b, "p50", paired=False, resamples=50, n_eff_base=0.2)
    assert tiny.m_baseline == 1


def test_percentiles_are_bootstrapped_at_the_full_sample_size() -> None:
    """Order statistics are drawn exactly whatever n, so no m-out-of-n cap applies to a
    percentile (the mean is capped at ``max_resample_size``)."""
    rng = np.random.default_rng(10)
    a, b = rng.lognormal(0, 1, 6000), rng.lognormal(0, 1, 6000)
    p50 = bootstrap_ratio_ci(a, b, "p50", paired=False, resamples=50)
    mean = bootstrap_ratio_ci(a, b, "mean", paired=False, resamples=50)
    assert (p50.m_baseline, p50.m_candidate) == (6000, 6000)
    assert (mean.m_baseline, mean.m_candidate) == (5000, 5000)


def test_the_one_statistic_form_passes_every_option_on() -> None:
    rng = np.random.default_rng(12)
    a, b = rng.lognormal(0, 1, 300), rng.lognormal(0, 1, 300)
    default = bootstrap_ratio_ci(a, b, "p50", paired=False, resamples=50)
    assert (default.seed, default.confidence) == (0, 0.95)
    given = bootstrap_ratio_ci(
        a, b, "p50", paired=False, resamples=50, confidence=0.9, n_eff_base=30, n_eff_cand=20
    )
    assert (given.confidence, given.m_baseline, given.m_candidate) == (0.9, 30, 20)


def test_the_interval_bounds_are_the_jth_order_statistics_of_the_resamples() -> None:
    """j = floor((1 − c)/2 · (B − 1)) from each end; the resamples do not depend on c.
    B = 40: j = floor(0.025 · 39) = 0 at 95 % as at 99.999 %: the extremes both times.
    B = 41: j = floor(0.025 · 40) = 1 at 95 % and floor(0.03 · 40) = 1 at 94 %, but 0 at
    99.999 %: one value in from each end, so strictly inside the extremes."""
    rng = np.random.default_rng(13)
    a, b = rng.lognormal(0, 1, 60), rng.lognormal(0, 1, 60)

    def bounds(resamples: int, confidence: float) -> tuple[float, float]:
        ci = bootstrap_ratio_ci(
            a, b, "mean", paired=False, resamples=resamples, confidence=confidence
        )
        assert ci.ci_low is not None and ci.ci_high is not None
        return ci.ci_low, ci.ci_high

    assert bounds(40, 0.95) == bounds(40, 0.99999)
    low, high = bounds(41, 0.95)
    extreme_low, extreme_high = bounds(41, 0.99999)
    assert extreme_low < low < high < extreme_high
    assert bounds(41, 0.94) == (low, high)
