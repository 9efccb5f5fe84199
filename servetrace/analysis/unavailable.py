"""Metrics a trace cannot express: *unavailable*, with the reason.

A client sees no admission (no ``queue_wait``/``prefill``) and no preemption (no
``requeued``/``preemptions``); a request-level export has no per-token times (no
``itl``); a source whose last token is its end has no separate completion time (an
all-zero ``delivery_tail``); a trace without send times has no throughput window; a
request-level trace without output-token counts (``analysis/output_counts.py``) has no
output or total tok/s (any completed request uncounted) and no ``output_tokens``,
``tpot`` or per-request ``formula`` check (every completed request uncounted). The
reason codes are those ``check`` SKIPs with (``rules/outcome.py``'s ``Reason`` values and
its metric sets), so analyze, compare and check give the same reason for the same gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

# The codes of rules/outcome.Reason (kept as plain strings: analysis does not import the
# gate); rules/outcome.py checks that they agree (tests/analysis/test_unavailable.py).
CLIENT_TRACE = "client_trace"
NO_TOKEN_TIMES = "no_token_times"
ARRIVAL_UNKNOWN = "arrival_unknown"
NO_COMPLETION_TIME = "no_completion_time"
OUTPUT_UNKNOWN = "output_count_unknown"

SERVER_SIDE = ("queue_wait", "prefill", "requeued", "preemptions")
TOKEN_TIMED = ("itl",)
# Unavailable when any completed request's output count is unknown (a sum over the rest
# would be an undercount), resp. when every completed request's is.
OUTPUT_RATES = ("output_tokens_per_s", "total_tokens_per_s")
OUTPUT_COUNTED = ("output_tokens", "tpot", "formula")
WORDS = {
    CLIENT_TRACE: "client trace",
    NO_TOKEN_TIMES: "request-level export",
    ARRIVAL_UNKNOWN: "no send times",
    NO_COMPLETION_TIME: "no completion time apart from the last token",
    OUTPUT_UNKNOWN: "no output token counts",
}


def _client(summary: Any) -> bool:
    return "client" in str(summary.source).split(",")


def unavailable_reasons(summary: Any) -> dict[str, str]:
    """``{metric: reason code}`` of the metrics ``summary``'s trace cannot express."""
    out: dict[str, str] = {}
    metrics = summary.metrics
    if _client(summary):
        for name in SERVER_SIDE:
            if name == "requeued" and metrics.get(name, {}).get("max"):
                continue  # a client trace that does carry preemptions (converted) keeps it
            out[name] = CLIENT_TRACE
        if not metrics.get("delivery_tail", {}).get("max"):  # zero everywhere, or blanked
            out["delivery_tail"] = NO_COMPLETION_TIME
    if not summary.ticks_available:
        for name in TOKEN_TIMED:
            out[name] = NO_TOKEN_TIMES
    if summary.throughput.get("window_s") is None:  # no send times and no declared duration
        out["throughput"] = ARRIVAL_UNKNOWN
    if not summary.arrival_known:
        out["concurrency"] = ARRIVAL_UNKNOWN
    uncounted = getattr(summary, "output_uncounted", 0)
    if uncounted:
        if summary.arrival_known or summary.throughput.get("window_s") is not None:
            out.update(dict.fromkeys(OUTPUT_RATES, OUTPUT_UNKNOWN))
        if uncounted >= summary.outcomes.get("completed", 0):
            out.update(dict.fromkeys(OUTPUT_COUNTED, OUTPUT_UNKNOWN))
    return out


def output_unknown(reasons: Mapping[str, Any]) -> frozenset[str]:
    """The names in ``reasons`` (codes or words) unavailable for unknown output counts."""
    why = (OUTPUT_UNKNOWN, WORDS[OUTPUT_UNKNOWN])
    return frozenset(name for name, reason in reasons.items() if reason in why)


def reason_for(reasons: dict[str, str], metric: str, stat: str | None = None) -> str | None:
    """The reason of ``metric`` (``tpot``) or of its statistic (``throughput``'s
    ``output_tokens_per_s``), None when both are available."""
    found = reasons.get(metric)
    if found is None and stat is not None:
        found = reasons.get(stat)
    return found


def unavailable(summary: Any) -> dict[str, str]:
    """``{metric: reason in words}`` (``itl: request-level export``)."""
    return {name: WORDS[code] for name, code in unavailable_reasons(summary).items()}


def phrase(reasons: dict[str, str]) -> str:
    """``itl (request-level export), preemptions (client trace)``."""
    return ", ".join(f"{name} ({why})" for name, why in reasons.items())


def blank_unavailable(summary: Any) -> Any:
    """``summary`` with the distributions of what its trace cannot express emptied (count
    0, every statistic None): a client trace's requeue time or all-zero delivery tail is a
    placeholder of the source, not a measurement, and no view may show it as one."""
    gone = [
        name for name in unavailable_reasons(summary) if summary.metrics.get(name, {}).get("count")
    ]
    if not gone:
        return summary
    empty = {key: (0 if key == "count" else None) for key in summary.metrics[gone[0]]}
    return replace(
        summary,
        metrics={k: dict(empty) if k in gone else v for k, v in summary.metrics.items()},
        intervals={k: v for k, v in summary.intervals.items() if k not in gone},
    )
