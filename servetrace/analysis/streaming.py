"""Analyse a trace larger than memory, batch by batch (``analyze --streaming``).

The Polars streaming engine reads the trace in batches (``collect_batches``). Each batch
is joined to the rows of requests still open from earlier batches; every request whose
terminal event (and, when the trace logs them, its release) has been seen is *finished*
and goes through exactly the same lifecycle and metric code as an in-memory trace. Open
requests are carried on. What is kept between batches is small and mergeable:

- one row per request (exact per-request metrics, invalid requests with their rule);
- concurrency transitions (a few per request);
- pooled ITL gaps (``histogram.PooledGaps``): exact up to ``EXACT_GAPS`` gaps, so the
  percentiles equal the in-memory ones, then a log histogram within ±0.0123 %.

Peak memory therefore grows with the batch size and the number of requests open at once,
not with the length of the trace. The trace must be written roughly in time order (as
logs are); a request's events that arrive after it finished show up as a separate
fragment under ``missing_arrival`` — the rows are still accounted for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import polars as pl

from servetrace.analysis.fluidity import fluidity_columns
from servetrace.analysis.histogram import EXACT_GAPS, RELATIVE_BOUND, GapBudget, PooledGaps
from servetrace.analysis.lifecycle import (
    KEY,
    Timeline,
    TraceFacts,
    build_timeline,
    has_invalid,
    quarantined_rows,
    trace_facts,
)
from servetrace.analysis.memory import (
    Analysis,
    AnalysisOptions,
    attribute_columns,
    span_warnings,
    unreadable,
)
from servetrace.analysis.metrics import gap_frame, request_metrics
from servetrace.analysis.summary import summarize
from servetrace.errors import InputError, UsageError
from servetrace.schema import TERMINAL_EVENTS
from servetrace.sources.canonical import Trace

DEFAULT_BATCH_ROWS = 2_000_000


def _finished(buffer: pl.DataFrame, needs_release: bool) -> pl.Series:
    """Request ids whose story is complete within ``buffer``."""
    done = pl.col("event").is_in(TERMINAL_EVENTS).any()
    if needs_release:
        done = done & (pl.col("event") == "release").any()
    status = buffer.group_by("request_id").agg(done.alias("done"))
    return status.filter(pl.col("done"))["request_id"]


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
        return _analyze_streaming(trace, options or AnalysisOptions(), batch_rows, by, exact_gaps)
    except pl.exceptions.PolarsError as error:
        raise unreadable(trace, error) from None


class NotTimeOrdered(InputError):
    """A row arrived after its request had finished: the log is not in time order."""


def _analyze_streaming(
    trace: Trace, options: AnalysisOptions, batch_rows: int, by: str | None, exact_gaps: int
) -> Analysis:
    facts = trace_facts(trace.events)
    schema = trace.events.collect_schema()
    attributes = attribute_columns(list(schema.names()))

    parts: list[Timeline] = []
    requests: list[pl.DataFrame] = []
    quarantine: list[pl.DataFrame] = []
    itl = PooledGaps(GapBudget(exact_gaps))
    by_budget = GapBudget(exact_gaps)  # shared by the groups: their sum stays bounded
    itl_by: dict[object, PooledGaps] = {}
    if by is not None and by not in attributes:
        raise UsageError(
            f"--by {by}: no such request column",
            hint="columns: " + ", ".join(attributes) if attributes else "the trace has none",
        )
    finished_ids: pl.Series | None = None  # every request finished so far

    next_key = 0

    def process(frame: pl.DataFrame) -> None:
        nonlocal next_key
        if frame.height == 0:
            return
        timeline = build_timeline(frame, attributes, facts)
        metrics = request_metrics(timeline, attributes)
        if options.fluidity is not None:
            metrics = fluidity_columns(timeline, metrics, options.fluidity)
        gaps = gap_frame(timeline, metrics)
        itl.add(gaps["itl_ns"])
        if by is not None:
            grouped = gaps.join(metrics.select(KEY, by), on=KEY, how="left")
            for (value,), group in grouped.group_by(by):
                itl_by.setdefault(value, PooledGaps(by_budget)).add(group["itl_ns"])
        # Keys are only unique within one batch (string ids are category codes): renumber
        # them trace-wide before keeping anything.
        renumber = timeline.requests.select(
            KEY, (pl.int_range(pl.len(), dtype=pl.Int64) + next_key).alias("_new")
        )
        next_key += renumber.height

        def rekey(part: pl.DataFrame) -> pl.DataFrame:
            return part.join(renumber, on=KEY, how="left").drop(KEY).rename({"_new": KEY})

        # The tick frame is the bulk of a batch: drop it once its gaps are counted.
        parts.append(
            replace(
                timeline,
                requests=rekey(timeline.requests),
                transitions=rekey(timeline.transitions),
                ticks=timeline.ticks.clear(),
            )
        )
        requests.append(rekey(metrics))
        if has_invalid(timeline):
            quarantine.append(quarantined_rows(frame, timeline))

    carry: pl.DataFrame | None = None
    for batch in trace.events.collect_batches(chunk_size=batch_rows):
        buffer = batch if carry is None else pl.concat([carry, batch], how="vertical_relaxed")
        unplaceable = buffer["request_id"].is_null()
        if finished_ids is not None:
            late = batch.filter(pl.col("request_id").is_in(finished_ids.implode()))
            if late.height:
                raise NotTimeOrdered(
                    f"{', '.join(trace.files)}: a row of request {late['request_id'][0]!r} "
                    f"({late['event'][0]}) comes after the request finished",
                    hint="batched analysis needs a log in time order; sort it by ts, or "
                    "use --no-streaming",
                )
        done = _finished(buffer, facts.has_releases)
        finished_ids = done if finished_ids is None else finished_ids.append(done)
        finished = buffer.filter(pl.col("request_id").is_in(done.implode()) | unplaceable)
        carry = buffer.filter(~pl.col("request_id").is_in(done.implode()) & ~unplaceable)
        process(finished)
    if carry is not None:
        process(carry)  # in flight at the end, never released, or invalid

    if not parts:
        raise InputError(
            f"{', '.join(trace.inputs)}: the trace has no event rows",
            hint="a trace needs at least one row: request_id, event, ts",
        )
    timeline = _merge(parts, facts)
    merged = pl.concat(requests, how="diagonal_relaxed").sort(
        "arrival_ns", "request_id", nulls_last=True
    )
    summary = summarize(
        timeline,
        merged,
        itl.describe(),
        targets=options.goodput,
        formula_tolerance=(options.formula_abs_tol_ns, options.formula_rel_tol),
        warnings=[*span_warnings(timeline), *_histogram_warning(itl, itl_by.values())],
    )
    rows_out = (
        pl.concat(quarantine, how="diagonal_relaxed")
        if quarantine
        else pl.DataFrame(schema={**schema, "rule": pl.String})
    )
    return Analysis(
        inputs=trace.inputs,
        timeline=timeline,
        requests=merged,
        gaps=pl.DataFrame(schema={KEY: pl.Int64, "itl_ns": pl.Int64}),
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


def _merge(parts: list[Timeline], facts: TraceFacts) -> Timeline:
    first = parts[0]
    return Timeline(
        requests=pl.concat([p.requests for p in parts], how="diagonal_relaxed"),
        ticks=first.ticks,
        transitions=pl.concat([p.transitions for p in parts]),
        row_quarantine=pl.concat([p.row_quarantine for p in parts], how="diagonal_relaxed"),
        trace_start_ns=facts.start_ns,
        trace_end_ns=facts.end_ns,
        has_admissions=facts.has_admissions,
        has_releases=facts.has_releases,
    )
