"""A ratio ``candidate / baseline`` of one statistic, with its interval: the result every
interval method of this package returns (``bootstrap``, ``rates``) and ``verdicts`` judges."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def ratio_of(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` with 0/0 = 1 (no change) and x/0 = inf."""
    if denominator == 0:
        return 1.0 if numerator == 0 else math.inf
    return numerator / denominator


def ratios(numerator: FloatArray, denominator: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = numerator / denominator
    zero = denominator == 0
    if zero.any():
        out[zero] = np.where(numerator[zero] == 0, 1.0, np.inf)
    return out


@dataclass(frozen=True)
class RatioCI:
    """A ratio ``candidate / baseline`` of one statistic with its interval and p-value."""

    stat: str
    baseline: float | None
    candidate: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    confidence: float
    method: str  # "paired bootstrap" | "bootstrap" | "poisson" | "none"
    resamples: int
    seed: int
    n_baseline: int
    n_candidate: int
    m_baseline: int = 0  # values per resample actually drawn (m-out-of-n when < n)
    m_candidate: int = 0

    @property
    def excludes_one(self) -> bool:
        """Whether the interval lies entirely on one side of "no change"."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 1.0 or self.ci_high < 1.0
