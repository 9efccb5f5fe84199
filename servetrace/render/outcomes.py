"""Wording and JSON of errored requests and unavailable metrics.

Kept apart from ``render/summary.py`` so each report form (table, Markdown, JSON, CSV)
takes the same words from one place.
"""

from __future__ import annotations

from typing import Any

from servetrace.analysis.errors import code_label, errors_phrase
from servetrace.analysis.summary import Summary
from servetrace.analysis.unavailable import (
    OUTPUT_RATES,
    OUTPUT_UNKNOWN,
    WORDS,
    phrase,
    unavailable,
)
from servetrace.render.distribution import distribution_ms
from servetrace.stats.names import STATISTICS


def outcome_keys(summary: Summary) -> dict[str, Any]:
    """JSON keys of failed requests and unavailable metrics: ``errors`` by code,
    ``errored`` details, ``unavailable``."""
    errored = dict(summary.errored)
    time_to_error = errored.pop("time_to_error_ns", None)
    if time_to_error is not None:
        errored["time_to_error"] = distribution_ms(time_to_error)
    return {
        "errors": dict(summary.errors),
        "errored": errored,
        "unavailable": unavailable(summary),
    }


def accounting_line(summary: Summary, quarantined: bool = True) -> str:
    """``3,000 requests (…rows): 2,500 completed, …, 0 invalid`` (and the rows quarantined)."""
    a, o = summary.accounting, summary.outcomes
    rows = f" ({a.rows_quarantined:,} rows quarantined)" if quarantined else ""
    return (
        f"{a.requests:,} requests ({a.rows:,} rows): {o.get('completed', 0):,} completed, "
        + errored_part(summary)
        + f"{o.get('cancelled', 0):,} cancelled, {o.get('in_flight', 0):,} in flight, "
        f"{a.requests_invalid:,} invalid{rows}"
    )


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
        f"statistics); {delivered_phrase(tokens)} before the error"
    ]


# Why a request cancelled in the "unknown" stage (analysis.metrics) tells neither where it
# was nor what it delivered.
PARTIAL_OUTPUT_DROPPED = "the source drops the partial output of a cancelled request"


def delivered_phrase(tokens: int | None, why: str = WORDS[OUTPUT_UNKNOWN]) -> str:
    """``1,200 tokens delivered``, or why the count is unknown (analysis.output_counts)."""
    if tokens is None:
        return f"tokens delivered unknown ({why})"
    return f"{tokens:,} tokens delivered"


def outcome_csv_rows(summary: Summary) -> list[list[Any]]:
    """CSV rows after the metric rows: one per error code, unit ``requests``."""
    blanks = [None] * (len(STATISTICS) - 1)
    rows: list[list[Any]] = []
    for code, n in summary.errors.items():
        rows.append([f"errors[{code_label(code)}]", "requests", n, *blanks])
    return rows


def unavailable_caption(summary: Summary) -> str:
    # the throughput line says why its rates are missing
    reasons = {
        k: v for k, v in unavailable(summary).items() if k != "throughput" and k not in OUTPUT_RATES
    }
    return f"; unavailable: {phrase(reasons)}" if reasons else ""


def output_rate_part(summary: Summary) -> str:
    """``1,234 output tok/s``, or why there is none (analysis.output_counts)."""
    rate = summary.throughput.get("output_tokens_per_s")
    if rate is not None:
        return f"{rate:,.0f} output tok/s"
    reason = unavailable(summary).get("output_tokens_per_s")
    return f"output tok/s unavailable ({reason})" if reason else "output tok/s unavailable"
