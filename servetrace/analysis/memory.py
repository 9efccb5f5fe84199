"""The in-memory engine: canonical events → timeline → per-request metrics → summary.

It collects the events once; everything after works on in-memory frames. The streaming
engine (``streaming``) reuses its pieces; ``dispatch`` chooses between the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from servetrace.analysis.fluidity import fluidity_columns
from servetrace.analysis.lifecycle import (
    KEY,
    Timeline,
    admission_warnings,
    build_timeline,
    quarantine_of,
)
from servetrace.analysis.metrics import gap_frame, request_metrics
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.summary import Distribution, Summary, summarize, summarize_groups
from servetrace.errors import InputError, UsageError, first_line
from servetrace.schema import CANONICAL_COLUMNS
from servetrace.sources.canonical import IngestOptions, normalise
from servetrace.sources.trace import Trace
from servetrace.units import NS_PER_DAY

MAX_PLAUSIBLE_SPAN_NS = 30 * NS_PER_DAY


# Epoch timestamps of the years 2000-2100 in ms and in us: integers in these ranges read as
# nanoseconds put the whole trace in the first hour of 1970.
EPOCH_RANGES = {
    "ms": (946_684_800_000, 4_102_444_800_000),
    "us": (946_684_800_000_000, 4_102_444_800_000_000),
}


def span_warnings(timeline: Timeline) -> list[str]:
    """Warn when the timestamps are implausible for their unit (DESIGN §2)."""
    start, end = timeline.trace_start_ns, timeline.trace_end_ns
    if start is None or end is None:
        return []
    span = end - start
    fix = "are the timestamps in the unit you think? Set it with --time-unit ns|us|ms|s"
    if span > MAX_PLAUSIBLE_SPAN_NS:
        return [f"the trace spans {span / NS_PER_DAY:.0f} days: {fix}"]
    for unit, (low, high) in EPOCH_RANGES.items():
        if low <= start <= high and span < 1_000_000_000:
            return [
                f"the timestamps look like epoch {unit} read as ns (the whole trace would "
                f"last {span / 1e6:.3g} ms in January 1970): {fix}"
            ]
    if span <= 1_000 and timeline.requests.height >= 1 and (timeline.requests["rows"].sum() > 1):
        return [f"every event falls within {span} ns: {fix}"]
    return []


def attribute_columns(columns: Sequence[str]) -> list[str]:
    """Every non-canonical column: a request attribute carried to the per-request frame."""
    return [c for c in columns if c not in CANONICAL_COLUMNS]


def analyze_events(
    events: pl.DataFrame | pl.LazyFrame,
    options: AnalysisOptions | None = None,
    inputs: Sequence[str] = ("<memory>",),
    ingest: IngestOptions | None = None,
) -> Analysis:
    """Analyse canonical events held in memory (e.g. from an importer)."""
    lazy = events.lazy() if isinstance(events, pl.DataFrame) else events
    label = inputs[0] if inputs else "<memory>"
    frame = normalise(lazy, label, ingest)
    analysis = _analyze(frame.collect(), options or AnalysisOptions(), tuple(inputs))
    # The events are the caller's, in memory already: the views may read them again.
    return replace(analysis, events_reader=lambda: normalise(lazy, label, ingest))


def unreadable(trace: Trace, error: pl.exceptions.PolarsError) -> InputError:
    """A read failure that only surfaced while the lazy scan ran, as the user sees it."""
    return InputError(
        f"{', '.join(trace.files)}: cannot read the trace: {first_line(error)}",
        hint="is every file complete, and does each column hold one type?",
    )


def no_event_rows(inputs: Sequence[str]) -> InputError:
    return InputError(
        f"{', '.join(inputs)}: the trace has no event rows",
        hint="a trace needs at least one row: request_id, event, ts",
    )


def summary_of(
    timeline: Timeline,
    requests: pl.DataFrame,
    gaps: pl.DataFrame | Distribution,
    options: AnalysisOptions,
    warnings: Sequence[str] = (),
) -> Summary:
    """``summarize`` with the options and the warnings every engine gives."""
    return summarize(
        timeline,
        requests,
        gaps,
        targets=options.goodput,
        formula_tolerance=(options.formula_abs_tol_ns, options.formula_rel_tol),
        warnings=[*span_warnings(timeline), *admission_warnings(timeline), *warnings],
    )


def analyze_trace(trace: Trace, options: AnalysisOptions | None = None) -> Analysis:
    try:
        collected = trace.events.collect()
    except pl.exceptions.PolarsError as error:
        raise unreadable(trace, error) from None
    return _analyze(collected, options or AnalysisOptions(), trace.inputs)


def _analyze(events: pl.DataFrame, options: AnalysisOptions, inputs: tuple[str, ...]) -> Analysis:
    if events.height == 0:
        raise no_event_rows(inputs)
    attributes = attribute_columns(events.columns)
    timeline = build_timeline(events, attributes)
    requests = request_metrics(timeline, attributes)
    if options.fluidity is not None:
        requests = fluidity_columns(timeline, requests, options.fluidity)
    gaps = gap_frame(timeline, requests)
    # Keep what reports need, not the trace: the events and sorted ticks are the bulk of
    # memory, and only the rows of invalid requests are ever shown again.
    quarantine = quarantine_of(events, timeline)
    if not options.keep_ticks:
        timeline = replace(timeline, ticks=timeline.ticks.clear())
    summary = summary_of(timeline, requests, gaps, options)
    return Analysis(
        inputs=inputs,
        timeline=timeline,
        per_request=requests,
        gaps=gaps,
        summary=summary,
        quarantine_rows=quarantine,
        attributes=tuple(attributes),
    )


def summarize_by(
    analysis: Analysis, column: str, options: AnalysisOptions | None = None
) -> dict[object, Summary]:
    """One summary per value of a request attribute (``--by policy``), nulls last: the
    trace's summary run over the attribute as its group key, each group over its own
    span, as if analysed alone (``summary.summarize_groups``)."""
    options = options or AnalysisOptions()
    requests = analysis.per_request
    if column not in requests.columns or column == KEY:
        available = ", ".join(c for c in requests.columns if not c.startswith("_"))
        raise UsageError(f"--by {column}: no such request column", hint=f"columns: {available}")
    # A batched engine keeps the gap frame (with request keys) while its gaps are exact:
    # then --by splits it as in memory; beyond the budget, its per-group distributions.
    kept_all = analysis.gaps.height >= (analysis.summary.metrics["itl"].get("count") or 0)
    streamed = (
        analysis.itl_by[1]
        if analysis.itl_by and analysis.itl_by[0] == column and not kept_all
        else None
    )
    return summarize_groups(
        analysis.timeline,
        requests,
        analysis.gaps if streamed is None else streamed,
        column,
        targets=options.goodput,
        formula_tolerance=(options.formula_abs_tol_ns, options.formula_rel_tol),
    )
