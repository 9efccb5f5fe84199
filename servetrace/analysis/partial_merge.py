"""Merging partials, and the report of a merged one (``partial`` docstring, steps 2–3).

``combine`` is associative (any tree of merges gives the same partial's report) and
refuses what cannot be merged: shards that share a request, or that were made with
different analysis settings (``partial_settings``). ``finish`` runs the deferred
requests through the kernel once the whole trace is known, then summarizes once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from servetrace.analysis.histogram import EXACT_GAPS, RELATIVE_BOUND, LogHistogram
from servetrace.analysis.lifecycle import KEY, Timeline, TraceFacts
from servetrace.analysis.lifecycle_rules import ROW_RULES
from servetrace.analysis.memory import summary_of
from servetrace.analysis.partial import Partial, empty_gaps, kernel_partial
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.dtypes import EVENT_DTYPE
from servetrace.errors import InputError, UsageError

EXAMPLE_IDS = 5


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
    where = " and ".join(_named(partials[p]) for p in first["_p"])
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
    _same_settings(partials)
    partials = _unify_ids(partials)
    _overlap(partials)
    return _append(partials, exact_gaps)


def _named(part: Partial) -> str:
    return part.inputs[0] if part.inputs else "?"


def _same_settings(partials: Sequence[Partial]) -> None:
    """Refuse partials made with different settings: no one report holds both."""
    first = partials[0]
    for part in partials[1:]:
        found = first.settings.differing(part.settings)
        if found is None:
            continue
        flag, mine, theirs = found
        raise InputError(
            f"{_named(first)} and {_named(part)} were analysed with different {flag} "
            f"({mine} and {theirs}): merged, one setting would silently stand for the other",
            hint=f"make every partial with the same {flag}",
        )


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
        pooled = empty_gaps()
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
        settings=partials[0].settings,
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
    resolved = kernel_partial(events, attributes, facts, True if admitted else None, events.clear())
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
    """The analysis of the whole trace the (combined) partial stands for, with the
    settings it was made with where ``options`` sets none of its own."""
    options = part.settings.applied(options or AnalysisOptions())
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
    summary = summary_of(timeline, requests, gaps, options, histogram_warning(part))
    return Analysis(
        inputs=part.inputs,
        timeline=timeline,
        per_request=requests,
        gaps=part.gaps,
        summary=summary,
        quarantine_rows=part.quarantine,
        attributes=part.attributes,
    )
