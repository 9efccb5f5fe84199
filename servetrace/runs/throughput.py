"""Throughput over the run's declared duration, when the trace has no send times.

vLLM's result files before ``start_times`` keep no per-request send times, so no window
first arrival → last terminal can be measured; they do store the run's ``duration`` and
vLLM divides by it (``request_throughput = completed / duration``,
``output_throughput = total_output_tokens / duration``). ``with_declared_window`` does
the same, over completed requests as servetrace always counts, and says so:
``Summary.window_source == "declared"`` (JSON ``throughput.window_source``) and a warning.
A trace with its own window keeps it (``"trace"``): a measured window beats a declared one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import polars as pl

from servetrace.analysis.output_counts import token_sum
from servetrace.analysis.result import Analysis as EngineAnalysis
from servetrace.analysis.summary import Summary

_NO_SEND_TIMES = "send times are unknown in this trace"
# Said without the duration, so that a sweep's runs share one line (the JSON has it).
DECLARED_DURATION_NOTE = (
    "per-request send times are missing: throughput is over the run's declared duration, "
    "as the tool computed it; concurrency is not computed"
)


def _declared_duration(declared: Mapping[str, Any]) -> float | None:
    value = declared.get("duration_s")
    if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def declared_throughput(
    requests: pl.DataFrame, duration_s: float, goodput_met: int | None
) -> dict[str, float | None]:
    """The throughput keys of ``analysis.summary.throughput`` over ``duration_s``."""
    completed = requests.filter(pl.col("outcome") == "completed")
    output = token_sum(completed) if completed.height else 0  # None: a count is unknown
    prompt_known = completed.height > 0 and completed["prompt_tokens"].null_count() == 0
    prompt = int(completed["prompt_tokens"].sum()) if prompt_known else 0
    return {
        "window_s": duration_s,
        "requests_per_s": completed.height / duration_s,
        "output_tokens_per_s": output / duration_s if output is not None else None,
        "total_tokens_per_s": (
            (output + prompt) / duration_s if prompt_known and output is not None else None
        ),
        "goodput_requests_per_s": goodput_met / duration_s if goodput_met is not None else None,
    }


def with_declared_summary(
    summary: Summary, requests: pl.DataFrame, declared: Mapping[str, Any]
) -> Summary:
    if summary.throughput.get("window_s") is not None:
        return summary
    duration = _declared_duration(declared)
    if duration is None:
        return summary
    met = summary.goodput["requests_met"] if summary.goodput else None
    notes = [w for w in summary.warnings if not w.startswith(_NO_SEND_TIMES)]
    notes.append(DECLARED_DURATION_NOTE)
    return replace(
        summary,
        throughput=declared_throughput(requests, duration, met),
        window_source="declared",
        warnings=tuple(notes),
    )


def with_declared_window(engine: EngineAnalysis, declared: Mapping[str, Any]) -> EngineAnalysis:
    """``engine`` with its throughput over the declared duration when it had no window."""
    summary = with_declared_summary(engine.summary, engine.per_request, declared)
    return engine if summary is engine.summary else replace(engine, summary=summary)
