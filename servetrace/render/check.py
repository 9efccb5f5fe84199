"""Render a check result as a table, JSON, Markdown or JUnit XML (pure: returns text).

Every word of ``servetrace check`` is written here, from the numbers of
``servetrace.rules.evaluate``: the PASS/FAIL/SKIP line of each rule
(``FAIL ttft.p99: 208 ms > 200 ms``), the verdict and the method. Values are converted
from internal units (ns) to the reporting unit (ms) here and nowhere else.

Built for CI (pip-audit's habit): the report is the whole story, one line per rule; JUnit
has one test case per rule, so CI systems show each SLO and budget as a test (a skipped
rule as a skipped test, or as a failure under ``--require-all``).
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from enum import Enum
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from servetrace import SCHEMA_VERSION, __version__
from servetrace.render._json import clean
from servetrace.render.compare_words import skipped_text
from servetrace.render.format import display_unit, format_value, to_display
from servetrace.render.workload import workload_dict, workload_message
from servetrace.rules.evaluate import CheckResult, RuleResult
from servetrace.rules.outcome import Reason, Status
from servetrace.rules.rules import RegressionRule, SloRule
from servetrace.stats.verdicts import MIN_SAMPLES

_NEGATION = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}
_WORD = {
    Status.PASS: "PASS",
    Status.FAIL: "FAIL",
    Status.SKIP: "SKIP",
    Status.INCONCLUSIVE: "INCONCLUSIVE",
}
_STYLE = {
    Status.PASS: "bold green",
    Status.FAIL: "bold red",
    Status.SKIP: "bold yellow",
    Status.INCONCLUSIVE: "bold magenta",
}
_ICON = {
    Status.PASS: ":white_check_mark:",
    Status.FAIL: ":x:",
    Status.SKIP: ":fast_forward:",
    Status.INCONCLUSIVE: ":grey_question:",
}
_CANNOT_PASS = "(a rule that cannot be checked does not pass)"


class CheckFormat(str, Enum):
    """Output formats of ``servetrace check``."""

    table = "table"
    json = "json"
    markdown = "markdown"
    junit = "junit"


# --------------------------------------------------------------------------- words
def shown(result: RuleResult, value: float | None) -> float | None:
    """A value of this rule's statistic in its reporting unit (ms for times)."""
    return to_display(result.spec, result.rule.stat, value)


def unit_of(result: RuleResult) -> str:
    return display_unit(result.spec, result.rule.stat)


def _fmt(result: RuleResult, value: float | None) -> str:
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
    word = _WORD[result.status]
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
        return f"{word} {key}: {_fmt(result, result.value)} {relation} {_fmt(result, result.limit)}"
    return _regression_line(result, rule, word)


def inconclusive_line(result: RuleResult, rule: SloRule) -> str:
    """``INCONCLUSIVE ttft.p99: 1349 ms, 95% interval 1210–1480 ms contains 1400 ms …``."""
    low, high = result.interval or (None, None)
    n = result.interval_samples or 0
    noun = "gap" if result.spec.source == "gaps" else "request"
    samples = noun + "s"
    span = (
        f"{_fmt(result, low) if low is not None else 'unbounded'} to "
        f"{_fmt(result, high) if high is not None else 'unbounded'}"
    )
    text = (
        f"INCONCLUSIVE {rule.key}: {_fmt(result, result.value)}, "
        f"{result.interval_confidence or 0.95:.0%} interval {span} contains "
        f"{_fmt(result, result.limit)} "
        f"({n:,} {noun if n == 1 else samples})"
    )
    if result.more_samples is None:
        return text + "; no sample size decides it while the limit sits at this percentile"
    return text + (
        f"; about {result.more_samples:,} more {samples} would decide it (if the limit "
        "keeps its place in the distribution)"
    )


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
    text = (
        f"{word} {key}: {_fmt(result, value)} {relation} {_fmt(result, limit)} "
        f"(baseline {_fmt(result, base)} {rule.budget}; {_change(result, value, base)}"
    )
    if result.significant is None:
        return text + ")"
    if result.samples is not None:
        # Say why a large change still passes: it could not be tested, not that it held.
        return text + (
            f", not testable: {result.samples} requests, {MIN_SAMPLES} needed; "
            "use --no-significance to gate on the budget alone)"
        )
    return text + (", significant)" if result.significant else ", not significant)")


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
            "contains the limit does not pass; --allow-inconclusive lets it)"
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


def notes(result: CheckResult) -> list[str]:
    """The engine's notes, then why the baseline is not paired (if it is not)."""
    out = [skipped_text(note) for note in result.notes]
    if result.workload is not None and not result.workload.paired:
        out.append(f"baseline: {workload_message(result.workload)}")
    return out


# --------------------------------------------------------------------------- JSON
def rule_dict(result: RuleResult) -> dict[str, Any]:
    """One rule as the JSON contract has it (values in the reporting unit)."""
    return {
        "rule": str(result.rule),
        "kind": result.kind,
        "passed": None if result.status is Status.SKIP else result.passed,
        "value": shown(result, result.value),
        "limit": shown(result, result.limit),
        "unit": unit_of(result),
        "baseline": shown(result, result.baseline),
        "significant": result.significant,
        "ratio": result.ratio,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "p_value": result.p_value,
        "message": rule_line(result),
        "status": result.status.value,
        "reason": result.reason.value,
        **_interval_keys(result),
    }


def _interval_keys(result: RuleResult) -> dict[str, Any]:
    """An INCONCLUSIVE rule's interval (reporting unit) and the samples that would decide.

    Only on those rules: a decisive rule's JSON is what it was before intervals.
    """
    if result.status is not Status.INCONCLUSIVE or result.interval is None:
        return {}
    low, high = result.interval
    return {
        "interval": [shown(result, low), shown(result, high)],
        "interval_confidence": result.interval_confidence,
        "interval_samples": result.interval_samples,
        "more_samples": result.more_samples,
    }


def check_dict(
    result: CheckResult, *, trace: str | None = None, baseline: str | None = None
) -> dict[str, Any]:
    """``{"passed": bool, "rules": [...]}`` plus the inputs and the method."""
    return clean(
        {
            "servetrace_version": __version__,
            "schema_version": SCHEMA_VERSION,
            "trace": trace,
            "baseline_file": baseline,
            "passed": result.passed,
            "rules": [rule_dict(r) for r in result.results],
            "significance": result.significance,
            "seed": result.seed,
            "resamples": result.resamples,
            "confidence": result.confidence,
            "baseline": result.baseline_kind,
            "workload": None if result.workload is None else workload_dict(result.workload),
            "notes": notes(result),
            "require_all": result.require_all,
            "skipped": len(result.skipped),
            **(
                {
                    "inconclusive": len(result.inconclusive),
                    "allow_inconclusive": result.allow_inconclusive,
                }
                if result.inconclusive
                else {}
            ),
        }
    )


def check_json(
    result: CheckResult, *, trace: str | None = None, baseline: str | None = None
) -> str:
    return (
        json.dumps(
            check_dict(result, trace=trace, baseline=baseline),
            indent=2,
            ensure_ascii=False,
            allow_nan=False,
        )
        + "\n"
    )


# --------------------------------------------------------------------------- table
def check_table(result: CheckResult) -> Group:
    """One line per rule (PASS green, FAIL red, SKIP yellow), then the verdict and method."""
    parts: list[RenderableType] = []
    for rule in result.results:
        status, rest = rule_line(rule).split(" ", 1)
        parts.append(Text.assemble((status, _STYLE[rule.status]), " " + rest))
    parts.append(Text(""))
    parts.append(Text(verdict_line(result), style="bold green" if result.passed else "bold red"))
    method = method_line(result)
    if method:
        parts.append(Text("method: " + method, style="dim"))
    for note in notes(result):
        parts.append(Text("note: " + note, style="yellow"))
    return Group(*parts)


def check_text(result: CheckResult, *, width: int = 110) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(check_table(result))
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


# --------------------------------------------------------------------------- Markdown
def check_markdown(result: CheckResult) -> str:
    """A Markdown table for a pull-request comment."""
    icon = ":white_check_mark:" if result.passed else ":x:"
    lines = [
        f"### servetrace check {icon} {verdict_line(result)}",
        "",
        "| | rule | value | limit | baseline | significant |",
        "|---|---|---:|---:|---:|---|",
    ]
    for rule in result.results:
        lines.append(
            f"| {_ICON[rule.status]} | `{rule.rule}` | "
            f"{_fmt(rule, rule.value)} | {_fmt(rule, rule.limit)} | "
            f"{_fmt(rule, rule.baseline) if rule.kind == 'regression' else ''} | "
            f"{_significant(rule)} |"
        )
    lines.append("")
    for rule in (*result.skipped, *result.inconclusive):
        lines.append(f"> {_ICON[rule.status]} {rule_line(rule)}")
    if result.skipped or result.inconclusive:
        lines.append("")
    method = method_line(result)
    if method:
        lines.append(f"<sub>{method}</sub>")
        lines.append("")
    for note in notes(result):
        lines.append(f"> :warning: {note}")
    return "\n".join(lines).rstrip("\n") + "\n"


def _significant(rule: RuleResult) -> str:
    if rule.significant is None:
        return "-"
    return "yes" if rule.significant else "no"


# --------------------------------------------------------------------------- JUnit
def check_junit(result: CheckResult, *, name: str = "servetrace check") -> str:
    """JUnit XML: one test case per rule, a ``failure`` for each rule that failed.

    A skipped rule is a ``skipped`` test case, or a failure under ``require_all``.
    """
    skipped_fail = result.require_all
    undecided_fail = not result.allow_inconclusive
    failures = (
        len(result.failures)
        + (len(result.skipped) if skipped_fail else 0)
        + (len(result.inconclusive) if undecided_fail else 0)
    )
    skipped = 0 if skipped_fail else len(result.skipped)
    total = str(len(result.results))
    suites = ET.Element("testsuites", name=name, tests=total, failures=str(failures), errors="0")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=total,
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    properties = ET.SubElement(suite, "properties")
    for key, value in (
        ("servetrace_version", __version__),
        ("seed", result.seed),
        ("resamples", result.resamples),
        ("confidence", result.confidence),
        ("significance", result.significance),
    ):
        ET.SubElement(properties, "property", name=key, value=str(value))
    for rule in result.results:
        case = ET.SubElement(
            suite, "testcase", classname=f"servetrace.rules.{rule.kind}", name=str(rule.rule)
        )
        line = rule_line(rule)
        if (
            rule.status is Status.FAIL
            or (rule.status is Status.SKIP and skipped_fail)
            or (rule.status is Status.INCONCLUSIVE and undecided_fail)
        ):
            failure = ET.SubElement(case, "failure", message=line, type=rule.kind)
            failure.text = line
        elif rule.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=line)
        else:
            ET.SubElement(case, "system-out").text = line
    ET.indent(suites)
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def render_check(
    result: CheckResult,
    fmt: CheckFormat | str,
    *,
    trace: str | None = None,
    baseline: str | None = None,
) -> str:
    """The check result in the given output format, as text."""
    fmt = CheckFormat(fmt)
    if fmt is CheckFormat.json:
        return check_json(result, trace=trace, baseline=baseline)
    if fmt is CheckFormat.markdown:
        return check_markdown(result)
    if fmt is CheckFormat.junit:
        return check_junit(result)
    return check_text(result)
