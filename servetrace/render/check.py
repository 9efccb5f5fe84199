"""Render a check result as a table, JSON, Markdown or JUnit XML (pure: returns text).

Built for CI (pip-audit's habit): the report is the whole story, one line per rule,
``FAIL ttft.p99: 208 ms > 200 ms``; JUnit has one test case per rule, so CI systems show
each SLO and budget as a test.
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
from servetrace.check.gate import GateResult, RuleResult
from servetrace.render._json import clean
from servetrace.render.format import format_value


class CheckFormat(str, Enum):
    """Output formats of ``servetrace check``."""

    table = "table"
    json = "json"
    markdown = "markdown"
    junit = "junit"


def _summary(result: GateResult) -> str:
    total = len(result.results)
    failed = len(result.failures)
    if result.passed:
        return f"check passed: {total} of {total} rules"
    return f"check failed: {failed} of {total} rules"


def _method(result: GateResult) -> str | None:
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


# --------------------------------------------------------------------------- JSON
def check_dict(
    result: GateResult, *, trace: str | None = None, baseline: str | None = None
) -> dict[str, Any]:
    """``{"passed": bool, "rules": [...]}`` plus the inputs and the method."""
    body = result.to_dict()
    return clean(
        {
            "servetrace_version": __version__,
            "schema_version": SCHEMA_VERSION,
            "trace": trace,
            "baseline_file": baseline,
            **body,
        }
    )


def check_json(result: GateResult, *, trace: str | None = None, baseline: str | None = None) -> str:
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
def check_table(result: GateResult) -> Group:
    """One line per rule (PASS in green, FAIL in red), then the verdict and method."""
    parts: list[RenderableType] = []
    for rule in result.results:
        status, rest = rule.message.split(" ", 1)
        parts.append(
            Text.assemble((status, "bold green" if rule.passed else "bold red"), " " + rest)
        )
    parts.append(Text(""))
    parts.append(Text(_summary(result), style="bold green" if result.passed else "bold red"))
    method = _method(result)
    if method:
        parts.append(Text("method: " + method, style="dim"))
    for note in result.notes:
        parts.append(Text("note: " + note, style="yellow"))
    return Group(*parts)


def check_text(result: GateResult, *, width: int = 110) -> str:
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
def check_markdown(result: GateResult) -> str:
    """A Markdown table for a pull-request comment."""
    icon = ":white_check_mark:" if result.passed else ":x:"
    lines = [
        f"### servetrace check {icon} {_summary(result)}",
        "",
        "| | rule | value | limit | baseline | significant |",
        "|---|---|---:|---:|---:|---|",
    ]
    for rule in result.results:
        lines.append(
            f"| {':white_check_mark:' if rule.passed else ':x:'} | `{rule.rule}` | "
            f"{_value(rule.value, rule.unit)} | {_value(rule.limit, rule.unit)} | "
            f"{_value(rule.baseline, rule.unit) if rule.kind == 'regression' else ''} | "
            f"{_significant(rule)} |"
        )
    lines.append("")
    method = _method(result)
    if method:
        lines.append(f"<sub>{method}</sub>")
        lines.append("")
    for note in result.notes:
        lines.append(f"> :warning: {note}")
    return "\n".join(lines).rstrip("\n") + "\n"


def _value(value: float | None, unit: str) -> str:
    return format_value(value, unit)


def _significant(rule: RuleResult) -> str:
    if rule.significant is None:
        return "-"
    return "yes" if rule.significant else "no"


# --------------------------------------------------------------------------- JUnit
def check_junit(result: GateResult, *, name: str = "servetrace check") -> str:
    """JUnit XML: one test case per rule, a ``failure`` for each rule that failed."""
    suites = ET.Element(
        "testsuites",
        name=name,
        tests=str(len(result.results)),
        failures=str(len(result.failures)),
        errors="0",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(len(result.results)),
        failures=str(len(result.failures)),
        errors="0",
        skipped="0",
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
            suite, "testcase", classname=f"servetrace.check.{rule.kind}", name=rule.rule
        )
        if not rule.passed:
            failure = ET.SubElement(case, "failure", message=rule.message, type=rule.kind)
            failure.text = rule.message
        else:
            ET.SubElement(case, "system-out").text = rule.message
    ET.indent(suites)
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def render_check(
    result: GateResult,
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
