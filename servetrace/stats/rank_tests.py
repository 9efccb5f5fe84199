"""Rank tests of the whole distribution (not of one statistic): Wilcoxon signed-rank on
paired differences, Mann-Whitney U for independent samples."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from servetrace.stats.describe import ArrayLike, paired_array, to_array


@dataclass(frozen=True)
class TestResult:
    """A rank test of the whole distribution (not of one statistic)."""

    __test__ = False  # not a pytest class

    name: str  # "wilcoxon" | "mannwhitneyu" | "none"
    statistic: float | None
    p_value: float | None
    n_baseline: int
    n_candidate: int


def paired_test(base: ArrayLike, cand: ArrayLike) -> TestResult:
    """Wilcoxon signed-rank test of paired differences ``cand - base`` (two-sided).

    Zero differences are split between the signs (Pratt's treatment is not used: with
    ``zsplit`` an all-zero difference gives p = 1 instead of a division by zero). Fewer
    than two non-zero differences give p = 1 without calling scipy.
    """
    b, c = paired_array(base), paired_array(cand)
    if b.size != c.size:
        raise ValueError("paired samples must have the same length")
    keep = ~(np.isnan(b) | np.isnan(c))
    # inf - inf is NaN, quietly: scipy then gives no statistic, read as unknown (None).
    with np.errstate(invalid="ignore"):
        diff = c[keep] - b[keep]
    n = int(diff.size)
    if np.count_nonzero(diff) < 2:
        return TestResult("wilcoxon", 0.0, 1.0 if n else None, n, n)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = sps.wilcoxon(diff, zero_method="zsplit", alternative="two-sided")
    return TestResult("wilcoxon", _finite(result.statistic), _p(result.pvalue), n, n)


def unpaired_test(base: ArrayLike, cand: ArrayLike) -> TestResult:
    """Mann-Whitney U test of two independent samples (two-sided; U of the candidate).

    Empty samples give p = None; samples with a single common value give p = 1.
    """
    b, c = to_array(base), to_array(cand)
    if b.size == 0 or c.size == 0:
        return TestResult("mannwhitneyu", None, None, int(b.size), int(c.size))
    low = min(b.min(), c.min())
    if low == max(b.max(), c.max()):
        return TestResult("mannwhitneyu", b.size * c.size / 2.0, 1.0, int(b.size), int(c.size))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = sps.mannwhitneyu(c, b, alternative="two-sided")
    return TestResult(
        "mannwhitneyu", _finite(result.statistic), _p(result.pvalue), int(b.size), int(c.size)
    )


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _p(value: float) -> float:
    value = float(value)
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 1.0
