"""Evaluate SLO rules and regression budgets on one trace: numbers only, no words.

A ``RuleResult`` (``servetrace.rules.result``) carries the rule, a ``Status`` (pass, fail,
skip), a ``Reason`` code and the numbers behind them in internal units (ns for times, a
ratio for fractions, per second for rates); ``servetrace.render.check_words`` and
``servetrace.render.check`` turn them into lines, JSON, Markdown and JUnit. The values
are read by ``servetrace.rules.observe``; why a missing value fails or skips a rule is
``servetrace.rules.outcome``'s rule.

A regression budget fails when the candidate is beyond it **and** the change is
significant: the interval of ``candidate / baseline`` (``servetrace.comparison.measure``,
paired when the workloads match) lies entirely on the worse side of 1. With
``significance=False``, or a baseline given as the JSON of ``servetrace analyze --format
json`` (summary numbers, no samples to test), only the budget applies and
``significant`` is None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servetrace.analysis.result import Analysis
from servetrace.analysis.summary import GoodputTarget
from servetrace.comparison.catalog import OPERATORS, MetricUnavailable, get_metric
from servetrace.comparison.measure import Measured, Skipped, measure
from servetrace.comparison.values import metric_value
from servetrace.comparison.workload import WorkloadMatch, match_workloads
from servetrace.errors import UsageError
from servetrace.rules.baseline import ReportBaseline, as_report
from servetrace.rules.config import option_problems
from servetrace.rules.grammar import parse_rules
from servetrace.rules.observe import Baseline, Observed, baseline_observer, observer
from servetrace.rules.outcome import Reason, Side, Status
from servetrace.rules.percentile_gate import (
    PercentileInterval,
    decide,
    more_samples,
    percentile_interval,
)
from servetrace.rules.result import CheckResult, RuleResult
from servetrace.rules.rules import RegressionRule, Rule, SloRule
from servetrace.settings import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, PercentileGate
from servetrace.stats.verdicts import MIN_SAMPLES


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
    gate: PercentileGate | str = PercentileGate.interval,
) -> CheckResult:
    """Evaluate SLO rules and regression budgets on one trace.

    ``baseline`` is another trace's analysis (budgets are tested for significance), a
    ``ReportBaseline`` (or the parsed JSON of ``servetrace analyze --format json``:
    budget only), or None (then a regression budget is a usage error). A rule whose
    statistic a trace cannot express is SKIP; one a trace failed to produce is FAIL
    (``servetrace.rules.outcome``). Usage mistakes (no rules, a budget without a
    baseline, goodput rules without targets, a statistic a JSON baseline cannot hold,
    options out of range) are one UsageError naming all of them.

    ``gate`` decides SLOs on a latency percentile: ``"interval"`` by the percentile's whole
    confidence interval (INCONCLUSIVE when it contains the limit), ``"point"`` by the
    observed percentile alone, as the benchmark tools gate, with the interval reported.
    """
    if gate not in {g.value for g in PercentileGate}:
        choices = ", ".join(g.value for g in PercentileGate)
        raise UsageError(f"gate {gate!r}: choose one of {choices}")
    point = PercentileGate(gate) is PercentileGate.point
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

    trace = observer(analysis, goodput)
    base = baseline_observer(baseline, goodput, problems)
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
        workload = match_workloads(trace_baseline.per_request, analysis.per_request, pair_on)
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
            results.append(_slo_result(rule, observed[rule.key], band, point=point))
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


def _slo_result(
    rule: SloRule, observed: Observed, band: PercentileInterval | None = None, point: bool = False
) -> RuleResult:
    value, limit = observed.value, rule.limit
    if value is None:
        reason = observed.reason or Reason.METRIC_MISSING
        return RuleResult(
            rule, reason.status, reason, None, limit, missing_in="trace", why=observed.why
        )
    reason = Reason.WITHIN if OPERATORS[rule.op](value, limit) else Reason.BEYOND
    if band is None:
        return RuleResult(rule, reason.status, reason, value, limit)
    if not point:
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
        point_gate=point,
    )


def _regression_result(
    rule: RegressionRule,
    observed: Observed,
    base_observed: Observed,
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
        why = (observed if side == "trace" else base_observed).why
        return RuleResult(rule, reason.status, reason, value, None, base, missing_in=side, why=why)
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
