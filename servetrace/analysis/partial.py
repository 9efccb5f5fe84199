"""Mergeable partial results: what one shard of a trace contributes (docs/partials.md).

A trace split **by request** (every row of a request in one shard) can be analysed shard
by shard — by a batch scheduler, Spark, Dask, or the Ray engine (``ray_engine``) — and
the shards' partials merged into the report one analysis of the whole trace gives.
Three steps, each reusing the per-request kernel of the other engines (``build_timeline``,
``request_metrics``, ``gap_frame``), never a second implementation of it:

1. ``partial_of`` (one shard): the kernel on the shard's rows. What a request's row holds
   depends on the rest of the trace for two kinds of request only, so their raw rows are
   kept (*deferred*) instead of analysed: a request with neither an admission nor an output
   tick (whether it waited in a queue depends on whether the *trace* has admitted requests,
   ``lifecycle`` docstring) and a request without a terminal event that was preempted (its
   requeued time runs to the end of the *trace*). Both are few: they are cancelled or still
   in flight before anything happened to them, or in flight at the end.
2. ``combine`` (any number of partials, associative): per-request rows, concurrency
   transitions and quarantine rows concatenated with trace-wide keys; trace span as
   min/max; flags OR-ed; ITL gaps pooled exactly while they fit ``EXACT_GAPS``, else in
   the mergeable log histogram (``histogram``, ±``RELATIVE_BOUND``). A request id seen in
   two partials is an ``InputError`` (exit 3): the shards were not split by request, and
   the two halves of a request would each be analysed as a wrong request.
3. ``finish``: the deferred rows through the kernel with the facts of the whole trace,
   then ``summarize`` once, as in memory. With exact gaps the result equals the in-memory
   analysis of all shards; beyond, pooled ITL is within the histogram's bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import polars as pl

from servetrace.analysis.histogram import EXACT_GAPS, RELATIVE_BOUND, LogHistogram
from servetrace.analysis.lifecycle import (
    KEY,
    PLACEABLE,
    Timeline,
    TraceFacts,
    admission_warnings,
    build_timeline,
    key_renumbering,
    quarantine_of,
    trace_facts,
)
from servetrace.analysis.lifecycle_rules import ROW_RULES
from servetrace.analysis.memory import attribute_columns, span_warnings
from servetrace.analysis.metrics import gap_frame, request_metrics
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.summary import summarize
from servetrace.dtypes import EVENT_DTYPE
from servetrace.errors import InputError, UsageError
from servetrace.schema import TERMINAL_EVENTS, TICK_EVENTS

FORMAT = "servetrace-partial"
VERSION = 1
# The columns of the lifecycle's request table a report reads (summary, groups).
TIMELINE_COLUMNS = (
    KEY,
    "request_id",
    "rule",
    "rows",
    "arrival_ns",
    "terminal_ns",
    "n_admission",
    "n_release",
    "ticks",
)
EXAMPLE_IDS = 5


@dataclass(frozen=True)
class Partial:
    """One shard's contribution (or several shards' combined); docs/partials.md.

    ``timeline``: every analysed request, valid or not (``TIMELINE_COLUMNS``); ``requests``:
    the per-request metrics of the valid ones (``metrics.REQUEST_COLUMNS`` + attributes);
    ``transitions``: their queued/running/in-system changes; ``gaps``: pooled ITL gaps
    (``_key, itl_ns``) while ``histogram`` is None; ``deferred``: raw canonical rows of
    the requests analysed only by ``finish``; ``quarantine``: input rows not analysed,
    with their ``rule``. Keys are ``0..n-1`` over ``timeline``.
    """

    inputs: tuple[str, ...]
    start_ns: int | None
    end_ns: int | None
    has_releases: bool
    timeline: pl.DataFrame
    requests: pl.DataFrame
    transitions: pl.DataFrame
    gaps: pl.DataFrame
    histogram: LogHistogram | None
    deferred: pl.DataFrame
    quarantine: pl.DataFrame
    attributes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gap_count(self) -> int:
        return self.histogram.n if self.histogram is not None else self.gaps.height


def deferred_ids(events: pl.DataFrame) -> pl.Series:
    """Requests whose analysis depends on the rest of the trace (module docstring)."""
    event = pl.col("event")
    status = (
        events.filter(PLACEABLE)
        .group_by("request_id")
        .agg(
            (
                ~event.is_in(["admission", *TICK_EVENTS]).any()
                | (~event.is_in(TERMINAL_EVENTS).any() & (event == "preemption").any())
            ).alias("deferred")
        )
    )
    return status.filter(pl.col("deferred"))["request_id"]


def _kernel(
    events: pl.DataFrame,
    attributes: list[str],
    facts: TraceFacts,
    unadmitted_queued: bool | None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The local engines' per-request kernel on ``events``: timeline, metrics and gaps
    (dense keys), transitions, and the quarantined rows with their rule."""
    timeline = build_timeline(events, attributes, facts, unadmitted_queued)
    metrics = request_metrics(timeline, attributes)
    gaps = gap_frame(timeline, metrics)
    quarantine = quarantine_of(events, timeline)
    requests_tl, metrics, transitions, gaps = _dense_keys(timeline, metrics, gaps)
    return requests_tl, metrics, transitions, gaps, quarantine


def _kernel_partial(
    events: pl.DataFrame,
    attributes: list[str],
    facts: TraceFacts,
    unadmitted_queued: bool | None,
    deferred: pl.DataFrame,
) -> Partial:
    """``_kernel`` on ``events`` as a partial (no inputs, exact gaps), ``deferred`` held."""
    requests_tl, metrics, transitions, gaps, quarantine = _kernel(
        events, attributes, facts, unadmitted_queued
    )
    return Partial(
        inputs=(),
        start_ns=facts.start_ns,
        end_ns=facts.end_ns,
        has_releases=facts.has_releases,
        timeline=requests_tl,
        requests=metrics,
        transitions=transitions,
        gaps=gaps,
        histogram=None,
        deferred=deferred,
        quarantine=quarantine,
        attributes=tuple(attributes),
    )


def _dense_keys(timeline: Timeline, metrics: pl.DataFrame, gaps: pl.DataFrame) -> tuple:
    """Renumber a kernel's keys 0..n-1 (string ids' keys are category codes)."""
    rekey = key_renumbering(timeline.requests)
    return (
        rekey(timeline.requests.select(TIMELINE_COLUMNS)).select(TIMELINE_COLUMNS),
        rekey(metrics).select(metrics.columns),
        rekey(timeline.transitions).select(timeline.transitions.columns),
        rekey(gaps).select(KEY, "itl_ns"),
    )


def _empty_gaps() -> pl.DataFrame:
    return pl.DataFrame(schema={KEY: pl.Int64, "itl_ns": pl.Int64})


def partial_of(
    events: pl.DataFrame,
    inputs: Sequence[str],
    warnings: Sequence[str] = (),
    exact_gaps: int = EXACT_GAPS,
) -> Partial:
    """Analyse one shard of canonical events (every row of each of its requests)."""
    if events.height == 0:
        raise InputError(
            f"{', '.join(inputs)}: the shard has no event rows",
            hint="a partial needs at least one row: request_id, event, ts",
        )
    facts = trace_facts(events)
    attributes = attribute_columns(events.columns)
    later = deferred_ids(events)
    held = pl.col("request_id").is_in(later.implode()).fill_null(False)
    deferred, rest = events.filter(held), events.filter(~held)
    # No request left in ``rest`` is ambiguous, so unadmitted_queued cannot matter.
    part = _kernel_partial(rest, attributes, facts, False, deferred)
    part = replace(part, inputs=tuple(inputs), warnings=tuple(warnings))
    if part.gaps.height <= exact_gaps:
        return part
    histogram = LogHistogram()
    histogram.add(part.gaps["itl_ns"])
    return replace(part, gaps=_empty_gaps(), histogram=histogram)


# ------------------------------------------------------------------------------ combine
def _overlap(partials: Sequence[Partial]) -> None:
    """Refuse partials that share a request id: the shards were not split by request."""
    ids = []
    for index, part in enumerate(partials):
        seen = pl.concat(
            [
                part.timeline.select("request_id"),
                part.deferred.select("request_id"),
                part.quarantine.filter(~pl.col("rule").is_in(ROW_RULES)).select("request_id"),
            ],
            how="vertical_relaxed",
        )
        ids.append(seen.drop_nulls().unique().with_columns(pl.lit(index).alias("_p")))
    everything = pl.concat(ids, how="vertical_relaxed")
    shared = (
        everything.group_by("request_id")
        .agg(pl.col("_p").sort())
        .filter(pl.col("_p").list.len() > 1)
    )
    if shared.height == 0:
        return
    shared = shared.sort("request_id")
    first = shared.row(0, named=True)
    where = " and ".join(partials[p].inputs[0] if partials[p].inputs else "?" for p in first["_p"])
    examples = ", ".join(repr(v) for v in shared["request_id"].head(EXAMPLE_IDS).to_list())
    raise InputError(
        f"{shared.height:,} request id{'s occur' if shared.height > 1 else ' occurs'} in more "
        f"than one partial (e.g. {examples}; {first['request_id']!r} in {where}): the shards "
        "were not split by request, so each would report half a request as a whole one",
        hint="shard the trace by request_id (e.g. hash(request_id) mod N), or analyse the "
        "files together as one trace",
    )


def _unify_ids(partials: Sequence[Partial]) -> list[Partial]:
    """Integer ids in one shard and text in another: text everywhere, as one read gives."""
    dtypes = {
        frame.schema["request_id"]
        for p in partials
        for frame in (p.timeline, p.deferred)
        if frame.schema["request_id"] != pl.Null
    }
    if len(dtypes) <= 1:
        return list(partials)
    text = pl.col("request_id").cast(pl.String)
    return [
        replace(
            p,
            timeline=p.timeline.with_columns(text),
            requests=p.requests.with_columns(text),
            deferred=p.deferred.with_columns(text),
            quarantine=p.quarantine.with_columns(text),
        )
        for p in partials
    ]


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames, how="diagonal_relaxed")


def combine(partials: Sequence[Partial], exact_gaps: int = EXACT_GAPS) -> Partial:
    """One partial of all of ``partials`` (shards split by request)."""
    if not partials:
        raise UsageError("merge needs at least one partial")
    if len(partials) == 1:
        return partials[0]
    partials = _unify_ids(partials)
    _overlap(partials)
    return _append(partials, exact_gaps)


def _append(partials: Sequence[Partial], exact_gaps: int) -> Partial:
    """``partials`` (ids of one type, no request in two) as one: keys shifted, gaps pooled."""
    offset = 0
    timelines, requests, transitions, gaps = [], [], [], []
    for part in partials:
        shift = pl.col(KEY) + offset
        timelines.append(part.timeline.with_columns(shift))
        requests.append(part.requests.with_columns(shift))
        transitions.append(part.transitions.with_columns(shift))
        gaps.append(part.gaps.with_columns(shift))
        offset += part.timeline.height
    total_gaps = sum(p.gap_count for p in partials)
    histogram = None
    pooled = _concat(gaps)
    if total_gaps > exact_gaps or any(p.histogram is not None for p in partials):
        exact = LogHistogram()
        exact.add(pooled["itl_ns"])
        histogram = LogHistogram.merged(
            [exact, *(p.histogram for p in partials if p.histogram is not None)]
        )
        pooled = _empty_gaps()
    starts = [p.start_ns for p in partials if p.start_ns is not None]
    ends = [p.end_ns for p in partials if p.end_ns is not None]
    attributes = dict.fromkeys(a for p in partials for a in p.attributes)
    return Partial(
        inputs=tuple(i for p in partials for i in p.inputs),
        start_ns=min(starts) if starts else None,
        end_ns=max(ends) if ends else None,
        has_releases=any(p.has_releases for p in partials),
        timeline=_concat(timelines),
        requests=_concat(requests),
        transitions=_concat(transitions),
        gaps=pooled,
        histogram=histogram,
        deferred=_concat([p.deferred for p in partials]),
        quarantine=_concat([p.quarantine for p in partials]),
        attributes=tuple(attributes),
        warnings=tuple(dict.fromkeys(w for p in partials for w in p.warnings)),
    )


# ------------------------------------------------------------------------------- finish
def _resolve_deferred(part: Partial, facts: TraceFacts) -> Partial:
    """The deferred requests through the kernel, knowing the whole trace."""
    if part.deferred.height == 0:
        return part
    tl = part.timeline
    admitted = bool((tl["rule"].is_null() & (tl["n_admission"] > 0)).any())
    events = part.deferred.with_columns(pl.col("event").cast(EVENT_DTYPE))
    attributes = list(part.attributes)
    for name in attributes:
        if name not in events.columns:
            events = events.with_columns(pl.lit(None).alias(name))
    # Known admitted requests elsewhere: queued. Otherwise the deferred rows decide, as a
    # whole-trace build_timeline would (its guess, undone when no admitted one is valid).
    resolved = _kernel_partial(
        events, attributes, facts, True if admitted else None, events.clear()
    )
    # A deferred request is never completed with ticks, so it adds no gaps: exact gaps
    # stay exact, a histogram stays the histogram.
    cleared = replace(part, deferred=part.deferred.clear())
    # The deferred ids were split off by request_id and checked against every other
    # partial by ``combine``: no overlap to look for again over the whole trace's ids.
    parts = _unify_ids([cleared, resolved])
    merged = _append(parts, exact_gaps=max(EXACT_GAPS, part.gap_count))
    return replace(merged, inputs=part.inputs, warnings=part.warnings)


def histogram_warning(part: Partial) -> list[str]:
    if part.histogram is None:
        return []
    return [
        f"merged: more ITL gaps than the {EXACT_GAPS:,} kept exactly, so ITL percentiles "
        f"come from a log histogram (within ±{RELATIVE_BOUND:.4%})"
    ]


def finish(part: Partial, options: AnalysisOptions | None = None) -> Analysis:
    """The analysis of the whole trace the (combined) partial stands for."""
    options = options or AnalysisOptions()
    if options.fluidity is not None:
        raise UsageError(
            "--fluidity is not kept in partial results",
            hint="analyse the trace itself with --fluidity",
        )
    facts = TraceFacts(
        has_admissions=False,  # not read by the kernel; Timeline.has_admissions is below
        has_releases=part.has_releases,
        start_ns=part.start_ns,
        end_ns=part.end_ns,
    )
    part = _resolve_deferred(part, facts)
    tl = part.timeline
    row_quarantine = part.quarantine.filter(pl.col("rule").is_in(ROW_RULES))
    timeline = Timeline(
        requests=tl,
        ticks=pl.DataFrame(
            schema={KEY: pl.Int64, "ts": pl.Int64, "tokens": pl.Int64, "gap_ns": pl.Int64}
        ),
        transitions=part.transitions,
        row_quarantine=row_quarantine,
        trace_start_ns=part.start_ns,
        trace_end_ns=part.end_ns,
        has_admissions=bool((tl["rule"].is_null() & (tl["n_admission"] > 0)).any()),
        has_releases=part.has_releases,
    )
    requests = part.requests.sort("arrival_ns", "request_id", nulls_last=True)
    gaps = part.gaps if part.histogram is None else part.histogram.describe()
    summary = summarize(
        timeline,
        requests,
        gaps,
        targets=options.goodput,
        formula_tolerance=(options.formula_abs_tol_ns, options.formula_rel_tol),
        warnings=[
            *span_warnings(timeline),
            *admission_warnings(timeline),
            *histogram_warning(part),
        ],
    )
    return Analysis(
        inputs=part.inputs,
        timeline=timeline,
        per_request=requests,
        gaps=part.gaps,
        summary=summary,
        quarantine_rows=part.quarantine,
        attributes=part.attributes,
    )
