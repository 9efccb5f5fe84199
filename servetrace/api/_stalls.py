"""``analyze(..., steps=FILE)``: the run's inter-token gaps joined to its engine steps."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from servetrace.analysis.result import Analysis
from servetrace.analysis.stall_findings import Running
from servetrace.analysis.stall_preempted import preempted_gaps, preemptions
from servetrace.analysis.stalls import stall_analysis, tick_gaps, ticks_of
from servetrace.errors import UsageError
from servetrace.sources.steps.detect import detect_step_format
from servetrace.sources.steps.formats import STEP_FORMATS, read_steps

if TYPE_CHECKING:
    import polars as pl


def with_stalls(
    analysis: Analysis, steps: str | os.PathLike[str], steps_from: str | None = None
) -> Analysis:
    """``analysis`` with ``stalls``: its ITL gaps joined to the steps of ``steps``
    (format ``steps_from``, one of `STEP_FORMATS`; default: detected)."""
    if steps_from is not None and steps_from not in STEP_FORMATS:
        raise UsageError(
            f"--steps-from {steps_from}: not a step format",
            hint="choose one of: " + ", ".join(STEP_FORMATS),
        )
    path = Path(steps)
    gaps, ticks, codes = tick_gaps(_ticks(analysis), analysis.per_request)
    preempted = preemptions(
        analysis.timeline.transitions,
        analysis.per_request,
        lambda: analysis.events("--steps reads the trace's preemptions"),
    )
    gaps = gaps.with_columns(preempted_gaps(gaps, preempted))
    fmt = steps_from or detect_step_format(path)
    step_file = read_steps(path, fmt, ticks["ts"])
    p99 = analysis.summary.metrics.get("itl", {}).get("p99")
    stalls = stall_analysis(
        gaps,
        ticks,
        codes,
        step_file,
        Running.of(
            analysis.timeline.transitions, analysis.per_request, analysis.timeline.has_admissions
        ),
        path=str(path),
        fmt=fmt,
        tail_threshold_ns=round(p99) if p99 is not None else None,
    )
    return replace(analysis, stalls=stalls)


def _ticks(analysis: Analysis) -> pl.DataFrame:
    """The timeline's sorted ticks: kept by the in-memory engine under ``--steps``, else
    made again from the events by the lifecycle's own code."""
    kept = analysis.timeline.ticks
    requests = analysis.timeline.requests
    counted = "ticks" in requests.columns and not requests["ticks"].fill_null(0).sum()
    if kept.height or counted:
        return kept
    events = analysis.events("--steps joins the engine's steps to the trace's token ticks")
    return ticks_of(events, analysis.per_request)
