"""``analyze(..., steps=FILE)``: the run's inter-token gaps joined to its engine steps."""

from __future__ import annotations

import os
from dataclasses import replace

from servetrace.analysis.result import Analysis
from servetrace.analysis.stalls import stall_analysis, tick_gaps
from servetrace.api._steps import read_step_records


def with_stalls(
    analysis: Analysis, steps: str | os.PathLike[str], steps_from: str | None = None
) -> Analysis:
    """``analysis`` with ``stalls``: its ITL gaps joined to the steps of ``steps``
    (format ``steps_from``, one of `STEP_FORMATS`; default: detected)."""
    events = analysis.events("--steps joins the engine's steps to the trace's token ticks")
    gaps, ticks, spans, codes = tick_gaps(events, analysis.per_request)
    records = read_step_records(analysis, steps, steps_from, ticks["ts"].unique().sort())
    p99 = analysis.summary.metrics.get("itl", {}).get("p99")
    stalls = stall_analysis(
        gaps,
        ticks,
        spans,
        codes,
        records.file,
        path=records.path,
        fmt=records.fmt,
        tail_threshold_ns=round(p99) if p99 is not None else None,
    )
    return replace(analysis, stalls=stalls)
