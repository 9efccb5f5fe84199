"""Ratio of two rates (requests/s, tokens/s, event counts) with a compound-Poisson interval.

Rates have no per-resample statistic to bootstrap: their ratio gets a Wald interval on
the log scale with compound-Poisson variance.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from servetrace.settings import DEFAULT_CONFIDENCE
from servetrace.stats.describe import ArrayLike, to_array
from servetrace.stats.ratio import RatioCI, ratio_of


def rate_ratio_ci(
    base_contributions: ArrayLike,
    cand_contributions: ArrayLike,
    *,
    base_exposure: float = 1.0,
    cand_exposure: float = 1.0,
    base_value: float | None = None,
    cand_value: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    stat: str = "rate",
) -> RatioCI:
    """Ratio of two rates ``sum(x) / exposure`` with a compound-Poisson Wald interval.

    Each element of ``*_contributions`` is what one request adds (1 for a request count,
    its output tokens for a token rate). Treating requests as a Poisson process, the
    variance of ``log(sum x)`` is ``sum(x**2) / sum(x)**2``; the interval is
    ``exp(log ratio ± z se)`` and the p-value two-sided. ``*_value`` overrides the point
    rates (e.g. the summary's own throughput) while the spread still comes from the
    contributions. A side summing to zero gets a continuity correction of half a unit.
    """
    xb, xc = to_array(base_contributions), to_array(cand_contributions)
    sb, sc = float(xb.sum()), float(xc.sum())
    vb = base_value if base_value is not None else (sb / base_exposure if base_exposure else None)
    vc = cand_value if cand_value is not None else (sc / cand_exposure if cand_exposure else None)

    def result(ratio: float | None, bounds: tuple[float, float] | None, p: float | None) -> RatioCI:
        low, high = bounds or (None, None)
        return RatioCI(
            stat=stat,
            baseline=vb,
            candidate=vc,
            ratio=ratio,
            ci_low=low,
            ci_high=high,
            p_value=p,
            confidence=confidence,
            method="none" if ratio is None else "poisson",
            resamples=0,
            seed=0,
            n_baseline=int(xb.size),
            n_candidate=int(xc.size),
        )

    if vb is None or vc is None:
        return result(None, None, None)
    ratio = ratio_of(vc, vb)
    if sb == 0 and sc == 0:
        return result(ratio, None, 1.0)

    def rel_var(total: float, squares: float) -> tuple[float, float]:
        if total <= 0:
            return 0.5, 0.25  # continuity correction: half an event of size one
        return total, squares

    tb, qb = rel_var(sb, float(np.dot(xb, xb)))
    tc, qc = rel_var(sc, float(np.dot(xc, xc)))
    se = math.sqrt(qb / tb**2 + qc / tc**2)
    centre = (
        math.log(ratio)
        if 0 < ratio < math.inf
        else math.log((tc / (cand_exposure or 1.0)) / (tb / (base_exposure or 1.0)))
    )
    z = float(sps.norm.ppf(0.5 + confidence / 2.0))
    p_value = float(2.0 * sps.norm.sf(abs(centre) / se)) if se > 0 else 1.0
    return result(ratio, (math.exp(centre - z * se), math.exp(centre + z * se)), p_value)
