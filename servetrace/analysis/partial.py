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

from servetrace.analysis.histogram import EXACT_GAPS, LogHistogram
from servetrace.analysis.lifecycle import (
    EVENT_TIMES,
    KEY,
    PLACEABLE,
    TraceFacts,
    build_timeline,
    key_renumbering,
    quarantine_of,
    trace_facts,
)
from servetrace.analysis.memory import attribute_columns
from servetrace.analysis.metrics import gap_frame, request_metrics
from servetrace.analysis.partial_settings import ShardSettings
from servetrace.errors import InputError
from servetrace.schema import TERMINAL_EVENTS, TICK_EVENTS

FORMAT = "servetrace-partial"
# 2: the manifest records the analysis settings, the timeline every event time (--by).
VERSION = 2
# The columns of the lifecycle's request table a report reads: the summary, and --by's
# span of each group (its first arrival to the last of any event time).
TIMELINE_COLUMNS = (
    KEY,
    "request_id",
    "rule",
    "rows",
    *dict.fromkeys(("arrival_ns", "terminal_ns", *EVENT_TIMES)),
    "n_admission",
    "n_release",
    "ticks",
)


@dataclass(frozen=True)
class Partial:
    """One shard's contribution (or several shards' combined); docs/partials.md.

    ``timeline``: every analysed request, valid or not (``TIMELINE_COLUMNS``); ``requests``:
    the per-request metrics of the valid ones (``metrics.REQUEST_COLUMNS`` + attributes);
    ``transitions``: their queued/running/in-system changes; ``gaps``: pooled ITL gaps
    (``_key, itl_ns``) while ``histogram`` is None; ``deferred``: raw canonical rows of
    the requests analysed only by ``finish``; ``quarantine``: input rows not analysed,
    with their ``rule``; ``settings``: what the analysis was asked to do. Keys are
    ``0..n-1`` over ``timeline``.
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
    settings: ShardSettings = field(default_factory=ShardSettings)

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


def kernel_partial(
    events: pl.DataFrame,
    attributes: list[str],
    facts: TraceFacts,
    unadmitted_queued: bool | None,
    deferred: pl.DataFrame,
) -> Partial:
    """The local engines' per-request kernel on ``events`` as a partial (no inputs,
    exact gaps, keys renumbered 0..n-1: string ids' keys are category codes), with
    ``deferred`` held."""
    timeline = build_timeline(events, attributes, facts, unadmitted_queued)
    metrics = request_metrics(timeline, attributes)
    gaps = gap_frame(timeline, metrics)
    rekey = key_renumbering(timeline.requests)
    return Partial(
        inputs=(),
        start_ns=facts.start_ns,
        end_ns=facts.end_ns,
        has_releases=facts.has_releases,
        timeline=rekey(timeline.requests.select(TIMELINE_COLUMNS)).select(TIMELINE_COLUMNS),
        requests=rekey(metrics).select(metrics.columns),
        transitions=rekey(timeline.transitions).select(timeline.transitions.columns),
        gaps=rekey(gaps).select(KEY, "itl_ns"),
        histogram=None,
        deferred=deferred,
        quarantine=quarantine_of(events, timeline),
        attributes=tuple(attributes),
    )


def empty_gaps() -> pl.DataFrame:
    return pl.DataFrame(schema={KEY: pl.Int64, "itl_ns": pl.Int64})


def partial_of(
    events: pl.DataFrame,
    inputs: Sequence[str],
    warnings: Sequence[str] = (),
    exact_gaps: int = EXACT_GAPS,
    settings: ShardSettings | None = None,
) -> Partial:
    """Analyse one shard of canonical events (every row of each of its requests), read
    and to be reported with ``settings``."""
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
    part = kernel_partial(rest, attributes, facts, False, deferred)
    part = replace(
        part, inputs=tuple(inputs), warnings=tuple(warnings), settings=settings or ShardSettings()
    )
    if part.gaps.height <= exact_gaps:
        return part
    histogram = LogHistogram()
    histogram.add(part.gaps["itl_ns"])
    return replace(part, gaps=empty_gaps(), histogram=histogram)
