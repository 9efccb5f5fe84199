"""Evaluate SLO rules and regression budgets on one trace: numbers only, no words.

A ``RuleResult`` carries the rule, a ``Status`` (pass, fail, skip), a ``Reason`` code and
the numbers behind them in internal units (ns for times, a ratio for fractions, per
second for rates); ``servetrace.render.check`` turns them into lines, JSON, Markdown and
JUnit. Why a missing value fails or skips a rule is ``servetrace.rules.outcome``'s rule.

A regression budget fails when the candidate is beyond it **and** the change is
significant: the interval of ``candidate / baseline`` (``servetrace.comparison.measure``,
paired when the workloads match) lies entirely on the worse side of 1. With
``significance=False``, or a baseline given as the JSON of ``servetrace analyze --format
json`` (summary numbers, no samples to test), only the budget applies and
``significant`` is None.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from servetrace.analysis.memory import Analysis
from servetrace.analysis.summary import GoodputTarget
from servetrace.analysis.unavailable import output_unknown, unavailable_reasons
from servetrace.comparison.catalog import (
    OPERATORS,
    MetricSpec,
    MetricUnavailable,
    get_metric,
    metric_value,
)
from servetrace.comparison.measure import Measured, Skipped, measure
from servetrace.comparison.workload import WorkloadMatch, match_workloads
from servetrace.errors import UsageError
from servetrace.rules.baseline import ReportBaseline, as_report
from servetrace.rules.config import option_problems
from servetrace.rules.grammar import parse_rules
from servetrace.rules.outcome import Reason, Side, Status, TraceFacts, missing_reason, precheck
from servetrace.rules.percentile_gate import (
    PercentileInterval,
    decide,
    more_samples,
    percentile_interval,
)
from servetrace.rules.rules import RegressionRule, Rule, RuleKind, SloRule
from servetrace.stats.bootstrap import DEFAULT_RESAMPLES
from servetrace.stats.ratio import DEFAULT_CONFIDENCE
from servetrace.stats.verdicts import MIN_SAMPLES

Baseline = Analysis | ReportBaseline


@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule; numbers in internal units (ns for times).

    ``value`` is the trace's statistic, ``limit`` the SLO limit or the worst value the
    budget allows, ``baseline`` the baseline's statistic (budgets only). ``ratio``,
    ``ci_low``, ``ci_high`` and ``p_value`` are the significance test of a budget;
    ``samples`` the requests on the smaller side when a budget was ``not_testable``;
    ``missing_in`` which side had no value when the reason is a missing value.
    """

    rule: Rule
    status: Status
    reason: Reason
    value: float | None
    limit: float | None
    baseline: float | None = None
    significant: bool | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    samples: int | None = None
    missing_in: Side | None = None
    # SLOs on a latency percentile: its interval (ns; None ends are unbounded), the
    # samples behind it, and (INCONCLUSIVE) how many more would decide it.
    interval: tuple[float | None, float | None] | None = None
    interval_samples: int | None = None
    more_samples: int | None = None
    interval_confidence: float | None = None

    @property
    def kind(self) -> RuleKind:
        return self.rule.kind

    @property
    def spec(self) -> MetricSpec:
        return get_metric(self.rule.metric)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS


@dataclass(frozen=True)
class CheckResult:
    """Every rule's result. It passes when no rule failed and, under ``require_all``,
    none was skipped. ``notes`` are what the measuring engine said about the test."""

    results: tuple[RuleResult, ...]
    significance: bool
    seed: int
    resamples: int
    confidence: float
    baseline_kind: Literal["trace", "json"] | None
    require_all: bool = False
    workload: WorkloadMatch | None = None
    notes: tuple[Skipped, ...] = ()
    allow_inconclusive: bool = False

    @property
    def failures(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.status is Status.FAIL)

    @property
    def inconclusive(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.status is Status.INCONCLUSIVE)

    @property
    def skipped(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.status is Status.SKIP)

    @property
    def passed(self) -> bool:
        return (
            not self.failures
            and not (self.require_all and self.skipped)
            and not (self.inconclusive and not self.allow_inconclusive)
        )


# --------------------------------------------------------------------------- facts
def trace_facts(analysis: Analysis) -> TraceFacts:
    """What a trace can express, from its per-request frame and summary."""
    requests = analysis.requests
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
    )


@dataclass(frozen=True)
class _Observed:
    value: float | None
    reason: Reason | None  # why there is no value (or why it means nothing)


def _observe(
    rule: Rule,
    read: Callable[[], float | None],
    requests_valid: int,
    facts: Callable[[], TraceFacts],
) -> _Observed:
    spec = get_metric(rule.metric)
    # Facts are read only when needed: most rules have their value.
    if requests_valid == 0:
        return _Observed(None, Reason.NO_REQUESTS)
    try:
        value = read()
    except MetricUnavailable:
        value = None
    if spec.name == "preemptions":
        early = precheck(facts(), spec)
        if early is not None:
            return _Observed(None, early)
    if value is None or not math.isfinite(value):
        return _Observed(None, missing_reason(facts(), spec, rule.stat))
    return _Observed(value, None)


def _needs_targets(rule: Rule, goodput: Sequence[GoodputTarget], analysis: Analysis) -> bool:
    """A goodput rule without targets is the command's mistake, not the trace's."""
    if rule.metric != "goodput" or goodput:
        return False
    if rule.stat == "requests_per_s":
        try:
            metric_value(analysis, "goodput", "requests_per_s")
        except MetricUnavailable:
            return True
        return False
    return True


# --------------------------------------------------------------------------- evaluate
def evaluate(
    analysis: Analysis,
    rules: Sequence[Rule] | str,
    baseline: Baseline | Mapping[str, Any] | None = None,
    *,
    goodput: Sequence[GoodputTarget] = (),
    significance: bool = True,
    require_all: bool = False,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    pair_on: str | None = None,
    allow_inconclusive: bool = False,
) -> CheckResult:
    """Evaluate SLO rules and regression budgets on one trace.

    ``baseline`` is another trace's analysis (budgets are tested for significance), a
    ``ReportBaseline`` (or the parsed JSON of ``servetrace analyze --format json``:
    budget only), or None (then a regression budget is a usage error). A rule whose
    statistic a trace cannot express is SKIP; one a trace failed to produce is FAIL
    (``servetrace.rules.outcome``). Usage mistakes (no rules, a budget without a
    baseline, goodput rules without targets, a statistic a JSON baseline cannot hold,
    options out of range) are one UsageError naming all of them.
    """
    checked = parse_rules(rules) if isinstance(rules, str) else tuple(rules)
    if not checked:
        raise UsageError(
            "no rules to check",
            hint="give SLO rules or regression budgets, or put them in the "
            "[check] table of servetrace.toml",
        )
    problems = option_problems(seed, resamples, confidence)
    if problems:
        raise UsageError("; ".join(problems))
    regressions = [r for r in checked if isinstance(r, RegressionRule)]
    if regressions and baseline is None:
        raise UsageError(
            "regression budget"
            + ("s " if len(regressions) > 1 else " ")
            + ", ".join(repr(str(r)) for r in regressions)
            + " need a baseline",
            hint="give a baseline trace (or its `servetrace analyze --format json` output)",
        )
    if isinstance(baseline, Mapping):
        baseline = as_report(baseline)
    for rule in checked:
        if _needs_targets(rule, goodput, analysis):
            problems.append(f"{rule}: {rule.key} needs per-request goodput targets")
    if problems:
        raise UsageError(
            "; ".join(problems), hint="add goodput targets such as ttft<=200ms, tpot<=50ms"
        )

    trace = _observer(analysis, goodput)
    base = _baseline_observer(baseline, goodput, problems)
    base_observed = {rule.key: base(rule) for rule in regressions}
    if problems:  # statistics a JSON baseline cannot hold: before any work on the trace
        raise UsageError("; ".join(problems))
    observed = {rule.key: trace(rule) for rule in checked}

    tested: dict[str, Measured] = {}
    workload: WorkloadMatch | None = None
    notes: list[Skipped] = []
    json_baseline = isinstance(baseline, ReportBaseline)
    test_significance = bool(significance and regressions and not json_baseline)
    measurable = [
        r
        for r in regressions
        if observed[r.key].value is not None and base_observed[r.key].value is not None
    ]
    trace_baseline = None if isinstance(baseline, ReportBaseline) else baseline
    if test_significance and trace_baseline is not None and measurable:
        workload = match_workloads(trace_baseline.requests, analysis.requests, pair_on)
        measured, notes = measure(
            trace_baseline,
            analysis,
            [(r.metric, r.stat) for r in measurable],
            match=workload,
            seed=seed,
            resamples=resamples,
            confidence=confidence,
            min_change=0.0,
            goodput=goodput,
        )
        tested = {f"{m.spec.name}.{m.stat}": m for m in measured}

    results = []
    for rule in checked:
        if isinstance(rule, SloRule):
            band = percentile_interval(analysis, rule, confidence)
            results.append(_slo_result(rule, observed[rule.key], band))
        else:
            results.append(
                _regression_result(
                    rule,
                    observed[rule.key],
                    base_observed[rule.key],
                    tested.get(rule.key),
                    test_significance,
                )
            )
    return CheckResult(
        results=tuple(results),
        significance=bool(significance),
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        baseline_kind=None if baseline is None else ("json" if json_baseline else "trace"),
        require_all=require_all,
        workload=workload,
        notes=tuple(notes),
        allow_inconclusive=allow_inconclusive,
    )


def _observer(analysis: Analysis, goodput: Sequence[GoodputTarget]) -> Callable[[Rule], _Observed]:
    facts = functools.cache(lambda: trace_facts(analysis))
    valid = analysis.requests.height

    def observe(rule: Rule) -> _Observed:
        def read() -> float | None:
            return metric_value(analysis, rule.metric, rule.stat, goodput=goodput)

        return _observe(rule, read, valid, facts)

    return observe


def _baseline_observer(
    baseline: Baseline | None, goodput: Sequence[GoodputTarget], problems: list[str]
) -> Callable[[Rule], _Observed]:
    if baseline is None:
        return lambda rule: _Observed(None, None)
    if not isinstance(baseline, ReportBaseline):
        return _observer(baseline, goodput)
    report = baseline
    facts = functools.cache(report.facts)

    def observe(rule: Rule) -> _Observed:
        spec = get_metric(rule.metric)
        try:
            value = report.value(spec, rule.stat)
        except UsageError as error:
            problems.append(f"{rule}: {error.message}")
            return _Observed(None, None)
        return _observe(rule, lambda: value, facts().requests_valid, facts)

    return observe


def _slo_result(
    rule: SloRule, observed: _Observed, band: PercentileInterval | None = None
) -> RuleResult:
    value, limit = observed.value, rule.limit
    if value is None:
        reason = observed.reason or Reason.METRIC_MISSING
        return RuleResult(rule, reason.status, reason, None, limit, missing_in="trace")
    reason = Reason.WITHIN if OPERATORS[rule.op](value, limit) else Reason.BEYOND
    if band is None:
        return RuleResult(rule, reason.status, reason, value, limit)
    reason = decide(rule, band)  # decisive: the point rule's answer, else UNDECIDED
    return RuleResult(
        rule,
        reason.status,
        reason,
        value,
        limit,
        interval=(band.low, band.high),
        interval_samples=band.n,
        more_samples=more_samples(band) if reason is Reason.UNDECIDED else None,
        interval_confidence=band.confidence,
    )


def _regression_result(
    rule: RegressionRule,
    observed: _Observed,
    base_observed: _Observed,
    tested: Measured | None,
    test_significance: bool,
) -> RuleResult:
    value, base = observed.value, base_observed.value
    if value is None or base is None:
        # The trace's own reason first: a FAIL on either side outweighs a SKIP.
        side: Side = "trace" if value is None else "baseline"
        reasons = [
            o.reason or Reason.METRIC_MISSING for o in (observed, base_observed) if o.value is None
        ]
        reason = next((r for r in reasons if r.status is Status.FAIL), reasons[0])
        if reason is not reasons[0]:
            side = "baseline"
        return RuleResult(rule, reason.status, reason, value, None, base, missing_in=side)
    limit = rule.limit_for(base)
    worse_is_higher = get_metric(rule.metric).better == "lower"
    exceeded = value > limit if worse_is_higher else value < limit
    significant: bool | None = None
    too_few: int | None = None
    ratio = ci_low = ci_high = p_value = None
    if tested is not None:
        ci = tested.ci
        ratio, ci_low, ci_high, p_value = ci.ratio, ci.ci_low, ci.ci_high, ci.p_value
        if ci_low is None or ci_high is None:
            significant = False
        else:
            significant = ci_low > 1.0 if worse_is_higher else ci_high < 1.0
            if min(ci.n_baseline, ci.n_candidate) < MIN_SAMPLES and ci.method != "poisson":
                significant = False
                too_few = min(ci.n_baseline, ci.n_candidate)
    elif test_significance:
        significant = False
    if not exceeded:
        reason = Reason.WITHIN
    elif test_significance and significant is False:
        reason = Reason.NOT_TESTABLE if too_few is not None else Reason.NOT_SIGNIFICANT
    else:
        reason = Reason.BEYOND
    return RuleResult(
        rule,
        reason.status,
        reason,
        value,
        limit,
        base,
        significant,
        ratio,
        ci_low,
        ci_high,
        p_value,
        samples=too_few,
    )
