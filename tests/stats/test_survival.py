"""Kaplan–Meier: by hand, and against lifelines' KaplanMeierFitter (to 1e-9)."""

from __future__ import annotations

import numpy as np
import pytest

from servetrace.stats.survival import kaplan_meier

lifelines = pytest.importorskip("lifelines")
qth_survival_time = pytest.importorskip("lifelines.utils").qth_survival_time


def test_hand_computed_step_function_and_quantiles() -> None:
    # events at 1, 2, 3, 5; censored at 2 (still at risk at 2) and at 4
    fit = kaplan_meier([1, 2, 2, 3, 4, 5], [1, 1, 0, 1, 0, 1])
    assert fit.times.tolist() == [1, 2, 3, 5]
    assert fit.at_risk.tolist() == [6, 5, 3, 1]
    assert fit.survival == pytest.approx([5 / 6, 4 / 6, 4 / 9, 0.0], abs=1e-15)
    assert (fit.events, fit.censored) == (4, 2)
    assert fit.quantile(0.5) == 3  # S(2) = 0.667 > 0.5, S(3) = 0.444 <= 0.5
    assert fit.quantile(0.3) == 2  # S(2) = 0.667 <= 0.7
    assert fit.quantile(0.99) == 5
    assert fit.at(0.5) == 1.0 and fit.at(2.5) == pytest.approx(4 / 6)


def test_exact_tie_takes_the_smaller_time() -> None:
    fit = kaplan_meier(np.arange(1, 11), np.ones(10))  # S(5) = 0.5 exactly
    assert fit.quantile(0.5) == 5


def test_unreachable_quantile_is_none_with_the_floor() -> None:
    fit = kaplan_meier([1, 2, 3, 4], [1, 1, 0, 0])  # S stops at 0.5
    assert fit.floor == pytest.approx(0.5)
    assert fit.quantile(0.5) == 2
    assert fit.quantile(0.9) is None


def test_no_events() -> None:
    fit = kaplan_meier([3.0, 4.0], [0, 0])
    assert fit.floor == 1.0 and fit.quantile(0.5) is None and fit.events == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_lifelines(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    durations = np.round(rng.lognormal(5, 1, n))  # whole ms: ties between samples
    observed = rng.random(n) > 0.3
    durations[rng.random(n) < 0.05] = durations.max()  # a censored tail
    observed[durations == durations.max()] = False
    ours = kaplan_meier(durations, observed)
    fitter = lifelines.KaplanMeierFitter().fit(durations, observed)
    curve = fitter.survival_function_.iloc[:, 0]
    theirs = curve.loc[ours.times].to_numpy()
    assert np.max(np.abs(ours.survival - theirs)) < 1e-9
    # lifelines' table keeps every time (censorings too): S is flat across those
    flat = curve.loc[~curve.index.isin(ours.times) & (curve.index > 0)]
    assert np.allclose([ours.at(t) for t in flat.index], flat.to_numpy(), atol=1e-9, rtol=0)
    for q in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
        # what KaplanMeierFitter.percentile(1 - q) returns (without its approximation
        # warning: on the fitted timeline the step function is exact)
        expected = qth_survival_time(1 - q, fitter.survival_function_)
        got = ours.quantile(q)
        if np.isinf(expected):
            assert got is None
        else:
            assert got == pytest.approx(expected, abs=1e-9)
    assert fitter.median_survival_time_ == ours.quantile(0.5)


def test_survival_at_an_event_time_is_the_survival_after_it() -> None:
    """Right-continuous: S(2) already counts the event at 2 (6 at risk at 1, 5 at 2)."""
    fit = kaplan_meier([1, 2, 2, 3, 4, 5], [1, 1, 0, 1, 0, 1])
    assert fit.at(1) == pytest.approx(5 / 6)
    assert fit.at(2) == pytest.approx(4 / 6)
    assert fit.at(5) == 0.0


def test_no_samples_fit_an_empty_curve() -> None:
    fit = kaplan_meier([], [])
    assert fit.times.size == 0 and fit.at_risk.size == 0
    assert (fit.events, fit.censored, fit.floor) == (0, 0, 1.0)
    assert fit.quantile(0.5) is None and fit.at(3.0) == 1.0


def test_at_risk_counts_are_integers() -> None:
    fit = kaplan_meier([1, 2, 2, 3], [1, 1, 0, 1])
    assert fit.at_risk.dtype == np.int64 and fit.at_risk.tolist() == [4, 3, 1]


@pytest.mark.parametrize(
    ("durations", "observed", "message"),
    [
        ([1.0, 2.0], [1], "durations and observed flags differ in length"),
        ([1.0, float("inf")], [1, 1], "durations must be finite"),
        ([1.0, None], [1, 1], "durations must be finite"),  # a null duration
    ],
)
def test_bad_samples_are_refused_by_name(durations, observed, message) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        kaplan_meier(durations, observed)


@pytest.mark.parametrize("q", [0.0, 1.0, 1.5])
def test_a_quantile_outside_zero_one_is_refused(q: float) -> None:
    fit = kaplan_meier([1, 2], [1, 1])
    with pytest.raises(ValueError, match=rf"^quantile must be in \(0, 1\), got {q}$"):
        fit.quantile(q)
