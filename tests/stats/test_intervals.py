"""servetrace.stats.ratio, bootstrap, clusters and rates: small cases worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servetrace.stats.bootstrap import bootstrap_ratio_ci
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
