"""servetrace.stats.rank_tests and verdicts: exact small cases worked out by hand."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.stats.rank_tests import paired_test, unpaired_test
from servetrace.stats.ratio import RatioCI
from servetrace.stats.verdicts import MIN_SAMPLES, assess_change


def test_mann_whitney_of_separated_samples() -> None:
    # every candidate value beats every baseline value: U = 3·3 = 9, the largest of the
    # C(6,3) = 20 equally likely rank splits; two-sided exact p = 2/20 = 0.1
    result = unpaired_test([1, 2, 3], [4, 5, 6])
    assert (result.name, result.statistic, result.n_baseline) == ("mannwhitneyu", 9.0, 3)
    assert result.p_value == pytest.approx(0.1)
    assert unpaired_test([2, 2], [2, 2]).p_value == 1.0  # one common value
    assert unpaired_test([], [1]).p_value is None


def test_wilcoxon_of_all_positive_differences() -> None:
    # differences 1..5 all positive: W- = 0; of the 2^5 sign patterns only "all +" and
    # "all -" are as extreme, so the exact two-sided p = 2/32 = 0.0625
    result = paired_test([0, 0, 0, 0, 0], [1, 2, 3, 4, 5])
    assert (result.name, result.statistic) == ("wilcoxon", 0.0)
    assert result.p_value == pytest.approx(0.0625)
    # fewer than two non-zero differences: nothing to test
    assert paired_test([1, 2, 3], [1, 2, 4]).p_value == 1.0


def _ci(ratio: float, low: float, high: float, n: int = 10) -> RatioCI:
    return RatioCI(
        "p99", 100.0, 100.0 * ratio, ratio, low, high, 0.01, 0.95, "bootstrap", 2000, 0, n, n
    )


@pytest.mark.parametrize(
    ("ci", "better", "significant", "verdict"),
    [
        # 1.10 with [1.02, 1.20]: excludes 1, effect 0.10 > 0.05, 10 values each: slower
        (_ci(1.10, 1.02, 1.20), "lower", True, "slower"),
        # the same for a higher-is-better metric (throughput): faster
        (_ci(1.10, 1.02, 1.20), "higher", True, "faster"),
        # 1/1.25 = 0.8 with [0.7, 0.9]: effect 1.25 - 1 = 0.25: faster
        (_ci(0.8, 0.7, 0.9), "lower", True, "faster"),
        # effect 0.04 is below min_change 0.05
        (_ci(1.04, 1.01, 1.07), "lower", False, "no significant change"),
        # the interval reaches below 1
        (_ci(1.10, 0.98, 1.20), "lower", False, "no significant change"),
        # nine values a side are too few
        (_ci(1.10, 1.02, 1.20, n=MIN_SAMPLES - 1), "lower", False, "no significant change"),
        # the interval lies above 1 but the point below: inconsistent, not called
        (_ci(0.9, 1.01, 1.2), "lower", False, "no significant change"),
    ],
)
def test_assess_change_by_hand(ci: RatioCI, better, significant: bool, verdict: str) -> None:
    change = assess_change(ci, better, 0.05)
    assert change.significant is significant
    assert change.verdict == verdict
    assert (change.ratio, change.ci_low, change.ci_high) == (ci.ratio, ci.ci_low, ci.ci_high)


def test_paired_values_with_a_null_on_either_side_drop_the_pair() -> None:
    """Pairs (1, 2), (4, 6), (5, 8) are kept; (None, 5) and (3, None) are dropped, from a
    list as from a Series: 3 differences, all positive, exact p = 2/8."""
    for base, cand in (
        ([1.0, None, 3.0, 4.0, 5.0], [2.0, 5.0, None, 6.0, 8.0]),
        (pl.Series([1, None, 3, 4, 5]), pl.Series([2, 5, None, 6, 8])),
    ):
        result = paired_test(base, cand)
        assert (result.n_baseline, result.statistic) == (3, 0.0)
        assert result.p_value == pytest.approx(0.25)
