"""The request state machine: named rules, quarantine and the per-request timeline (DESIGN §3).

```
arrival → QUEUED → admission → RUNNING → first_token → DECODING → completion
            ↑                     │                        │
            └──── preemption ─────┴────────────────────────┘
any non-terminal state → cancellation or error;   terminal → release (optional)
```

The trace is split once into *ticks* (``first_token``/``token`` rows, the bulk of any log)
and *control* events (everything else, a handful per request). Ticks are sorted by
request and time and reduced with one ``group_by``; the state machine runs row by row
(as shifted columns, never a Python loop) over the small control frame plus one
synthetic row per request for its first tick. Each invalid request gets exactly one rule:
the first violated one in ``RULES`` order.

**Server-side or client-side is decided per request, from its own events.** A request
with at least one ``admission`` row is server-side: arrival puts it in QUEUED and it needs
an admission before its first token. A request without any is client-side (a load
client cannot see admission): arrival leads straight to RUNNING, and its queue wait and
prefill are unavailable (null), never zero. So one stray admission row invalidates only
the request it belongs to, a trace may mix both kinds (a server log joined with client
logs), and the result never depends on which other requests happen to be in the same
file or streamed batch. A request with neither an admission nor any output (cancelled, or
still in flight, before anything happened to it) cannot tell: it is taken as queued when
the trace has a *valid* admitted request (a server log: it was waiting, and its queue
wait runs to its cancellation) and as client-side otherwise, so a stray admission in a
client log does not turn its early cancellations into "queued". Trace-wide,
``Timeline.has_admissions`` says whether any valid request was admitted (queued
concurrency is reported only then); when it is, ``admission_warnings`` counts the valid
requests with output but no admission, since in a server log that is a lost row rather
than a client.

**Nothing depends on row order.** Events of a request are taken in time order, at equal
timestamps in lifecycle order (``schema.EVENT_KINDS``). Request attributes (every
non-canonical column, and ``prompt_tokens``) come from a defined row: the first non-null
value in the order arrival, admission, preemption, completion, cancellation, release,
earliest first within a kind (for a valid request each (kind, time) occurs at most once,
so this order is total). ``output_tokens`` comes from the terminal row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from servetrace.schema import EVENT_DTYPE, TERMINAL_EVENTS, TICK_EVENTS

# Rule name -> what it means. Order is priority: a request breaking several rules is
# reported under the first one.
RULES: dict[str, str] = {
    "missing_request_id": "row has no request_id",
    "missing_event": "row has no event kind",
    "missing_timestamp": "row has no timestamp",
    "invalid_token_count": "tokens < 1 on a first_token/token row, or a negative "
    "prompt_tokens/output_tokens",
    "missing_arrival": "request has no arrival event",
    "duplicate_arrival": "request has more than one arrival event",
    "event_before_arrival": "an event precedes the request's arrival",
    "duplicate_first_token": "request has more than one first_token event",
    "token_before_first_token": "a token event precedes the first_token event",
    "duplicate_terminal": "request has more than one completion/cancellation/error",
    "event_after_terminal": "an event other than release follows completion/cancellation/error",
    "token_before_admission": "first token before the request was admitted",
    "admission_while_not_queued": "admission while the request was not queued",
    "preemption_while_not_running": "preemption while the request was not running",
    "token_while_queued": "a token was emitted while the request was queued (preempted)",
    "completion_without_tokens": "completion with no output token",
    "release_before_terminal": "release before completion/cancellation/error",
    "duplicate_release": "request has more than one release event",
}
ROW_RULES = ("missing_request_id", "missing_event", "missing_timestamp")

# Numeric states, so the state machine is integer arithmetic on columns.
QUEUED, RUNNING, DECODING, TERMINATED, RELEASED = 1, 2, 3, 4, 5

KEY = "_key"


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
    null_any = pl.col("request_id").is_null() | pl.col("event").is_null() | pl.col("ts").is_null()
    if not events.select(null_any.any()).item():
        return events, events.clear().with_columns(pl.lit(None, pl.String).alias("rule"))
    bad = events.filter(null_any).with_columns(rule.alias("rule"))
    return events.filter(~null_any), bad


def _tick_frame(events: pl.DataFrame) -> pl.DataFrame:
    """Output ticks sorted by request, time and lifecycle order, with the gap before each."""
    tokens = pl.col("tokens") if "tokens" in events.columns else pl.lit(1, pl.Int64)
    # Narrow first, then filter: the ticks are most of the trace, so every column not
    # selected is a large copy saved.
    ticks = (
        events.select(
            KEY,
            "ts",
            tokens.fill_null(1).cast(pl.Int64).alias("tokens"),
            (pl.col("event") == "first_token").alias("is_first"),
            pl.col("event").is_in(TICK_EVENTS).alias("_tick"),
        )
        .filter("_tick")
        .drop("_tick")
    )
    same_request = pl.col(KEY) == pl.col(KEY).shift(1)
    if ticks["ts"].is_sorted():
        # Logs are written in time order: a stable sort by request alone then leaves each
        # request's ticks in time order, at half the cost of a sort on (request, time).
        by_request = ticks.sort(KEY, maintain_order=True)
        # ...unless a first_token shares its timestamp with an earlier-written token.
        misordered = (
            pl.col("is_first") & same_request & (pl.col("ts") == pl.col("ts").shift(1))
        ).any()
        if not by_request.select(misordered).item():
            ticks = by_request
        else:
            ticks = ticks.sort(KEY, "ts", "is_first", descending=[False, False, True])
    else:
        ticks = ticks.sort(KEY, "ts", "is_first", descending=[False, False, True])
    return ticks.with_columns(
        pl.when(same_request).then(pl.col("ts").diff()).alias("gap_ns"),
    )


def _tick_aggregates(ticks: pl.DataFrame) -> pl.DataFrame:
    return ticks.group_by(KEY, maintain_order=True).agg(
        pl.len().alias("ticks"),
        pl.col("tokens").sum().alias("tokens_sum"),
        pl.col("tokens").min().alias("min_chunk_tokens"),
        pl.col("ts").first().alias("first_tick_ns"),
        pl.col("ts").last().alias("last_tick_ns"),
        pl.col("gap_ns").max().alias("itl_max_ns"),
        pl.col("is_first").sum().alias("n_first"),
        pl.col("is_first").first().alias("first_is_first"),
    )


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


def _state_after(event: pl.Expr, admitted: pl.Expr) -> pl.Expr:
    # A client-side request has no admission event: arrival leads straight to running.
    return (
        pl.when(event == "arrival")
        .then(pl.when(admitted).then(QUEUED).otherwise(RUNNING))
        .when(event == "admission")
        .then(RUNNING)
        .when(event == "first_token")
        .then(DECODING)
        .when(event == "preemption")
        .then(QUEUED)
        .when(event.is_in(TERMINAL_EVENTS))
        .then(TERMINATED)
        .otherwise(RELEASED)
    )


def _sequence(control: pl.DataFrame, trace_end: int, unadmitted_queued: bool) -> pl.DataFrame:
    """Row-wise state machine over the control events: state before/after, rule hits."""
    same = pl.col(KEY) == pl.col(KEY).shift(1)
    same_next = pl.col(KEY) == pl.col(KEY).shift(-1)
    # Per request, from its own rows (module docstring): an admission makes it server-side,
    # an output without one client-side; with neither, the trace decides.
    admitted = (pl.col("event") == "admission").any().over(KEY)
    if unadmitted_queued:
        admitted = admitted | ~pl.col("synthetic").any().over(KEY)
    seq = control.with_columns(
        _state_after(pl.col("event"), admitted).alias("state"),
    ).with_columns(
        pl.when(same).then(pl.col("state").shift(1)).otherwise(0).alias("prev_state"),
        pl.when(same_next).then(pl.col("ts").shift(-1)).alias("next_ts"),
    )
    e, prev = pl.col("event"), pl.col("prev_state")
    running = prev.is_in([RUNNING, DECODING])
    return seq.with_columns(
        ((e == "arrival") & (prev != 0)).alias("hit_event_before_arrival"),
        ((e == "admission") & (prev != QUEUED) & (prev < TERMINATED)).alias(
            "hit_admission_while_not_queued"
        ),
        ((e == "first_token") & (prev == QUEUED)).alias("hit_token_before_admission"),
        ((e == "preemption") & ~running & (prev < TERMINATED)).alias(
            "hit_preemption_while_not_running"
        ),
        # Time queued after each preemption: until the next event (re-admission or a
        # cancellation), or the end of the trace for a request still waiting.
        pl.when(e == "preemption")
        .then(pl.col("next_ts").fill_null(trace_end) - pl.col("ts"))
        .alias("requeued_part_ns"),
    )


def _tokens_while_queued(ticks: pl.DataFrame, control: pl.DataFrame) -> pl.DataFrame:
    """Keys of requests with a tick between a preemption and the next admission."""
    preempted = control.filter(pl.col("event") == "preemption").select(KEY).unique()
    if preempted.height == 0:
        return preempted
    # Lifecycle order at equal timestamps: admission < token < preemption. So a token at t
    # is after an admission at t and before a preemption at t: a preemption takes effect
    # just after its timestamp (t + 1 ns) for this test.
    is_preemption = pl.col("event") == "preemption"
    gates = (
        control.filter(pl.col("event").is_in(["admission", "preemption"]))
        .join(preempted, on=KEY, how="semi")
        .select(
            KEY,
            (pl.col("ts") + is_preemption.cast(pl.Int64)).alias("ts"),
            pl.col("ts").alias("_order"),
            is_preemption.alias("queued"),
        )
        .sort(KEY, "ts", "_order")
    )
    later_ticks = ticks.join(preempted, on=KEY, how="semi").select(KEY, "ts").sort(KEY, "ts")
    hits = later_ticks.join_asof(
        gates,
        on="ts",
        by=KEY,
        strategy="backward",
        allow_exact_matches=True,
        check_sortedness=False,
    )
    return hits.filter(pl.col("queued").fill_null(False)).select(KEY).unique()


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


def prev_state_at_cancel() -> pl.Expr:
    return (
        pl.col("prev_state").filter(pl.col("event") == "cancellation").first().alias("cancel_state")
    )


def _rule_column() -> pl.Expr:
    terminal = pl.col("terminal_ns")
    checks: dict[str, pl.Expr] = {
        "invalid_token_count": (pl.col("min_chunk_tokens") < 1) | (pl.col("min_count") < 0),
        "missing_arrival": pl.col("n_arrival").fill_null(0) == 0,
        "duplicate_arrival": pl.col("n_arrival") > 1,
        "event_before_arrival": pl.col("hit_event_before_arrival"),
        "duplicate_first_token": pl.col("n_first") > 1,
        "token_before_first_token": (pl.col("n_first") >= 1) & ~pl.col("first_is_first"),
        "duplicate_terminal": pl.col("n_terminal") > 1,
        # At equal timestamps every kind but release precedes the terminal event.
        "event_after_terminal": (pl.col("last_control_ns") > terminal)
        | (pl.col("last_tick_ns") > terminal),
        "admission_while_not_queued": pl.col("hit_admission_while_not_queued"),
        "token_before_admission": pl.col("hit_token_before_admission"),
        "preemption_while_not_running": pl.col("hit_preemption_while_not_running"),
        "token_while_queued": pl.col("hit_token_while_queued"),
        "completion_without_tokens": (pl.col("terminal_event") == "completion")
        & (pl.col("ticks").fill_null(0) == 0),
        "release_before_terminal": pl.col("release_ns").is_not_null()
        & (terminal.is_null() | (pl.col("release_ns") < terminal)),
        "duplicate_release": pl.col("n_release") > 1,
    }
    assert set(checks) == set(RULES) - set(ROW_RULES)
    expr: pl.Expr | None = None
    for name in reversed([r for r in RULES if r in checks]):
        cond = checks[name].fill_null(False)
        expr = (
            pl.when(cond)
            .then(pl.lit(name))
            .otherwise(expr if expr is not None else pl.lit(None, pl.String))
        )
    assert expr is not None
    return expr.alias("rule")


@dataclass(frozen=True)
class TraceFacts:
    """Facts about the whole trace that a part of it cannot know (streaming batches)."""

    has_admissions: bool
    has_releases: bool
    start_ns: int | None
    end_ns: int | None


def trace_facts(events: pl.DataFrame | pl.LazyFrame) -> TraceFacts:
    """One pass over event kinds and timestamps."""
    placeable = (
        pl.col("request_id").is_not_null()
        & pl.col("event").is_not_null()
        & pl.col("ts").is_not_null()
    )
    query = (
        events.lazy()
        .filter(placeable)
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

    ``unadmitted_queued``: whether a request with neither admission nor output (see the
    module docstring) waits in the queue; ``None`` decides it from the valid requests of
    ``events``. The streaming engine passes it when a batch alone cannot know.
    """
    events, row_quarantine = split_row_quarantine(events)
    events = with_request_key(events)
    facts = facts or trace_facts(events)
    has_releases = facts.has_releases
    trace_start, trace_end = facts.start_ns, facts.end_ns

    ticks = _tick_frame(events)
    tick_aggs = _tick_aggregates(ticks)
    others = events.filter(~pl.col("event").is_in(TICK_EVENTS))
    control = _control_frame(others, tick_aggs)
    parts = (events, ticks, tick_aggs, others, control, attributes, trace_end or 0)
    if unadmitted_queued is not None:
        requests, seq = _requests(*parts, unadmitted_queued)
    else:
        # Guess from the rows (any admission at all), and run the state machine again only
        # when every admitted request turned out invalid and the guess mattered.
        guess = bool((others["event"] == "admission").any())
        requests, seq = _requests(*parts, guess)
        valid_admitted = requests.filter(pl.col("rule").is_null() & (pl.col("n_admission") > 0))
        if guess and valid_admitted.height == 0 and _ambiguous(requests).any():
            requests, seq = _requests(*parts, False)
    valid = requests.filter(pl.col("rule").is_null())
    transitions = _transitions(seq, valid.select(KEY))
    return Timeline(
        requests=requests,
        ticks=ticks,
        transitions=transitions,
        row_quarantine=row_quarantine,
        trace_start_ns=trace_start,
        trace_end_ns=trace_end,
        has_admissions=bool((valid["n_admission"] > 0).any()),
        has_releases=has_releases,
    )


def _ambiguous(requests: pl.DataFrame) -> pl.Series:
    """Requests with neither an admission nor an output tick: server or client unknown."""
    return requests.select(
        ((pl.col("n_admission") == 0) & pl.col("ticks").is_null()).alias("ambiguous")
    )["ambiguous"]


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
    seq = _sequence(control, trace_end, unadmitted_queued)
    queued_tokens = _tokens_while_queued(ticks, control)
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
        .with_columns(_rule_column())
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
    if not timeline.has_admissions:
        return []
    valid = timeline.requests.filter(pl.col("rule").is_null())
    without = int(((valid["n_admission"] == 0) & valid["ticks"].is_not_null()).sum())
    if without == 0:
        return []
    return [
        f"{without} of {valid.height} valid requests have no admission event while the others "
        "do: they are taken as client-side (queue wait and prefill unavailable); in a server "
        "log this means lost admission rows"
    ]


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


def _transitions(seq: pl.DataFrame, valid_keys: pl.DataFrame) -> pl.DataFrame:
    """Queued/running/in-system level changes at each control event of valid requests."""
    state, prev = pl.col("state"), pl.col("prev_state")

    def level(s: pl.Expr, states: list[int]) -> pl.Expr:
        return s.is_in(states).cast(pl.Int64)

    return seq.join(valid_keys, on=KEY, how="semi").select(
        KEY,
        "ts",
        (level(state, [QUEUED]) - level(prev, [QUEUED])).alias("d_queued"),
        (level(state, [RUNNING, DECODING]) - level(prev, [RUNNING, DECODING])).alias("d_running"),
        (
            level(state, [QUEUED, RUNNING, DECODING]) - level(prev, [QUEUED, RUNNING, DECODING])
        ).alias("d_in_system"),
    )


def subset(timeline: Timeline, keys: pl.Series) -> Timeline:
    """The timeline of some requests only (for per-group summaries)."""
    wanted = keys.implode()
    return replace(
        timeline,
        requests=timeline.requests.filter(pl.col(KEY).is_in(wanted)),
        ticks=timeline.ticks.filter(pl.col(KEY).is_in(wanted)),
        transitions=timeline.transitions.filter(pl.col(KEY).is_in(wanted)),
        row_quarantine=timeline.row_quarantine.clear(),
    )


def has_invalid(timeline: Timeline) -> bool:
    """Whether any row or request of the trace was quarantined."""
    return timeline.row_quarantine.height > 0 or timeline.requests["rule"].null_count() < (
        timeline.requests.height
    )


def quarantined_rows(events: pl.DataFrame, timeline: Timeline) -> pl.DataFrame:
    """Every input row of an invalid request, plus unplaceable rows, with its rule.

    Joined on ``request_id``, not ``_key``: string keys are category codes, which Polars
    may assign differently once the categories of an earlier cast have been freed.
    """
    bad = timeline.requests.filter(pl.col("rule").is_not_null()).select("request_id", "rule")
    placeable, _ = split_row_quarantine(events)
    rows = placeable.join(bad, on="request_id", how="inner")
    return pl.concat([timeline.row_quarantine, rows], how="diagonal_relaxed")
