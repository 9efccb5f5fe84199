"""An SLO on a percentile, judged by the percentile's confidence interval (numbers only).

``ttft.p99<=500ms`` is met when the whole distribution-free interval of p99
(``servetrace.stats.order_ci``: order statistics ``X_(l)``, ``X_(u)``, equal-tailed
binomial) meets it (PASS), broken when the whole interval breaks it (FAIL), and
INCONCLUSIVE when the interval straddles the limit. A bound the sample is too small for
is infinite (the lower bound −∞, the upper +∞), so a tiny sample can still fail
decisively (its lower bound already beyond the limit) but not pass. When the interval
is decisive the result equals the point-estimate rule, so such reports do not change.

How many more samples would decide (``more``): the smallest n' ≥ n at which the
interval would exclude the limit, **assuming the limit keeps its position** in the
distribution — the same fraction of samples on its passing side as observed
(``smallest_decisive_n``). Samples are completed requests, or pooled gaps for ``itl``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from servetrace.analysis.result import Analysis
from servetrace.comparison.catalog import OPERATORS, get_metric
from servetrace.comparison.values import latency_samples
from servetrace.rules.outcome import Reason
from servetrace.rules.rules import SloRule
from servetrace.stats.names import canonical_stat, percentile_of
from servetrace.stats.order_ci import interval, smallest_decisive_n


@dataclass(frozen=True)
class PercentileInterval:
    """The interval of the rule's percentile over ``n`` samples (ns; None: unbounded)."""

    low: float | None
    high: float | None
    n: int
    q: float
    share_below: float  # samples on or below the limit (strictly below for < and >=)
    confidence: float


def percentile_interval(
    analysis: Analysis, rule: SloRule, confidence: float
) -> PercentileInterval | None:
    """The interval behind a latency-percentile SLO, or None (not a percentile rule, or
    no samples kept: a streamed ITL)."""
    spec = get_metric(rule.metric)
    q_percent = percentile_of(canonical_stat(rule.stat))
    if spec.kind != "latency" or q_percent is None or not 0.0 < q_percent < 100.0:
        return None
    samples = latency_samples(analysis, spec)
    if samples.size == 0:
        return None
    ordered = np.sort(samples)
    q = q_percent / 100.0
    low, high = interval(ordered, q, confidence)
    strict_below = rule.op in ("<", ">=")
    if strict_below:
        below = int(np.searchsorted(ordered, rule.limit, side="left"))
    else:
        below = int(np.searchsorted(ordered, rule.limit, side="right"))
    return PercentileInterval(low, high, int(ordered.size), q, below / ordered.size, confidence)


def decide(rule: SloRule, band: PercentileInterval) -> Reason:
    """WITHIN when both ends meet the rule, BEYOND when neither does, else UNDECIDED."""
    meets = OPERATORS[rule.op]
    low = -np.inf if band.low is None else band.low
    high = np.inf if band.high is None else band.high
    low_ok, high_ok = bool(meets(low, rule.limit)), bool(meets(high, rule.limit))
    if low_ok and high_ok:
        return Reason.WITHIN
    if not low_ok and not high_ok:
        return Reason.BEYOND
    return Reason.UNDECIDED


def more_samples(band: PercentileInterval) -> int | None:
    """Samples to add for a decisive interval (same limit position), or None if never."""
    needed = smallest_decisive_n(band.n, band.q, band.share_below, band.confidence)
    return None if needed is None else needed - band.n
