"""Analyse a trace larger than memory, batch by batch (``analyze --streaming``).

The Polars streaming engine reads the trace in batches (``collect_batches``). Each batch
is joined to the rows of requests still open from earlier batches; every request whose
terminal event (and, when the trace logs them, its release) has been seen is *finished*
and goes through exactly the same lifecycle and metric code as an in-memory trace. Open
requests are carried on. What is kept between batches is small and mergeable:

- one row per request (exact per-request metrics, invalid requests with their rule) and
  its concurrency transitions, only the columns read after the kernel, spilled to
  ``TMPDIR`` every few dozen batches and read back once for the summary
  (``stream_state``);
- pooled ITL gaps (``histogram.PooledGaps``): exact up to ``EXACT_GAPS`` gaps, so the
  percentiles equal the in-memory ones, then a log histogram within ±0.0123 %.

Memory during the pass therefore follows the batch size and the number of requests open
at once; the summary then holds one row per request (``docs/scale.md``). The trace must
be written in time order (as logs are); rows at equal timestamps may come in any order,
because a request is finished only once the log has moved past the time of its terminal
event (and release). A row with no request id, event or timestamp belongs to no request:
it is quarantined under its row rule with the batch it is read in, as in memory, and
never finishes, reopens or places the request it names. A (placeable) row of a request
that had already finished stops the batched path (``NotTimeOrdered``) with a message
that says which: the log is not sorted by ts, or it is sorted and that request has an
event after its end; ``dispatch`` then analyses the log partitioned by request
(``partitioned``) instead, which also quarantines such a request. The few requests with
neither admission nor output are kept to the end, since whether they were queued depends
on the whole trace (``lifecycle`` docstring).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from servetrace.analysis.fluidity import fluidity_columns
from servetrace.analysis.histogram import (
    EXACT_GAPS,
    GAP_SCHEMA,
    RELATIVE_BOUND,
    GapBudget,
    PooledGaps,
    add_by_group,
)
from servetrace.analysis.known_facts import whole_trace_facts
from servetrace.analysis.lifecycle import (
    KEY,
    PLACEABLE,
    admission_warnings,
    build_timeline,
    has_invalid,
    key_renumbering,
    quarantined_rows,
)
from servetrace.analysis.memory import (
    attribute_columns,
    span_warnings,
    unreadable,
)
from servetrace.analysis.metrics import gap_frame, request_metrics
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.stream_state import (
    FinishedIds,
    KeptRequests,
    finished_and_unplaced,
    spill_directory,
)
from servetrace.analysis.summary import summarize
from servetrace.errors import InputError, UsageError
from servetrace.settings import DEFAULT_BATCH_ROWS
from servetrace.sources.trace import Trace


def _late_row_error(trace: Trace, late: pl.DataFrame, in_time_order: bool) -> NotTimeOrdered:
    """Name the row; say "sort" only when the log is in fact not sorted by ts."""
    where = (
        f"{', '.join(trace.files)}: a row of request {late['request_id'][0]!r} "
        f"({late['event'][0]} at ts {late['ts'][0]}) comes after the request finished"
    )
    if in_time_order:
        return NotTimeOrdered(
            f"{where}: the log is in time order, so this request has an event after its "
            "terminal event, which the batched path cannot reopen",
            hint="use --no-streaming to analyse it in memory (the request is then "
            "quarantined under event_after_terminal or duplicate_terminal)",
        )
    return NotTimeOrdered(
        f"{where}: the log is not in time order",
        hint="batched analysis needs a log in time order; sort it by ts, or use --no-streaming",
    )


def analyze_streaming(
    trace: Trace,
    options: AnalysisOptions | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    by: str | None = None,
    exact_gaps: int = EXACT_GAPS,
) -> Analysis:
    """Analyse ``trace`` batch by batch; ``by`` also keeps one ITL distribution per value.

    ITL percentiles are those of the in-memory engine while the trace has at most
    ``exact_gaps`` gaps (over all ``by`` groups together), and within
    ``histogram.RELATIVE_BOUND`` of them beyond.

    Raises ``NotTimeOrdered`` when a row of an already finished request turns up: the
    batched path would then split the request, so the caller must analyse in memory.
    """
    try:
        with spill_directory() as spill:
            return _analyze_streaming(
                trace, options or AnalysisOptions(), batch_rows, by, exact_gaps, spill
            )
    except pl.exceptions.PolarsError as error:
        raise unreadable(trace, error) from None


class NotTimeOrdered(InputError):
    """A row arrived after its request had finished: the log is not in time order."""


def _analyze_streaming(
    trace: Trace,
    options: AnalysisOptions,
    batch_rows: int,
    by: str | None,
    exact_gaps: int,
    spill: Path,
) -> Analysis:
    # The span and whether the trace logs admissions and releases: from ingest, or one
    # scan of the whole trace (known_facts).
    facts = whole_trace_facts(trace)
    schema = trace.events.collect_schema()
    attributes = attribute_columns(list(schema.names()))

    kept = KeptRequests(grouped=by is not None, spill=spill)
    quarantine: list[pl.DataFrame] = []
    itl = PooledGaps(GapBudget(exact_gaps))
    by_budget = GapBudget(exact_gaps)  # shared by the groups: their sum stays bounded
    itl_by: dict[object, PooledGaps] = {}
    if by is not None and by not in attributes:
        raise UsageError(
            f"--by {by}: no such request column",
            hint="columns: " + ", ".join(attributes) if attributes else "the trace has none",
        )
    finished_ids = FinishedIds()  # every request finished so far

    next_key = 0
    empty_ticks: pl.DataFrame | None = None

    def process(frame: pl.DataFrame, unadmitted_queued: bool | None = None) -> None:
        nonlocal next_key, empty_ticks
        if frame.height == 0:
            return
        timeline = build_timeline(frame, attributes, facts, unadmitted_queued)
        metrics = request_metrics(timeline, attributes)
        if options.fluidity is not None:
            metrics = fluidity_columns(timeline, metrics, options.fluidity)
        gaps = gap_frame(timeline, metrics)
        if by is not None:
            grouped = gaps.join(metrics.select(KEY, by), on=KEY, how="left")
            add_by_group(itl_by, grouped, by, by_budget)
        # Keys are only unique within one batch: renumber them trace-wide before keeping
        # anything.
        rekey = key_renumbering(timeline.requests, next_key)
        next_key += timeline.requests.height
        # While every gap fits the exact budget keep them with their (trace-wide) keys:
        # the result then carries the in-memory gap frame (intervals, --by, the CDF).
        if itl.exact:
            itl.add_frame(rekey(gaps))
        else:
            itl.add(gaps["itl_ns"])

        # The tick frame is the bulk of a batch: drop it once its gaps are counted.
        # Only what is read after the kernel is kept of each request (stream_state); the
        # tick frame, the bulk of a batch, is dropped once its gaps are counted.
        if empty_ticks is None:
            empty_ticks = timeline.ticks.clear()
        kept.add(timeline, metrics, rekey)
        if has_invalid(timeline):
            quarantine.append(quarantined_rows(frame, timeline))

    carry: pl.DataFrame | None = None
    deferred: list[pl.DataFrame] = []
    frontier: int | None = None  # the latest timestamp read so far
    in_time_order = True  # whether every timestamp read so far is >= the one before
    for batch in trace.events.collect_batches(chunk_size=batch_rows):
        # A row with no request id, event or timestamp belongs to no request (a row rule,
        # as in memory): quarantine it with this batch, never let it finish, reopen or
        # place the request it names. The carry never holds such rows.
        loose = batch.filter(~PLACEABLE)
        if loose.height:
            batch = batch.filter(PLACEABLE)
        buffer = batch if carry is None else pl.concat([carry, batch], how="vertical_relaxed")
        stamps = batch["ts"].drop_nulls()
        if stamps.len():
            in_time_order = (
                in_time_order and stamps.is_sorted() and (frontier is None or stamps[0] >= frontier)
            )
            top = stamps.max()
            frontier = int(top) if frontier is None else max(frontier, int(top))  # type: ignore[arg-type]
        late_ids = finished_ids.among(batch["request_id"].unique())
        if late_ids.len():
            late = batch.filter(pl.col("request_id").is_in(late_ids.implode()))
            raise _late_row_error(trace, late, in_time_order)
        done, unplaced_ids = finished_and_unplaced(buffer, facts.has_releases, frontier)
        finished_ids.add(done)
        is_done = pl.col("request_id").is_in(done.implode())
        finished, carry = buffer.filter(is_done), buffer.filter(~is_done)
        # Whether a request with neither admission nor output was queued depends on the
        # whole trace (lifecycle docstring): keep those few control rows to the end.
        if unplaced_ids.len():
            unplaced = pl.col("request_id").is_in(unplaced_ids.implode())
            deferred.append(finished.filter(unplaced))
            finished = finished.filter(~unplaced)
        process(pl.concat([finished, loose], how="vertical_relaxed") if loose.height else finished)
    # In flight at the end, never released, or invalid; and the deferred requests, queued
    # if any valid request of the trace was admitted.
    rest = [*deferred, *([carry] if carry is not None else [])]
    # The last batch's frames (~0.3 GB at 2 M rows) are not held through the summary.
    batch = buffer = finished = loose = stamps = carry = None  # type: ignore[assignment]
    deferred = []
    if rest:
        queued = True if kept.has_admissions else None
        process(pl.concat(rest, how="vertical_relaxed"), queued)
    del rest

    if not len(kept) or empty_ticks is None:
        raise InputError(
            f"{', '.join(trace.inputs)}: the trace has no event rows",
            hint="a trace needs at least one row: request_id, event, ts",
        )
    timeline = kept.timeline(facts, empty_ticks)
    merged = kept.requests()
    exact = itl.frame(GAP_SCHEMA)
    summary = summarize(
        timeline,
        merged,
        exact if exact is not None else itl.describe(),
        targets=options.goodput,
        formula_tolerance=(options.formula_abs_tol_ns, options.formula_rel_tol),
        warnings=[
            *span_warnings(timeline),
            *admission_warnings(timeline),
            *_histogram_warning(itl, itl_by.values()),
        ],
    )
    rows_out = (
        pl.concat(quarantine, how="diagonal_relaxed")
        if quarantine
        else pl.DataFrame(schema={**schema, "rule": pl.String})
    )
    return Analysis(
        inputs=trace.inputs,
        timeline=timeline,
        per_request=merged,
        gaps=exact if exact is not None else pl.DataFrame(schema=GAP_SCHEMA),
        summary=summary,
        quarantine_rows=rows_out,
        attributes=tuple(attributes),
        itl_by=(by, {value: h.describe() for value, h in itl_by.items()}) if by else None,
    )


def _histogram_warning(itl: PooledGaps, groups: Iterable[PooledGaps]) -> list[str]:
    """Say so when some ITL percentiles are not exact, with their proven bound."""
    if itl.exact and all(group.exact for group in groups):
        return []
    return [
        f"streamed: more ITL gaps than the {itl.budget.limit:,} kept exactly, so ITL "
        f"percentiles come from a log histogram (within ±{RELATIVE_BOUND:.4%})"
    ]
