"""Analyse a trace larger than memory, batch by batch (``analyze --streaming``).

The Polars streaming engine reads the trace in batches (``collect_batches``). Each batch
is joined to the rows of requests still open from earlier batches; every request whose
terminal event (and, when the trace logs them, its release) has been seen is *finished*
and goes to ``pieces.Pieces``: the in-memory kernel, one row per request kept (spilled
to ``TMPDIR`` every few dozen batches, ``stream_state``), ITL gaps pooled exactly up to
``EXACT_GAPS``, then within ±0.0123 %. Open requests are carried on.

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

import polars as pl

from servetrace.analysis.histogram import EXACT_GAPS
from servetrace.analysis.lifecycle import PLACEABLE
from servetrace.analysis.pieces import Pieces, pieces_of
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.stream_state import FinishedIds, finished_and_unplaced
from servetrace.errors import InputError
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
    batched path would then split the request, so ``dispatch`` partitions the log.
    """
    with pieces_of(trace, options, by, exact_gaps) as pieces:
        return _analyze_streaming(trace, pieces, batch_rows)


class NotTimeOrdered(InputError):
    """A row arrived after its request had finished: the log is not in time order."""


def _analyze_streaming(trace: Trace, pieces: Pieces, batch_rows: int) -> Analysis:
    finished_ids = FinishedIds()  # every request finished so far

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
        done, unplaced_ids = finished_and_unplaced(buffer, pieces.facts.has_releases, frontier)
        finished_ids.add(done)
        is_done = pl.col("request_id").is_in(done.implode())
        finished, carry = buffer.filter(is_done), buffer.filter(~is_done)
        # Whether a request with neither admission nor output was queued depends on the
        # whole trace (lifecycle docstring): keep those few control rows to the end.
        if unplaced_ids.len():
            unplaced = pl.col("request_id").is_in(unplaced_ids.implode())
            deferred.append(finished.filter(unplaced))
            finished = finished.filter(~unplaced)
        if loose.height:
            finished = pl.concat([finished, loose], how="vertical_relaxed")
        pieces.add(finished)
    # In flight at the end, never released, or invalid; and the deferred requests, queued
    # if any valid request of the trace was admitted.
    rest = [*deferred, *([carry] if carry is not None else [])]
    # The last batch's frames (~0.3 GB at 2 M rows) are not held through the summary.
    batch = buffer = finished = loose = stamps = carry = None  # type: ignore[assignment]
    deferred = []
    if rest:
        queued = True if pieces.has_admissions else None
        pieces.add(pl.concat(rest, how="vertical_relaxed"), queued)
    del rest
    return pieces.analysis(trace.inputs)
