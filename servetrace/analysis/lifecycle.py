"""The per-request timeline: one row per request, its rule, outcome and steps (design §3).

Data flows: canonical events → row quarantine → request key → *ticks* and *control*
events → state machine (``lifecycle_rules``, with each request's side decided by
``lifecycle_side``) → one row per request, the sorted ticks and the state transitions.

The trace is split once into *ticks* (``first_token``/``token`` rows, the bulk of any log)
and *control* events (everything else, a handful per request). Ticks are put in request
and time order (``tick_order``: one packed sort, else a group-by of the rows as written)
and reduced per request; the state machine runs over the small control frame plus one
synthetic row per request for its first tick.

**Nothing depends on row order.** Events of a request are taken in time order, at equal
timestamps in lifecycle order (``schema.EVENT_KINDS``). Request attributes (every
non-canonical column, and ``prompt_tokens``) come from a defined row: the first non-null
value in the order arrival, admission, preemption, completion, cancellation, release,
earliest first within a kind (for a valid request each (kind, time) occurs at most once,
so this order is total). ``output_tokens`` comes from the terminal row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from servetrace.analysis.lifecycle_rules import (
    KEY,
    prev_state_at_cancel,
    rule_column,
    sequence,
    tokens_while_queued,
    transitions,
)
from servetrace.analysis.lifecycle_side import decide, mixed_admission_warnings, server_side
from servetrace.analysis.tick_order import tick_frame
from servetrace.dtypes import EVENT_DTYPE
from servetrace.schema import TERMINAL_EVENTS, TICK_EVENTS

# Every timestamp a timeline row carries: the latest is the request's last event.
EVENT_TIMES = (
    "arrival_ns",
    "admission_ns",
    "terminal_ns",
    "last_control_ns",
    "release_ns",
    "first_tick_ns",
    "last_tick_ns",
)


@dataclass(frozen=True)
class Timeline:
    """The lifecycle of every request, valid or not.

    ``requests``: one row per request (key, request_id, rule, outcome, timestamps of each
    lifecycle step, counts, attributes). ``ticks``: every output tick sorted by request
    and time, with the gap to the previous tick of the same request. ``transitions``:
    state changes of valid requests as queued/running/in-system deltas, for concurrency.
    ``row_quarantine``: input rows that cannot belong to any request.
    """

    requests: pl.DataFrame
    ticks: pl.DataFrame
    transitions: pl.DataFrame
    row_quarantine: pl.DataFrame
    trace_start_ns: int | None
    trace_end_ns: int | None
    has_admissions: bool
    has_releases: bool


def with_request_key(events: pl.DataFrame) -> pl.DataFrame:
    """Add an integer ``_key`` per request: integer ids as they are, strings by code.

    Codes of string ids are only meaningful within one call: never join keys computed
    by two calls (Polars may renumber categories once an earlier cast is freed).
    """
    rid = pl.col("request_id")
    if events.schema["request_id"].is_integer():
        key = rid.cast(pl.Int64)
    else:
        key = rid.cast(pl.Categorical).to_physical().cast(pl.Int64)
    return events.with_columns(key.alias(KEY))


def key_renumbering(
    requests: pl.DataFrame, first: int = 0
) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """A function giving a frame of this call's keys the keys ``first``, ``first + 1``, …
    in the order of ``requests``: keys are unique within one call only (string ids' keys
    are category codes), so an engine that runs the kernel per batch, partition or shard
    renumbers them before it keeps anything."""
    renumber = requests.select(KEY, (pl.int_range(pl.len(), dtype=pl.Int64) + first).alias("_new"))

    def rekey(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.join(renumber, on=KEY, how="left").drop(KEY).rename({"_new": KEY})

    return rekey


# Rows that can be placed in a request's story: the rest are row-quarantined (below).
PLACEABLE = (
    pl.col("request_id").is_not_null() & pl.col("event").is_not_null() & pl.col("ts").is_not_null()
)


def split_row_quarantine(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows without request id, event or timestamp cannot be placed: quarantine them."""
    rule = (
        pl.when(pl.col("request_id").is_null())
        .then(pl.lit("missing_request_id"))
        .when(pl.col("event").is_null())
        .then(pl.lit("missing_event"))
        .when(pl.col("ts").is_null())
        .then(pl.lit("missing_timestamp"))
    )
    null_any = ~PLACEABLE
    if not events.select(null_any.any()).item():
        return events, events.clear().with_columns(pl.lit(None, pl.String).alias("rule"))
    bad = events.filter(null_any).with_columns(rule.alias("rule"))
    return events.filter(~null_any), bad


def sorted_ticks(events: pl.DataFrame) -> pl.DataFrame:
    """``Timeline.ticks`` of ``events`` (placeable rows with ``_key``), for a caller that
    no longer has the timeline's own (they are freed after the analysis)."""
    return tick_frame(events)[0]


def _control_frame(others: pl.DataFrame, tick_aggs: pl.DataFrame) -> pl.DataFrame:
    """Non-tick events plus one synthetic ``first_token`` row per request, in order."""
    control = others.select(KEY, "event", "ts", pl.lit(False).alias("synthetic"))
    first_ticks = tick_aggs.select(
        KEY,
        pl.lit("first_token", EVENT_DTYPE).alias("event"),
        pl.col("first_tick_ns").alias("ts"),
        pl.lit(True).alias("synthetic"),
    )
    return pl.concat([control, first_ticks]).sort(KEY, "ts", "event")


def _control_aggregates(
    others: pl.DataFrame, seq: pl.DataFrame, attributes: list[str]
) -> pl.DataFrame:
    e, ts = pl.col("event"), pl.col("ts")
    per_seq = seq.group_by(KEY).agg(
        (e == "arrival").sum().alias("n_arrival"),
        ts.filter(e == "arrival").min().alias("arrival_ns"),
        (e == "admission").sum().alias("n_admission"),
        ts.filter(e == "admission").min().alias("admission_ns"),
        (e == "preemption").sum().alias("preemptions"),
        pl.col("requeued_part_ns").sum().alias("requeued_ns"),
        e.is_in(TERMINAL_EVENTS).sum().alias("n_terminal"),
        ts.filter(e.is_in(TERMINAL_EVENTS)).min().alias("terminal_ns"),
        ts.filter(~e.is_in([*TERMINAL_EVENTS, "release"])).max().alias("last_control_ns"),
        ts.filter(e == "release").min().alias("release_ns"),
        e.filter(e.is_in(TERMINAL_EVENTS)).first().alias("terminal_event"),
        prev_state_at_cancel(),
        (e == "release").sum().alias("n_release"),
        # rows of the request that are not ticks (the synthetic first-tick row excluded)
        (pl.len() - pl.col("synthetic").sum()).cast(pl.Int64).alias("n_control"),
        *[pl.col(c).any().alias(c) for c in seq.columns if c.startswith("hit_")],
    )
    carried = [c for c in ("prompt_tokens", "output_tokens") if c in others.columns]
    if not carried and not attributes:
        return per_seq.with_columns(pl.lit(None, pl.Int64).alias("min_count"))
    # Request attributes: the first non-null value in lifecycle order of the kinds, then
    # time (module docstring), so neither row order nor the engine can change a --by
    # group. Sorting is cheap here: only the few control rows per request. output_tokens
    # is authoritative on the terminal row (a client that cancelled may still report the
    # tokens it received).
    ordered = others.sort(KEY, "event", "ts")
    aggs = [pl.col(c).drop_nulls().first().alias(c) for c in attributes]
    aggs.append(
        pl.min_horizontal(pl.col(c).min() for c in carried).alias("min_count")
        if carried
        else pl.lit(None, pl.Int64).alias("min_count")
    )
    if "prompt_tokens" in carried:
        aggs.append(pl.col("prompt_tokens").drop_nulls().first())
    if "output_tokens" in carried:
        aggs.append(
            pl.col("output_tokens")
            .filter(e.is_in(TERMINAL_EVENTS))
            .drop_nulls()
            .first()
            .alias("reported_output_tokens")
        )
    return per_seq.join(ordered.group_by(KEY, maintain_order=True).agg(aggs), on=KEY, how="left")


@dataclass(frozen=True)
class TraceFacts:
    """Facts about the whole trace that a part of it cannot know (streaming batches)."""

    has_admissions: bool
    has_releases: bool
    start_ns: int | None
    end_ns: int | None


def trace_facts(events: pl.DataFrame | pl.LazyFrame) -> TraceFacts:
    """One pass over event kinds and timestamps."""
    query = (
        events.lazy()
        .filter(PLACEABLE)
        .select(
            (pl.col("event") == "admission").any().alias("adm"),
            (pl.col("event") == "release").any().alias("rel"),
            pl.col("ts").min().alias("lo"),
            pl.col("ts").max().alias("hi"),
        )
    )
    adm, rel, lo, hi = query.collect().row(0)
    return TraceFacts(bool(adm), bool(rel), lo, hi)


def build_timeline(
    events: pl.DataFrame,
    attributes: list[str],
    facts: TraceFacts | None = None,
    unadmitted_queued: bool | None = None,
) -> Timeline:
    """Apply the lifecycle rules to canonical events; one row per request.

    ``unadmitted_queued``: whether a request with neither admission nor output (see
    ``lifecycle_side``) waits in the queue; ``None`` decides it from the valid requests of
    ``events``. The streaming engine passes it when a batch alone cannot know.
    """
    events, row_quarantine = split_row_quarantine(events)
    events = with_request_key(events)
    facts = facts or trace_facts(events)
    has_releases = facts.has_releases
    trace_start, trace_end = facts.start_ns, facts.end_ns

    ticks, tick_aggs = tick_frame(events)
    others = events.filter(~pl.col("event").is_in(TICK_EVENTS))
    control = _control_frame(others, tick_aggs)

    def run(queued: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
        parts = (events, ticks, tick_aggs, others, control, attributes, trace_end or 0)
        return _requests(*parts, queued)

    requests, seq = decide(run, others, unadmitted_queued)
    valid = requests.filter(pl.col("rule").is_null())
    return Timeline(
        requests=requests,
        ticks=ticks,
        transitions=transitions(seq, valid.select(KEY)),
        row_quarantine=row_quarantine,
        trace_start_ns=trace_start,
        trace_end_ns=trace_end,
        has_admissions=bool((valid["n_admission"] > 0).any()),
        has_releases=has_releases,
    )


def _requests(
    events: pl.DataFrame,
    ticks: pl.DataFrame,
    tick_aggs: pl.DataFrame,
    others: pl.DataFrame,
    control: pl.DataFrame,
    attributes: list[str],
    trace_end: int,
    unadmitted_queued: bool,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per request with its rule and outcome, and the control sequence."""
    seq = sequence(control, trace_end, server_side(unadmitted_queued))
    queued_tokens = tokens_while_queued(ticks, control, tick_aggs)
    control_aggs = _control_aggregates(others, seq, attributes).with_columns(
        pl.col(KEY).is_in(queued_tokens[KEY].implode()).alias("hit_token_while_queued")
    )
    # The control sequence holds every request (each tick-only request has its synthetic
    # first-tick row), so ids and row counts need no pass over every event.
    requests = (
        control_aggs.join(tick_aggs, on=KEY, how="left")
        .join(_request_ids(events, others, control_aggs), on=KEY, how="left")
        .with_columns(
            (pl.col("n_control").fill_null(0) + pl.col("ticks").fill_null(0)).alias("rows")
        )
        .with_columns(rule_column())
        .with_columns(
            pl.when(pl.col("terminal_event") == "completion")
            .then(pl.lit("completed"))
            .when(pl.col("terminal_event") == "cancellation")
            .then(pl.lit("cancelled"))
            .when(pl.col("terminal_event") == "error")
            .then(pl.lit("errored"))
            .otherwise(pl.lit("in_flight"))
            .alias("outcome"),
        )
        .sort(KEY)
    )
    return requests, seq


def admission_warnings(timeline: Timeline) -> list[str]:
    """Say so when valid requests of both kinds (admitted or not) share a trace."""
    return mixed_admission_warnings(timeline.requests, timeline.has_admissions)


def _request_ids(
    events: pl.DataFrame, others: pl.DataFrame, control_aggs: pl.DataFrame
) -> pl.DataFrame:
    """``request_id`` of every key, read from the few control rows where possible."""
    ids = others.group_by(KEY).agg(pl.col("request_id").first())
    tick_only = control_aggs.filter(pl.col("n_control") == 0).select(KEY)
    if tick_only.height == 0:
        return ids
    rest = (
        events.join(tick_only, on=KEY, how="semi").group_by(KEY).agg(pl.col("request_id").first())
    )
    return pl.concat([ids, rest])


def has_invalid(timeline: Timeline) -> bool:
    """Whether any row or request of the trace was quarantined."""
    return timeline.row_quarantine.height > 0 or timeline.requests["rule"].null_count() < (
        timeline.requests.height
    )


def quarantine_of(events: pl.DataFrame, timeline: Timeline) -> pl.DataFrame:
    """``quarantined_rows``, or (the usual case) the empty frame of its schema without
    the join that would find nothing."""
    if has_invalid(timeline):
        return quarantined_rows(events, timeline)
    return events.clear().with_columns(pl.lit(None, pl.String).alias("rule"))


def quarantined_rows(events: pl.DataFrame, timeline: Timeline) -> pl.DataFrame:
    """Every input row of an invalid request, plus unplaceable rows, with its rule.

    Joined on ``request_id``, not ``_key``: string keys are category codes, which Polars
    may assign differently once the categories of an earlier cast have been freed.
    """
    bad = timeline.requests.filter(pl.col("rule").is_not_null()).select("request_id", "rule")
    placeable, _ = split_row_quarantine(events)
    rows = placeable.join(bad, on="request_id", how="inner")
    return pl.concat([timeline.row_quarantine, rows], how="diagonal_relaxed")
