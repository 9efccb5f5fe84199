"""``analyze(..., steps=FILE)``: the run's inter-token gaps joined to its engine steps."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from servetrace.analysis.result import Analysis
from servetrace.analysis.stall_findings import Running
from servetrace.analysis.stall_preempted import preempted_gaps, preemptions
from servetrace.analysis.stalls import stall_analysis, tick_gaps, ticks_of
from servetrace.api._steps import read_step_records

if TYPE_CHECKING:
    import polars as pl


def with_stalls(
    analysis: Analysis, steps: str | os.PathLike[str], steps_from: str | None = None
) -> Analysis:
    """``analysis`` with ``stalls``: its ITL gaps joined to the steps of ``steps``
    (format ``steps_from``, one of `STEP_FORMATS`; default: detected)."""
    gaps, ticks, codes = tick_gaps(_ticks(analysis), analysis.per_request)
    preempted = preemptions(
        analysis.timeline.transitions,
        analysis.per_request,
        lambda: analysis.events("--steps reads the trace's preemptions"),
    )
    # The preemptions' requests by their row in the per-request frame: keyed as the gaps.
    code_of = codes.sort("_pos")["_rk"]
    preempted = preempted.with_columns(_rk=code_of.gather(preempted["_rk"]))
    gaps = gaps.with_columns(preempted_gaps(gaps, preempted))
    records = read_step_records(analysis, steps, steps_from, ticks["ts"])
    p99 = analysis.summary.metrics.get("itl", {}).get("p99")
    stalls = stall_analysis(
        gaps,
        ticks,
        codes,
        records.file,
        Running.of(
            analysis.timeline.transitions, analysis.per_request, analysis.timeline.has_admissions
        ),
        path=records.path,
        fmt=records.fmt,
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
