"""The words of ``servetrace check``: one line per rule, the verdict, the method, the notes.

From the numbers of ``servetrace.rules.evaluate`` (ns): the PASS/FAIL/SKIP line of each
rule (``FAIL ttft.p99: 208 ms > 200 ms``), why a rule was skipped or had no value, the
verdict and how budgets were judged. Values are converted from internal units (ns) to the
reporting unit (ms) here; ``render.check`` lays these lines out as a table, JSON, Markdown
or JUnit.
"""

from __future__ import annotations

from servetrace.comparison.catalog import OPERATORS
from servetrace.render.compare_words import skipped_text
from servetrace.render.format import display_unit, format_value, to_display
from servetrace.render.workload import workload_message
from servetrace.rules.outcome import Reason, Status
from servetrace.rules.result import GIVEN_RULES, CheckResult, RuleResult
from servetrace.rules.rules import RegressionRule, SloRule
from servetrace.stats.names import canonical_stat, percentile_of
from servetrace.stats.order_ci import needed_for_bound
from servetrace.stats.verdicts import MIN_SAMPLES

_NEGATION = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}
_CANNOT_PASS = "(a rule that cannot be checked does not pass)"


def shown(result: RuleResult, value: float | None) -> float | None:
    """A value of this rule's statistic in its reporting unit (ms for times)."""
    return to_display(result.spec, result.rule.stat, value)


def unit_of(result: RuleResult) -> str:
    return display_unit(result.spec, result.rule.stat)


def fmt(result: RuleResult, value: float | None) -> str:
    return format_value(shown(result, value), unit_of(result))


def _unavailable(result: RuleResult, whose: str) -> str:
    """Why a trace cannot express the statistic (a SKIP)."""
    metric, stat = result.rule.metric, result.rule.stat
    reason = result.reason
    if reason is Reason.CLIENT_TRACE:
        seen = "preemptions" if metric == "preemptions" else "admissions"
        return f"{whose} is a client-side trace: it has no {metric} (a client sees no {seen})"
    if reason is Reason.NO_TOKEN_TIMES:
        return f"{whose} has no per-token times (a request-level export): no {metric}"
    if reason is Reason.ARRIVAL_UNKNOWN:
        return f"send times are unknown in {whose}: no window for {metric}.{stat}"
    if reason is Reason.OUTPUT_UNKNOWN:
        return f"output token counts are unknown in {whose}: no {metric}" + (
            f".{stat}" if metric == "throughput" else ""
        )
    if reason is Reason.PROMPT_UNKNOWN:
        return f"prompt lengths are unknown in {whose}: no {metric}.{stat}"
    if reason is Reason.NO_STEPS:
        return f"no engine steps were joined to {whose}: give --steps STEPS for {metric}.{stat}"
    if metric == "stalls":
        return f"{whose} has no {metric}.{stat} (no decode-step baseline, or no stalled gap)"
    if result.why:
        return result.why
    return f"no completed request of {whose} has a {metric}"


def _no_value(result: RuleResult, whose: str) -> str:
    """Why a run produced no value (a FAIL)."""
    reason = result.reason
    if reason is Reason.NO_REQUESTS:
        return f"{whose} has no valid request"
    if reason is Reason.ZERO_WINDOW:
        return f"the window of {whose} (first arrival to last terminal event) has no length"
    return f"no completed request of {whose} has a {result.rule.metric}"


def rule_line(result: RuleResult) -> str:
    """One line that says what happened to the rule, e.g. ``FAIL ttft.p99: 208 ms > 200 ms``."""
    word = result.status.name  # PASS, FAIL, SKIP or INCONCLUSIVE
    key = result.rule.key
    if result.status is Status.SKIP:
        side = result.missing_in or "trace"
        whose = "this trace" if side == "trace" else "the baseline"
        where = "" if side == "trace" else " in the baseline"
        return f"{word} {key}: unavailable{where}: {_unavailable(result, whose)}"
    rule = result.rule
    if result.status is Status.INCONCLUSIVE and isinstance(rule, SloRule):
        return inconclusive_line(result, rule)
    if isinstance(rule, SloRule):
        if result.value is None:
            return f"{word} {key}: no value: {_no_value(result, 'this trace')} {_CANNOT_PASS}"
        relation = rule.op if result.passed else _NEGATION[rule.op]
        line = f"{word} {key}: {fmt(result, result.value)} {relation} {fmt(result, result.limit)}"
        return line + (_interval_beside(result) if result.point_gate else "")
    return _regression_line(result, rule, word)


def inconclusive_line(result: RuleResult, rule: SloRule) -> str:
    """What was observed first, then what keeps it from deciding, e.g. ``INCONCLUSIVE
    ttft.p99: observed 67.6 ms meets 100 ms, but 200 requests cannot bound a p99 from above
    at 95% (that needs at least 368 requests)``."""
    low, high = result.interval or (None, None)
    confidence = result.interval_confidence or 0.95
    noun, given = _samples(result)
    value, limit = result.value, result.limit
    meets = value is not None and limit is not None and OPERATORS[rule.op](value, limit)
    observed = (
        f"INCONCLUSIVE {rule.key}: observed {fmt(result, value)} "
        f"{'meets' if meets else 'breaks'} {fmt(result, limit)}, but "
    )
    # The bound that would decide: above the limit for a rule met from below, and so on.
    upper = meets == (rule.op in ("<=", "<"))
    if (high if upper else low) is None:
        q = (percentile_of(canonical_stat(rule.stat)) or 50.0) / 100.0
        needed = needed_for_bound(q, confidence, upper)
        return observed + (
            f"{given} cannot bound a {rule.stat} from {'above' if upper else 'below'} "
            f"at {confidence:.0%} (that needs at least {needed:,} {noun}; --gate point "
            "decides on the observed value)"
        )
    text = observed + (
        f"its {confidence:.0%} interval {_span(result)} contains the limit ({given})"
    )
    if result.more_samples is None:
        return text + "; no sample size decides it while the limit sits at this percentile"
    return text + (
        f"; about {result.more_samples:,} more {noun} would decide it (if the limit "
        "keeps its place in the distribution)"
    )


def _interval_beside(result: RuleResult) -> str:
    """`` (the observed value; 95% interval 65.3 ms to unbounded, 200 requests)``."""
    confidence = result.interval_confidence or 0.95
    n, noun = result.interval_samples or 0, _samples(result)[0]
    return f" (the observed value; {confidence:.0%} interval {_span(result)}, {n:,} {noun})"


def _span(result: RuleResult) -> str:
    """``65.3 ms to unbounded``: a percentile's interval, an end it lacks as unbounded."""
    low, high = result.interval or (None, None)
    return " to ".join(fmt(result, end) if end is not None else "unbounded" for end in (low, high))


def _samples(result: RuleResult) -> tuple[str, str]:
    """The samples behind a percentile's interval: the plural noun, and ``200 requests``."""
    n = result.interval_samples or 0
    noun = "gaps" if result.spec.source == "gaps" else "requests"
    return noun, f"{n:,} {noun[:-1] if n == 1 else noun}"


def _regression_line(result: RuleResult, rule: RegressionRule, word: str) -> str:
    key = rule.key
    value, base, limit = result.value, result.baseline, result.limit
    if value is None or base is None or limit is None:
        which = "candidate" if result.missing_in == "trace" else "baseline"
        if result.reason is Reason.NO_COMPLETED:
            cause = f"none of its completed requests has a {rule.metric}"
        else:
            cause = _no_value(result, "it")
        return f"{word} {key}: no value in the {which}: {cause}"
    worse_is_higher = result.spec.better == "lower"
    exceeded = value > limit if worse_is_higher else value < limit
    relation = (
        (">" if worse_is_higher else "<") if exceeded else ("<=" if worse_is_higher else ">=")
    )
    budget = f"(baseline {fmt(result, base)} {rule.budget})"
    change = _change(result, value, base)
    if exceeded and result.passed:
        # Over the budget yet passing: lead with why, so the line does not read as a failure.
        if result.samples is not None:
            why = (
                f"is not testable ({result.samples} requests, {MIN_SAMPLES} needed; "
                "--no-significance gates on the budget alone)"
            )
        else:
            why = "is not significant"
        return (
            f"{word} {key}: {fmt(result, value)} is beyond the budget {fmt(result, limit)} "
            f"{budget}, but the {change} change {why}"
        )
    text = f"{word} {key}: {fmt(result, value)} {relation} {fmt(result, limit)} {budget[:-1]}"
    if result.significant is None or not exceeded:
        # Within the budget the test has nothing to say (it asks: significantly worse?).
        return text + f"; {change})"
    return text + f"; {change}, {'significant' if result.significant else 'not significant'})"


def _change(result: RuleResult, value: float, base: float) -> str:
    if base != 0:
        return f"{(value / base - 1.0) * 100:+.1f}%"
    difference = shown(result, value - base)
    return f"{'+' if (difference or 0) >= 0 else ''}{format_value(difference, unit_of(result))}"


def verdict_line(result: CheckResult) -> str:
    """``check passed: 4 of 4 rules`` / ``check failed: 1 of 2 rules`` (and skips)."""
    total = len(result.results)
    skipped = len(result.skipped)
    also = f", {skipped} skipped" if skipped else ""
    undecided = len(result.inconclusive)
    if undecided:
        also += f", {undecided} inconclusive"
    if result.failures:
        return f"check failed: {len(result.failures)} of {total} rules{also}"
    if undecided and not result.allow_inconclusive:
        return (
            f"check failed: {undecided} of {total} rules inconclusive (an interval that "
            "contains the limit does not pass; --gate point decides on the observed value, "
            "--allow-inconclusive passes it)"
        )
    if not result.passed:
        return (
            f"check failed: {skipped} of {total} rules skipped, and --require-all "
            "needs every rule checked"
        )
    return f"check passed: {total - skipped - undecided} of {total} rules{also}"


def method_line(result: CheckResult) -> str | None:
    """How regression budgets were judged, or None without budgets."""
    if not any(r.kind == "regression" for r in result.results):
        return None
    if result.baseline_kind == "json":
        return (
            "regression budgets against a summary JSON baseline: no samples, so only "
            "the budget applies (significance not tested)"
        )
    if not result.significance:
        return "regression budgets: significance test disabled, only the budget applies"
    return (
        f"regression budgets fail only when exceeded and significant: "
        f"{result.confidence:.0%} bootstrap CI of candidate/baseline on the worse side "
        f"of 1 ({result.resamples} resamples, seed {result.seed})"
    )


def sources_line(result: CheckResult) -> str | None:
    """``rules: 2 from servetrace.toml, 1 from the command line; baseline from …``, when a
    configuration file gave any of them (otherwise the command line says it all)."""
    configured = [where for where, _ in result.rule_sources if where != GIVEN_RULES]
    if not configured and result.baseline_from is None:
        return None
    text = "rules: " + ", ".join(f"{count} from {where}" for where, count in result.rule_sources)
    if result.baseline_from is not None:
        text += f"; baseline from {result.baseline_from}"
    return text


def notes(result: CheckResult) -> list[str]:
    """The engine's notes, then why the baseline is not paired (if it is not)."""
    out = [skipped_text(note) for note in result.notes]
    if result.workload is not None and not result.workload.paired:
        out.append(f"baseline: {workload_message(result.workload)}")
    return out
