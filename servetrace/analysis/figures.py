"""Definitions of summary figures that the trace summary and ``--by`` groups share.

``summary.summarize`` computes them for a whole trace, ``groups.summarize_groups`` for
every group at once (one ``group_by``); both take the definition from here, so a group's
figure is the figure of the group analysed alone: outcomes and cancellation stages by
name, the failed-cancellation rule, the throughput rates over a window, and the notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from servetrace.analysis.errors import ERRORED
from servetrace.units import NS_PER_S

OUTCOMES = ("completed", "cancelled", "in_flight", ERRORED)
CANCEL_STAGES = ("queued", "prefill", "decode", "before_first_token")
THROUGHPUT_KEYS = (
    "window_s",
    "requests_per_s",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "goodput_requests_per_s",
)
# HTTP 499 is "client closed request": the client's own cancellation, not a failure.
CLIENT_CLOSED = 499


def failed(columns: list[str]) -> pl.Expr:
    """Whether a cancellation is a failure: it carries an error code other than 499.

    Client tools end failed requests (HTTP 429, timeouts) with a cancellation too; the
    importer keeps their error code, so the report can tell failing from giving up.
    """
    if "error_code" not in columns:
        return pl.lit(False)
    return pl.col("error_code").is_not_null() & (pl.col("error_code") != CLIENT_CLOSED)


def window_aggregates() -> list[pl.Expr]:
    """What the rates need from the per-request frame (of a trace, or in a group_by)."""
    done = pl.col("outcome") == "completed"
    return [
        pl.col("arrival_ns").min().alias("start"),
        (pl.col("arrival_ns") + pl.col("e2e_ns")).max().alias("end"),
        done.sum().alias("completed"),
        pl.col("output_tokens").filter(done).sum().alias("output"),
        # an unknown count (analysis.output_counts) leaves the token rates unknown
        pl.col("output_tokens").filter(done).null_count().alias("output_missing"),
        pl.col("prompt_tokens").filter(done).sum().alias("prompt"),
        pl.col("prompt_tokens").filter(done).null_count().alias("prompt_missing"),
    ]


def rates(window: Mapping[str, Any], goodput_met: int | None) -> dict[str, float | None]:
    """Rates of completed requests over the window first arrival → last terminal event.

    ``window``: the ``window_aggregates`` of the requests. The total rate needs every
    completed request's prompt length; the goodput rate needs targets (``goodput_met``).
    No window (no end, or no length), no rates.
    """
    start, end = window["start"], window["end"]
    if start is None or end is None or end <= start:
        return dict.fromkeys(THROUGHPUT_KEYS)
    window_s = (end - start) / NS_PER_S
    completed = window["completed"]
    output, prompt = int(window["output"] or 0), int(window["prompt"] or 0)
    prompt_known = completed > 0 and window["prompt_missing"] == 0
    counted = window["output_missing"] == 0  # else unknown (analysis.output_counts)
    return {
        "window_s": window_s,
        "requests_per_s": completed / window_s,
        "output_tokens_per_s": output / window_s if counted else None,
        "total_tokens_per_s": ((output + prompt) / window_s if prompt_known and counted else None),
        "goodput_requests_per_s": goodput_met / window_s if goodput_met is not None else None,
    }


def summary_notes(completed: int, arrival_known: bool) -> list[str]:
    """What the reader of a summary must know about its numbers."""
    notes = []
    if 0 < completed < 100:
        notes.append(f"only {completed} completed requests: p99 and p99.9 are unreliable")
    if not arrival_known:
        notes.append(
            "send times are unknown in this trace: throughput and concurrency are not "
            "computed (latencies are measured from each request's own send)"
        )
    return notes
