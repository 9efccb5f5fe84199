"""Read a rule's statistic from a trace or a baseline, with the reason when there is none.

A trace is an ``Analysis``; a baseline is another trace's analysis or a ``ReportBaseline``
(the JSON of ``servetrace analyze --format json``). Whether a missing value fails or skips
the rule is ``servetrace.rules.outcome``'s rule, from the trace's ``TraceFacts``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from servetrace.analysis.result import Analysis
from servetrace.analysis.summary import GoodputTarget
from servetrace.analysis.unavailable import output_unknown, unavailable_reasons
from servetrace.comparison.catalog import MetricUnavailable, get_metric
from servetrace.comparison.values import metric_value
from servetrace.errors import UsageError
from servetrace.rules.baseline import ReportBaseline
from servetrace.rules.outcome import Reason, TraceFacts, missing_reason, precheck
from servetrace.rules.rules import Rule

Baseline = Analysis | ReportBaseline


def trace_facts(analysis: Analysis) -> TraceFacts:
    """What a trace can express, from its per-request frame and summary."""
    requests = analysis.per_request
    summary = analysis.summary
    completed = int((requests["outcome"] == "completed").sum()) if requests.height else 0
    preemptions = (
        int(requests["preemptions"].fill_null(0).sum()) if "preemptions" in requests.columns else 0
    )
    return TraceFacts(
        requests_valid=requests.height,
        completed=completed,
        client=summary.source == "client",
        ticks_available=summary.ticks_available,
        arrival_known=summary.arrival_known,
        window_known=summary.throughput.get("window_s") is not None,
        preemption_events=preemptions,
        output_unknown=output_unknown(unavailable_reasons(summary)),
        steps_joined=analysis.stalls is not None,
    )


@dataclass(frozen=True)
class Observed:
    value: float | None
    reason: Reason | None  # why there is no value (or why it means nothing)
    why: str | None = None  # the data's own words for it, where it has them


def observe_rule(
    rule: Rule,
    read: Callable[[], float | None],
    requests_valid: int,
    facts: Callable[[], TraceFacts],
) -> Observed:
    spec = get_metric(rule.metric)
    # Facts are read only when needed: most rules have their value.
    if requests_valid == 0:
        return Observed(None, Reason.NO_REQUESTS)
    why = None
    try:
        value = read()
    except MetricUnavailable as error:
        value, why = None, error.why
    if spec.name == "preemptions":
        early = precheck(facts(), spec)
        if early is not None:
            return Observed(None, early)
    if value is None or not math.isfinite(value):
        return Observed(None, missing_reason(facts(), spec, rule.stat), why)
    return Observed(value, None)


def observer(analysis: Analysis, goodput: Sequence[GoodputTarget]) -> Callable[[Rule], Observed]:
    facts = functools.cache(lambda: trace_facts(analysis))
    valid = analysis.per_request.height

    def observe(rule: Rule) -> Observed:
        def read() -> float | None:
            return metric_value(analysis, rule.metric, rule.stat, goodput=goodput)

        return observe_rule(rule, read, valid, facts)

    return observe


def baseline_observer(
    baseline: Baseline | None, goodput: Sequence[GoodputTarget], problems: list[str]
) -> Callable[[Rule], Observed]:
    if baseline is None:
        return lambda rule: Observed(None, None)
    if not isinstance(baseline, ReportBaseline):
        return observer(baseline, goodput)
    report = baseline
    facts = functools.cache(report.facts)

    def observe(rule: Rule) -> Observed:
        spec = get_metric(rule.metric)
        try:
            value = report.value(spec, rule.stat)
        except UsageError as error:
            problems.append(f"{rule}: {error.message}")
            return Observed(None, None)
        return observe_rule(rule, lambda: value, facts().requests_valid, facts)

    return observe
