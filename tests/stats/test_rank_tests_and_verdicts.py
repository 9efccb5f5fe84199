"""servetrace.stats.rank_tests and verdicts: exact small cases worked out by hand."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from servetrace.stats.rank_tests import TestResult, paired_test, unpaired_test
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


def test_two_non_zero_differences_are_tested() -> None:
    # differences 1, 2: W- = 0; of the 2^2 sign patterns "++" and "--" are as extreme,
    # so the exact two-sided p = 2/4 = 0.5 (fewer than two would give p = 1 untested)
    result = paired_test([0, 0], [1, 2])
    assert result == TestResult("wilcoxon", 0.0, pytest.approx(0.5), 2, 2)


def test_nothing_to_test_is_a_named_result_with_its_sizes() -> None:
    # one non-zero difference of three pairs: statistic 0, p = 1, both sizes 3
    assert paired_test([1, 2, 3], [1, 2, 4]) == TestResult("wilcoxon", 0.0, 1.0, 3, 3)
    assert paired_test([], []) == TestResult("wilcoxon", 0.0, None, 0, 0)
    with pytest.raises(ValueError, match=r"^paired samples must have the same length$"):
        paired_test([1, 2], [1, 2, 3])


def test_a_zero_difference_is_split_between_the_signs() -> None:
    # differences 0, 1, 2, 3, 4, 5: |d| ranks 1..6, the zero's rank 1 split half to each
    # sign: W+ = 2+3+4+5+6 + 0.5 = 20.5, W- = 0.5 (dropping the zero would give W- = 0);
    # the p-value is scipy's own for zsplit (normal approximation: a zero rules out exact)
    diff = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    result = paired_test(np.zeros(6), diff)
    expected = sps.wilcoxon(diff, zero_method="zsplit", alternative="two-sided")
    assert result.statistic == 0.5
    assert result.p_value == pytest.approx(float(expected.pvalue), rel=1e-12)
    assert (result.n_baseline, result.n_candidate) == (6, 6)


def test_a_difference_that_is_not_a_number_gives_no_statistic_and_p_one() -> None:
    # inf - inf is NaN: scipy's statistic and p are NaN; the statistic is unknown (None)
    # and the test rejects nothing (p = 1); and NumPy does not warn (warnings are errors)
    result = paired_test([math.inf, 1.0, 2.0], [math.inf, 3.0, 5.0])
    assert result == TestResult("wilcoxon", None, 1.0, 3, 3)


def test_mann_whitney_of_a_single_candidate_value() -> None:
    # candidate 5 above baseline 1, 2, 3: U = 3, the largest of C(4,1) = 4 equally likely
    # positions; two-sided exact p = 2/4 = 0.5
    result = unpaired_test([1, 2, 3], [5])
    assert result == TestResult("mannwhitneyu", 3.0, pytest.approx(0.5), 3, 1)
    assert unpaired_test([1, 2, 3], [5, 6]).n_candidate == 2


def test_empty_and_constant_samples_are_named_results_with_their_sizes() -> None:
    assert unpaired_test([], [1.0, 2.0]) == TestResult("mannwhitneyu", None, None, 0, 2)
    assert unpaired_test([1.0, 2.0], []) == TestResult("mannwhitneyu", None, None, 2, 0)
    # one common value: U = n·m/2 = 2·3/2 = 3 (every pair a tie), p = 1
    assert unpaired_test([7.0, 7.0], [7.0] * 3) == TestResult("mannwhitneyu", 3.0, 1.0, 2, 3)


def test_the_verdict_passes_the_p_value_and_direction_on() -> None:
    change = assess_change(_ci(1.10, 1.02, 1.20), "higher")
    assert (change.p_value, change.better) == (0.01, "higher")


@pytest.mark.parametrize(
    ("ci", "min_change", "significant"),
    [
        # an interval missing a bound is no evidence of a change
        (_ci(0.5, None, 0.6), 0.05, False),  # type: ignore[arg-type]
        (_ci(2.0, 1.5, None), 0.05, False),  # type: ignore[arg-type]
        # no point ratio: nothing to judge (must not compare None)
        (dataclasses.replace(_ci(2.0, 1.5, 2.5), ratio=None), 0.05, False),
        # an interval ending exactly at 1 does not exclude 1, on either side
        (_ci(1.2, 1.0, 1.5), 0.05, False),
        (_ci(0.8, 0.6, 1.0), 0.05, False),
        # effect exactly min_change (1.5 - 1 = 0.5 exactly) is not larger than it
        (_ci(1.5, 1.2, 1.8), 0.5, False),
        # ratio 0.5: effect 1/0.5 - 1 = 1, below a min_change of 2
        (_ci(0.5, 0.4, 0.6), 2.0, False),
        # ratio 0 (the candidate never did it): an infinite effect, not a division by 0
        (_ci(0.0, 0.0, 0.5), 2.0, True),
    ],
)
def test_assess_change_edges(ci: RatioCI, min_change: float, significant: bool) -> None:
    change = assess_change(ci, "lower", min_change)
    assert change.significant is significant
    assert change.verdict == ("faster" if significant else "no significant change")
