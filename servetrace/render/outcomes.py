"""Wording and JSON of errored requests and unavailable metrics (issue 9, items 4 and 5).

Kept apart from ``render/summary.py`` so each report form (table, Markdown, JSON, CSV)
takes the same words from one place.
"""

from __future__ import annotations

from typing import Any

from servetrace.analysis.errors import code_label, errors_phrase
from servetrace.analysis.summary import Summary
from servetrace.analysis.unavailable import phrase, unavailable
from servetrace.render._json import clean
from servetrace.stats.describe import STATISTICS
from servetrace.units import NS_PER_MS


def outcome_keys(summary: Summary) -> dict[str, Any]:
    """JSON keys added by issue 9: ``errors`` by code, ``errored`` details, ``unavailable``."""
    errored = dict(summary.errored)
    time_to_error = errored.pop("time_to_error_ns", None)
    if time_to_error is not None:
        errored["time_to_error"] = {
            "unit": "ms",
            **{
                k: (
                    clean(time_to_error.get(k))
                    if k == "count" or time_to_error.get(k) is None
                    else clean(time_to_error.get(k)) / NS_PER_MS
                )
                for k in STATISTICS
            },
        }
    return {
        "errors": dict(summary.errors),
        "errored": errored,
        "unavailable": unavailable(summary),
    }


def errored_part(summary: Summary) -> str:
    """``130 errored (130 × HTTP 429), `` for the accounting line; empty when none."""
    count = summary.outcomes.get("errored", 0)
    if not count:
        return ""
    return f"{count:,} errored ({errors_phrase(summary.errors)}), "


def errored_lines(summary: Summary) -> list[str]:
    count = summary.outcomes.get("errored", 0)
    if not count:
        return []
    tokens = summary.errored.get("output_tokens_delivered", 0)
    return [
        f"errored: {errors_phrase(summary.errors)} (failed, not cancelled: not in latency "
        f"statistics); {tokens:,} tokens delivered before the error"
    ]


def outcome_csv_rows(summary: Summary) -> list[list[Any]]:
    """CSV rows after the metric rows: one per error code, unit ``requests``."""
    blanks = [None] * (len(STATISTICS) - 1)
    rows: list[list[Any]] = []
    for code, n in summary.errors.items():
        rows.append([f"errors[{code_label(code)}]", "requests", n, *blanks])
    return rows


def hidden_metrics(summary: Summary) -> set[str]:
    """Table rows that carry no information: metrics the trace cannot express."""
    return set(unavailable(summary))


def unavailable_caption(summary: Summary) -> str:
    reasons = {k: v for k, v in unavailable(summary).items() if k != "throughput"}
    return f"; unavailable: {phrase(reasons)}" if reasons else ""
