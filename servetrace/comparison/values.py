"""A metric's value in one analysis: the one function (``metric_value``) that ``compare``
and ``check`` both call, so a rule ``ttft.p99<=500ms`` and a compare row ``ttft p99`` can
never disagree about a number. What each metric means: ``servetrace.comparison.catalog``.
Values are in internal units: ns for times, plain numbers for counts, fractions, rates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from servetrace.analysis.result import Analysis
from servetrace.analysis.summary import GoodputTarget
from servetrace.analysis.unavailable import unavailable
from servetrace.comparison.catalog import (
    CANCELLED,
    COMPLETED,
    ERRORED,
    MetricSpec,
    MetricUnavailable,
    check_stat,
    get_metric,
)
from servetrace.stats.describe import statistic, to_array


def completed(requests: pl.DataFrame) -> pl.DataFrame:
    """The completed requests (latency statistics describe these, DESIGN §6)."""
    return requests.filter(pl.col("outcome") == COMPLETED)


def latency_samples(analysis: Analysis, spec: MetricSpec) -> np.ndarray:
    """Samples of a latency metric in ns (float64): one per completed request, or per gap."""
    if spec.source == "gaps":
        return to_array(analysis.gaps.get_column(spec.column))
    return to_array(completed(analysis.per_request).get_column(spec.column))


def good_mask(requests: pl.DataFrame, targets: Sequence[GoodputTarget]) -> pl.Series:
    """Per completed request: whether it meets every target (Boolean)."""
    expr = pl.all_horizontal([target.expr() for target in targets])
    return completed(requests).select(expr.alias("good")).get_column("good")


def outcome_contributions(
    analysis: Analysis,
    spec: MetricSpec,
    stat: str,
    goodput: Sequence[GoodputTarget] = (),
) -> np.ndarray:
    """Per request, what it adds to a count/fraction/mean of an outcome metric.

    Every valid request for ``cancelled``, ``errored`` and ``preemptions``; every completed request
    for ``goodput``.
    """
    requests = analysis.per_request
    if spec.name in (CANCELLED, ERRORED):
        values = requests.select((pl.col("outcome") == spec.name).cast(pl.Float64))
    elif spec.name == "preemptions":
        column = pl.col("preemptions").fill_null(0).cast(pl.Float64)
        values = requests.select((column > 0).cast(pl.Float64) if stat == "fraction" else column)
    elif spec.name == "goodput":
        if not goodput:
            raise MetricUnavailable(
                f"goodput.{stat} needs per-request goodput targets",
                hint="add goodput targets such as ttft<=200ms, tpot<=50ms",
            )
        return good_mask(requests, goodput).cast(pl.Float64).to_numpy().astype(np.float64)
    else:
        raise ValueError(f"{spec.name} is not an outcome metric")
    return values.to_series().to_numpy().astype(np.float64)


def window_s(analysis: Analysis) -> float | None:
    value = analysis.summary.throughput.get("window_s")
    return float(value) if value is not None else None


def metric_value(
    analysis: Analysis,
    metric: str,
    stat: str,
    *,
    goodput: Sequence[GoodputTarget] = (),
) -> float | None:
    """The value of ``metric.stat`` for one trace, in internal units (ns for times).

    None when there is nothing to describe (no completed request). Raises
    ``MetricUnavailable`` when the trace cannot have the value at all (no prompt lengths
    for total tokens/s, no goodput targets for the goodput fraction).
    """
    spec = get_metric(metric)
    stat = check_stat(spec, stat)
    if spec.kind == "index":
        if spec.column not in analysis.per_request.columns:
            raise MetricUnavailable(
                f"{spec.name}.{stat} needs per-token deadlines",
                hint="give --fluidity ttft=500ms,tbt=50ms",
            )
        return statistic(latency_samples(analysis, spec), stat)
    if spec.kind == "latency":
        samples = latency_samples(analysis, spec)
        if samples.size == 0 and spec.source == "gaps":
            # A streamed analysis keeps ITL as a histogram summary, not as gap samples.
            summarized = _summary_stat(analysis, spec.name, stat)
            if summarized is not None:
                return summarized
        return statistic(samples, stat)
    if spec.kind == "consistency":
        return _consistency(analysis, spec, stat)
    if spec.name == "throughput":
        value = analysis.summary.throughput.get(stat)
        if value is None:
            reason = unavailable(analysis.summary).get(stat) or (
                "prompt lengths are unknown" if stat == "total_tokens_per_s" else "unknown"
            )
            raise MetricUnavailable(f"throughput.{stat} is not available: {reason}")
        return float(value)
    if spec.name == "stalls":
        return stall_value(analysis, stat)
    if spec.name == "goodput" and stat == "requests_per_s" and not goodput:
        value = analysis.summary.throughput.get("goodput_requests_per_s")
        if value is None:
            raise MetricUnavailable(
                "goodput.requests_per_s needs per-request goodput targets",
                hint="add goodput targets such as ttft<=200ms, tpot<=50ms",
            )
        return float(value)
    values = outcome_contributions(analysis, spec, stat, goodput)
    if stat == "count":
        return float(values.sum())
    if stat == "requests_per_s":
        window = window_s(analysis)
        if not window:
            raise MetricUnavailable("goodput.requests_per_s needs the trace window")
        return float(values.sum()) / window
    if values.size == 0:
        return None
    return float(values.mean())


def stall_value(analysis: Analysis, stat: str) -> float | None:
    """``stalls.<cause>_share`` (of the stalled gaps' excess), ``stalls.tail_<cause>_share``
    and ``stalls.tail_prefill_fraction`` (``analysis.stalls``)."""
    stalls = analysis.stalls
    if stalls is None:
        raise MetricUnavailable(
            f"stalls.{stat} needs the engine's steps", hint="give --steps STEPS"
        )
    if stat == "tail_prefill_fraction":
        value = stalls.tail_shares()["prefill_fraction"]
    elif stat.startswith("tail_"):
        value = stalls.tail_shares()[stat.removeprefix("tail_")]
    else:
        value = stalls.shares()[stat]
    return None if value is None else float(value)


def _consistency(analysis: Analysis, spec: MetricSpec, stat: str) -> float:
    found = analysis.server_metrics
    if found is None:
        raise MetricUnavailable(
            f"{spec.name}.{stat} needs the server's metrics", hint="give --server-metrics FILE"
        )
    finding = found.findings[spec.column]
    value = getattr(finding, stat)
    if value is None:
        raise MetricUnavailable(
            f"{spec.name}.{stat} is not available: {finding.unavailable}", why=finding.unavailable
        )
    return float(value)


def _summary_stat(analysis: Analysis, metric: str, stat: str) -> float | None:
    """A statistic the summary holds although no samples were kept (a streamed ITL)."""
    value = analysis.summary.metrics.get(metric, {}).get(stat)
    return None if value is None else float(value)
