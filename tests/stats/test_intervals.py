"""servetrace.stats.ratio, bootstrap, clusters and rates: small cases worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servetrace.stats.bootstrap import bootstrap_ratio_ci, bootstrap_ratio_cis
from servetrace.stats.clusters import design_effect
from servetrace.stats.rates import rate_ratio_ci
from servetrace.stats.ratio import RatioCI, ratio_of, ratios


def test_ratio_of_zero_and_infinity() -> None:
    assert ratio_of(3.0, 2.0) == 1.5
    assert ratio_of(0.0, 0.0) == 1.0  # no change
    assert ratio_of(1.0, 0.0) == math.inf
    out = ratios(np.array([0.0, 2.0, 3.0]), np.array([0.0, 0.0, 1.5]))
    assert out.tolist() == [1.0, math.inf, 2.0]


def test_paired_bootstrap_of_an_exact_doubling() -> None:
    # every candidate value is twice its baseline: every paired resample has ratio 2,
    # so the interval is [2, 2] and no resample is <= 1:
    # p = 2 (0 + 1) / (199 + 1) = 0.01
    base = np.arange(1.0, 21.0)
    ci = bootstrap_ratio_ci(base, 2 * base, "mean", paired=True, resamples=199, seed=0)
    assert (ci.ratio, ci.ci_low, ci.ci_high) == (2.0, 2.0, 2.0)
    assert ci.p_value == pytest.approx(0.01)
    assert ci.method == "paired bootstrap" and ci.n_baseline == ci.n_candidate == 20
    assert ci.excludes_one


def test_unpaired_percentile_of_constant_samples() -> None:
    # constant samples: every resampled p50 is the constant, the ratio 30/20 = 1.5
    ci = bootstrap_ratio_ci([20.0] * 15, [30.0] * 15, "p50", paired=False, resamples=100)
    assert (ci.ratio, ci.ci_low, ci.ci_high) == (1.5, 1.5, 1.5)
    assert ci.p_value == pytest.approx(2 / 101)


def test_design_effect_by_hand() -> None:
    # y = 1 1 | 0 0 | 1 1 in three clusters; mean 2/3; Σ(y - ȳ)² = 4/9·4 + 4/9·... = 4/3;
    # cluster sums of deviations 2/3, -4/3, 2/3, Σ² = 8/3; robust = 3/2 · 8/3 = 4;
    # design effect 4 / (4/3) = 3
    assert design_effect([1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 2, 2]) == pytest.approx(3.0)
    # balanced within every cluster: the cluster sums vanish, no design effect
    assert design_effect([1, 0, 1, 0, 1, 0], [0, 0, 1, 1, 2, 2]) == 1.0
    assert design_effect([5.0], [0]) == 1.0


def test_rate_ratio_by_hand() -> None:
    # 100 vs 121 unit events over 10 s: rates 10 and 12.1, ratio 1.21;
    # se(log ratio) = sqrt(100/100² + 121/121²) = sqrt(0.01 + 1/121) = 0.1351460795;
    # 95%: exp(log 1.21 ± 1.959964 · se) = 0.92843 … 1.57696; p = 2·Φ(-log 1.21 / se)
    ci = rate_ratio_ci(np.ones(100), np.ones(121), base_exposure=10.0, cand_exposure=10.0)
    assert isinstance(ci, RatioCI)
    assert (ci.baseline, ci.candidate) == (10.0, 12.1)
    assert ci.ratio == pytest.approx(1.21)
    assert ci.ci_low == pytest.approx(0.9284292596, rel=1e-9)
    assert ci.ci_high == pytest.approx(1.5769645181, rel=1e-9)
    assert ci.p_value == pytest.approx(0.1583990517, rel=1e-9)
    assert ci.method == "poisson" and not ci.excludes_one


def test_rate_ratio_of_nothing() -> None:
    ci = rate_ratio_ci([], [], base_exposure=1.0, cand_exposure=1.0)
    assert ci.ratio == 1.0 and ci.p_value == 1.0 and ci.ci_low is None


Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def _expected(
    baseline, candidate, ratio, centre, se, z=Z95, confidence=0.95, n=(0, 0), stat="rate"
):
    return RatioCI(
        stat=stat,
        baseline=baseline,
        candidate=candidate,
        ratio=ratio,
        ci_low=math.exp(centre - z * se),
        ci_high=math.exp(centre + z * se),
        p_value=math.erfc(abs(centre) / se / math.sqrt(2.0)),  # 2·Φ(-|centre|/se)
        confidence=confidence,
        method="poisson",
        resamples=0,
        seed=0,
        n_baseline=n[0],
        n_candidate=n[1],
    )


def _same(got: RatioCI, expected: RatioCI) -> None:
    for name, value in vars(expected).items():
        if isinstance(value, float) and not isinstance(value, bool):
            assert getattr(got, name) == pytest.approx(value, rel=1e-12), name
        else:
            assert getattr(got, name) == value, name


def test_rate_ratio_every_field_with_the_default_exposure_of_one() -> None:
    # one event against three: rates 1 and 3 per (default) unit exposure, ratio 3;
    # a total of exactly 1 is a real total (no continuity correction):
    # se = sqrt(1/1² + 3/3²) = sqrt(4/3)
    got = rate_ratio_ci([1.0], [1.0, 1.0, 1.0])
    _same(got, _expected(1.0, 3.0, 3.0, math.log(3.0), math.sqrt(4 / 3), n=(1, 3)))


def test_rate_ratio_takes_the_confidence_and_stat_given() -> None:
    # 2 events in 2 s against 4 in 2 s: ratio 2, se = sqrt(2/4 + 4/16) = sqrt(0.75);
    # 90 %: z = Φ⁻¹(0.95) = 1.6448536269514722
    got = rate_ratio_ci(
        [1.0, 1.0], [1.0] * 4, base_exposure=2.0, cand_exposure=2.0, confidence=0.9, stat="tok/s"
    )
    z90 = 1.6448536269514722
    want = _expected(1.0, 2.0, 2.0, math.log(2.0), math.sqrt(0.75), z90, 0.9, (2, 4), "tok/s")
    _same(got, want)


@pytest.mark.parametrize(("base_value", "cand_value"), [(2.0, 3.0), (3.0, 2.0)])
def test_given_rates_set_the_centre_and_the_contributions_the_spread(
    base_value: float, cand_value: float
) -> None:
    # ten unit events a side (their own ratio is 1); the given rates make the centre
    # log(cand/base); se = sqrt(10/100 + 10/100)
    got = rate_ratio_ci(np.ones(10), np.ones(10), base_value=base_value, cand_value=cand_value)
    ratio = cand_value / base_value
    want = _expected(base_value, cand_value, ratio, math.log(ratio), math.sqrt(0.2), n=(10, 10))
    _same(got, want)


def test_a_side_without_events_gets_half_an_event() -> None:
    # no baseline event over 2 s, 2 events over 4 s: ratio 0.5/0 = inf; the baseline
    # counts as 0.5 events (Σx² 0.25): centre = log((2/4) / (0.5/2)) = log 2,
    # se = sqrt(0.25/0.25 + 2/4) = sqrt(1.5)
    got = rate_ratio_ci([], [1.0, 1.0], base_exposure=2.0, cand_exposure=4.0)
    _same(got, _expected(0.0, 0.5, math.inf, math.log(2.0), math.sqrt(1.5), n=(0, 2)))
    # the mirror: the candidate had none, ratio 0, centre log((0.5/4) / (2/2)) = log(1/8)
    got = rate_ratio_ci([1.0, 1.0], [], base_exposure=2.0, cand_exposure=4.0)
    _same(got, _expected(1.0, 0.0, 0.0, math.log(0.125), math.sqrt(1.5), n=(2, 0)))
    # a side of exactly one event is one event, not the half-event correction: ratio 0,
    # centre log(0.5 / 1), se = sqrt(1/1 + 0.25/0.25)
    got = rate_ratio_ci([1.0], [])
    _same(got, _expected(1.0, 0.0, 0.0, math.log(0.5), math.sqrt(2.0), n=(1, 0)))


def test_a_zero_rate_given_with_no_exposure_centres_on_unit_exposures() -> None:
    # rates given (baseline 0, candidate 5) with exposures 0: ratio inf; the centre falls
    # back to the contributions over an exposure of 1: log(2 / 0.5) = log 4
    got = rate_ratio_ci(
        [], [1.0, 1.0], base_exposure=0.0, cand_exposure=0.0, base_value=0.0, cand_value=5.0
    )
    _same(got, _expected(0.0, 5.0, math.inf, math.log(4.0), math.sqrt(1.5), n=(0, 2)))


@pytest.mark.parametrize(("base_exposure", "cand_exposure"), [(0.0, 1.0), (1.0, 0.0)])
def test_a_rate_without_exposure_is_unavailable(base_exposure: float, cand_exposure: float) -> None:
    got = rate_ratio_ci([1.0, 1.0], [1.0], base_exposure=base_exposure, cand_exposure=cand_exposure)
    assert got == RatioCI(
        stat="rate",
        baseline=None if base_exposure == 0 else 2.0,
        candidate=None if cand_exposure == 0 else 1.0,
        ratio=None,
        ci_low=None,
        ci_high=None,
        p_value=None,
        confidence=0.95,
        method="none",
        resamples=0,
        seed=0,
        n_baseline=2,
        n_candidate=1,
    )


def test_no_events_on_either_side_is_no_change_with_no_interval() -> None:
    got = rate_ratio_ci([0.0, 0.0], [0.0] * 3, confidence=0.9, stat="req/s")
    assert got == RatioCI(
        stat="req/s",
        baseline=0.0,
        candidate=0.0,
        ratio=1.0,
        ci_low=None,
        ci_high=None,
        p_value=1.0,
        confidence=0.9,
        method="poisson",
        resamples=0,
        seed=0,
        n_baseline=2,
        n_candidate=3,
    )


def test_bootstrap_refusals_name_what_is_wrong() -> None:
    base, cand = [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match=r"^cannot bootstrap statistic 'count'$"):
        bootstrap_ratio_cis(base, cand, ["count"], paired=False)
    for confidence in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"^confidence must be between 0 and 1$"):
            bootstrap_ratio_cis(base, cand, ["mean"], paired=False, confidence=confidence)
    with pytest.raises(ValueError, match=r"^resamples must be at least 1$"):
        bootstrap_ratio_cis(base, cand, ["mean"], paired=False, resamples=0)
    with pytest.raises(ValueError, match=r"^paired samples must have the same length$"):
        bootstrap_ratio_cis(base, cand[:2], ["mean"], paired=True)
    # one resample is enough to run (its interval is that resample's ratio)
    one = bootstrap_ratio_cis(base, cand, ["mean"], paired=False, resamples=1)["mean"]
    assert one.resamples == 1 and one.ci_low == one.ci_high


def test_a_paired_bootstrap_drops_a_pair_with_nan_on_either_side() -> None:
    # pairs (1, 2), (4, 8), (5, 10) kept; (nan, 5) and (3, nan) dropped: ratio of means
    # 20/3 / 10/3 = 2 and every paired resample doubles exactly
    base = [1.0, math.nan, 3.0, 4.0, 5.0]
    cand = [2.0, 5.0, math.nan, 8.0, 10.0]
    ci = bootstrap_ratio_cis(base, cand, ["mean"], paired=True, resamples=50)["mean"]
    assert (ci.n_baseline, ci.n_candidate, ci.ratio) == (3, 3, 2.0)
    assert (ci.ci_low, ci.ci_high) == (2.0, 2.0)


@pytest.mark.parametrize("empty_side", ["baseline", "candidate"])
def test_a_bootstrap_with_an_empty_side_is_unavailable_with_every_field(empty_side: str) -> None:
    values, nothing = [1.0, 2.0], []
    base, cand = (nothing, values) if empty_side == "baseline" else (values, nothing)
    got = bootstrap_ratio_cis(
        base, cand, ["mean"], paired=False, resamples=7, seed=3, confidence=0.9
    )["mean"]
    assert got == RatioCI(
        stat="mean",
        baseline=None if empty_side == "baseline" else 1.5,
        candidate=1.5 if empty_side == "baseline" else None,
        ratio=None,
        ci_low=None,
        ci_high=None,
        p_value=None,
        confidence=0.9,
        method="none",
        resamples=7,
        seed=3,
        n_baseline=len(base),
        n_candidate=len(cand),
    )


def test_an_unpaired_bootstrap_of_a_one_value_side_runs_with_every_field() -> None:
    # constant sides 20 (15 values) and 30 (one value): every resampled mean is the
    # constant, so the ratio is 1.5 in every resample: interval [1.5, 1.5],
    # p = 2 (0 + 1) / (B + 1) with no resample <= 1; seed 0 by default
    got = bootstrap_ratio_cis([20.0] * 15, [30.0], ["mean"], paired=False, resamples=99)["mean"]
    assert got == RatioCI(
        stat="mean",
        baseline=20.0,
        candidate=30.0,
        ratio=1.5,
        ci_low=1.5,
        ci_high=1.5,
        p_value=pytest.approx(2 / 100),
        confidence=0.95,
        method="bootstrap",
        resamples=99,
        seed=0,
        n_baseline=15,
        n_candidate=1,
        m_baseline=15,
        m_candidate=1,
    )


def test_m_out_of_n_rescales_each_side_around_its_own_point() -> None:
    # resamples of 5 of 20 values, spread rescaled by sqrt(5/20) around each side's own
    # point: an exact doubling (paired) or constant sides (unpaired) stay exact —
    # rescaling around the other side's point would move them off 2 and 1.5
    base = np.arange(1.0, 21.0)
    paired = bootstrap_ratio_cis(
        base, 2 * base, ["mean"], paired=True, resamples=99, max_resample_size=5
    )["mean"]
    assert (paired.ci_low, paired.ci_high, paired.m_baseline) == (2.0, 2.0, 5)
    unpaired = bootstrap_ratio_cis(
        [20.0] * 20, [30.0] * 20, ["mean"], paired=False, resamples=99, max_resample_size=5
    )["mean"]
    assert unpaired.ci_low == pytest.approx(1.5, rel=1e-12)
    assert unpaired.ci_high == pytest.approx(1.5, rel=1e-12)
    assert (unpaired.m_baseline, unpaired.m_candidate) == (5, 5)


def test_rescale_by_hand() -> None:
    from servetrace.stats.bootstrap import _rescale

    boot = np.array([1.0, 16.0])
    # point 4, scale 1/2: 4·(1/4)^½ = 2 and 4·4^½ = 8 (the spread halved on the log scale)
    assert _rescale(4.0, boot, 0.5).tolist() == [2.0, 8.0]
    assert _rescale(4.0, boot, 2.0).tolist() == [0.25, 64.0]
    # nothing to rescale: scale 1, or a point that is 0, negative or not finite
    for point, scale in ((4.0, 1.0), (0.0, 0.5), (-1.0, 0.5), (math.inf, 0.5), (math.nan, 0.5)):
        assert _rescale(point, boot, scale) is boot
    # a negative resample has no real root (NaN) and 1e300 / 1e-300 overflows: both
    # without a warning (pytest makes warnings errors); the rescaled value stays positive
    out = _rescale(1e-300, np.array([-2.0, 1e300]), 0.5)
    assert math.isnan(out[0]) and out[1] > 0


def test_gather_stats_matches_numpy_row_by_row() -> None:
    # the statistics of each row of a (resamples, m) block: numpy's linear percentiles,
    # mean and (population) std of every row, whatever the row length; a percentile's
    # two order statistics must both be placed by the partition, even alone
    from servetrace.stats.bootstrap import _gather_stats

    rng = np.random.default_rng(7)
    stats = ["p0", "p1", "p25", "p50", "p90", "p99", "p99_9", "p100", "mean", "std"]
    for m in (1, 2, 3, 10, 101):
        block = rng.exponential(10.0, size=(40, m))
        # all at once (one partition for every percentile) and each alone
        got = _gather_stats(block.copy(), stats)
        for stat in stats:
            got_alone = _gather_stats(block.copy(), [stat])[stat]
            np.testing.assert_array_equal(got_alone, got[stat])
            if stat == "mean":
                want = block.mean(axis=1)
            elif stat == "std":
                want = block.std(axis=1)
            else:
                q = float(stat[1:].replace("_", "."))
                want = np.percentile(block, q, axis=1, method="linear")
            np.testing.assert_allclose(got[stat], want, rtol=1e-12, err_msg=f"{stat} m={m}")


def test_an_unpaired_side_rescales_m_out_of_n_by_the_square_root_of_m_over_n() -> None:
    from servetrace.stats.bootstrap import _resample_stats, _rescale, _unpaired_side

    values = np.arange(1.0, 21.0)
    point = float(values.mean())
    out, m = _unpaired_side(values, ["mean"], 0, None, 50, 3, 5, {"mean": point})
    raw = _resample_stats([values], ["mean"], 5, 50, 3, 0)[0]["mean"]
    assert m == 5
    np.testing.assert_array_equal(out["mean"], _rescale(point, raw, math.sqrt(5 / 20)))
    # one value: one value per resample (never two)
    one, m_one = _unpaired_side(np.array([3.0]), ["mean"], 0, None, 10, 0, 5, {"mean": 3.0})
    assert m_one == 1 and one["mean"].tolist() == [3.0] * 10


def test_resamples_draw_every_value_and_fresh_rows_in_every_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from servetrace.stats import bootstrap

    # blocks of 10 values: resamples of m = 5 come 2 per block, 7 resamples in 4 blocks
    monkeypatch.setattr(bootstrap, "_BLOCK_VALUES", 10)
    values = np.arange(1.0, 101.0)
    means = bootstrap._resample_stats([values], ["mean"], 5, 7, 0, 0)[0]["mean"]
    assert means.size == 7  # exactly the resamples asked, whatever the blocks
    assert np.unique(means).size == 7  # each block draws its own rows, none repeated
    # the first value is drawn like any other: in 200 resamples of 4 from (1, 0, 0, 0)
    # some contain it (all miss it with probability (3/4)^800)
    first = bootstrap._resample_stats([np.array([1.0, 0, 0, 0])], ["mean"], 4, 200, 0, 0)
    assert first[0]["mean"].max() > 0


def test_seed_and_side_give_independent_resamples() -> None:
    values = np.arange(1.0, 41.0)
    # unpaired sides of the same size draw independent resamples: x against 2x is not a
    # ratio of exactly 2 in every resample (that would be a paired bootstrap)
    ci = bootstrap_ratio_cis(values, 2 * values, ["mean"], paired=False, resamples=200)["mean"]
    assert ci.ratio == 2.0 and ci.ci_low < 2.0 < ci.ci_high
    # another seed, other resamples
    other = bootstrap_ratio_cis(values, 2 * values, ["mean"], paired=False, resamples=200, seed=1)[
        "mean"
    ]
    assert (other.ci_low, other.ci_high) != (ci.ci_low, ci.ci_high)


@pytest.mark.parametrize(("q", "m"), [(70.0, 5), (70.0, 4), (50.0, 5), (90.0, 3)])
def test_order_statistic_draws_have_the_exact_bootstrap_distribution(q: float, m: int) -> None:
    # the percentile of a resample of m values drawn with replacement from (1, 2, 4, 8,
    # 16), enumerated over all 5^m equally likely resamples (numpy's linear percentile),
    # against 100 000 order-statistic draws: the distribution functions agree within
    # 0.01 everywhere (the Kolmogorov distance of 10^5 draws is ~0.004 at 99 %)
    import itertools

    from servetrace.stats.bootstrap import _order_stat_bootstrap

    ordered = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    every = np.array(list(itertools.product(range(5), repeat=m)))
    # (rounded to 9 decimals: the two interpolate in a different order of operations)
    exact = np.sort(np.percentile(ordered[every], q, axis=1, method="linear")).round(9)
    draws = _order_stat_bootstrap(ordered, q, m, 100_000, np.random.default_rng(0))
    draws = np.sort(draws).round(9)
    grid = np.unique(np.concatenate([exact, draws]))
    f_exact = np.searchsorted(exact, grid, side="right") / exact.size
    f_draws = np.searchsorted(draws, grid, side="right") / draws.size
    assert np.abs(f_exact - f_draws).max() < 0.01
