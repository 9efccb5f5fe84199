"""Render ``servetrace validate``: accounting and rule violations only (never computes)."""

from __future__ import annotations

from typing import Any

from servetrace.analysis.lifecycle_rules import RULES
from servetrace.analysis.summary import Summary
from servetrace.render.summary import report_dict

# The keys of the analyze report that validate shows: what was read and what broke.
VALIDATE_KEYS = (
    "servetrace_version",
    "schema_version",
    "inputs",
    "accounting",
    "outcomes",
    "violations",
    "leaked_state",
    "warnings",
)


def validate_dict(summary: Summary, inputs: tuple[str, ...]) -> dict[str, Any]:
    body = report_dict(summary, inputs)
    return {key: body[key] for key in VALIDATE_KEYS}


def validate_text(summary: Summary, inputs: tuple[str, ...]) -> str:
    """One accounting line, then one line per broken rule in rule order (stable)."""
    a = summary.accounting
    lines = [
        f"{', '.join(inputs)}: {a.rows:,} rows, {a.requests:,} requests: "
        f"{a.requests_valid:,} valid, {a.requests_invalid:,} invalid; "
        f"{a.rows_analyzed:,} rows analysable, {a.rows_quarantined:,} quarantined"
    ]
    for rule in RULES:
        if rule not in summary.violations:
            continue
        info = summary.violations[rule]
        examples = ", ".join(map(str, info["examples"]))
        lines.append(
            f"  {rule}: {info['requests']:,} requests, {info['rows']:,} rows — "
            f"{RULES[rule]}" + (f" (e.g. {examples})" if examples else "")
        )
    if summary.leaked_state and summary.leaked_state["requests"]:
        lines.append(
            f"  leaked_state: {summary.leaked_state['requests']:,} finished requests "
            "were never released"
        )
    return "\n".join(lines) + "\n"
