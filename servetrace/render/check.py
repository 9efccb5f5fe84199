"""Render a check result as a table, JSON, Markdown or JUnit XML (pure: returns text).

The lines themselves (``FAIL ttft.p99: 208 ms > 200 ms``, the verdict, the method) are
written by ``render.check_words`` from the numbers of ``servetrace.rules.evaluate``; this
module lays them out per format, converting values from ns to the reporting unit.

Built for CI (pip-audit's habit): the report is the whole story, one line per rule; JUnit
has one test case per rule, so CI systems show each SLO and budget as a test (a skipped
rule as a skipped test, or as a failure under ``--require-all``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from servetrace.render._json import VERSIONS, clean
from servetrace.render.check_words import (
    fmt,
    method_line,
    notes,
    rule_line,
    shown,
    sources_line,
    unit_of,
    verdict_line,
)
from servetrace.render.format import plain_text
from servetrace.render.formats import CheckFormat
from servetrace.render.markdown_text import md_code, md_text
from servetrace.render.summary import render_json
from servetrace.render.workload import workload_dict
from servetrace.rules.outcome import Status
from servetrace.rules.result import CheckResult, RuleResult
from servetrace.version import __version__

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
            **VERSIONS,
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
            "rule_sources": [
                {"from": where, "rules": count} for where, count in result.rule_sources
            ],
            "baseline_from": result.baseline_from,
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
    return render_json(check_dict(result, trace=trace, baseline=baseline)) + "\n"


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
    sources = sources_line(result)
    if sources:
        parts.append(Text(sources, style="dim"))
    for note in notes(result):
        parts.append(Text("note: " + note, style="yellow"))
    return Group(*parts)


def check_text(result: CheckResult, *, width: int = 110) -> str:
    return plain_text(check_table(result), width, soft_wrap=True)


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
            f"| {_ICON[rule.status]} | {md_code(rule.rule)} | "
            f"{fmt(rule, rule.value)} | {fmt(rule, rule.limit)} | "
            f"{fmt(rule, rule.baseline) if rule.kind == 'regression' else ''} | "
            f"{_significant(rule)} |"
        )
    lines.append("")
    for rule in (*result.skipped, *result.inconclusive):
        lines.append(f"> {_ICON[rule.status]} {md_text(rule_line(rule), cell=False)}")
    if result.skipped or result.inconclusive:
        lines.append("")
    method = method_line(result)
    if method:
        lines.append(f"<sub>{md_text(method, cell=False)}</sub>")
        lines.append("")
    sources = sources_line(result)
    if sources:
        lines.append(f"<sub>{sources}</sub>")
        lines.append("")
    for note in notes(result):
        lines.append(f"> :warning: {md_text(note, cell=False)}")
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
    failing = {Status.FAIL}
    if result.require_all:
        failing.add(Status.SKIP)
    if not result.allow_inconclusive:
        failing.add(Status.INCONCLUSIVE)
    failures = sum(rule.status in failing for rule in result.results)
    skipped = 0 if result.require_all else len(result.skipped)
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
        if rule.status in failing:
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
