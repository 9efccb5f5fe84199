"""The request state machine and its named rules (design §3).

```
arrival → QUEUED → admission → RUNNING → first_token → DECODING → completion
            ↑                     │                        │
            └──── preemption ─────┴────────────────────────┘
any non-terminal state → cancellation or error;   terminal → release (optional)
```

The state machine runs row by row, as shifted columns (never a Python loop), over the
*control* frame of a trace: its non-tick events plus one synthetic ``first_token`` row per
request for its first tick (``lifecycle``). Each invalid request gets exactly one rule:
the first violated one in ``RULES`` order. Whether an arrival leads to QUEUED or straight
to RUNNING is decided per request by ``lifecycle_side``; this module takes that decision
as an expression.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.schema import TERMINAL_EVENTS

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

# The integer request key column of every lifecycle frame.
KEY = "_key"


def state_after(event: pl.Expr, admitted: pl.Expr) -> pl.Expr:
    """The state a request is in after ``event``.

    ``admitted``: whether the request is server-side. A client-side request has no
    admission event: arrival leads straight to running.
    """
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


def sequence(control: pl.DataFrame, trace_end: int, admitted: pl.Expr) -> pl.DataFrame:
    """Row-wise state machine over the control events: state before/after, rule hits.

    ``control`` is sorted by request and time; ``admitted`` is evaluated per row (an
    expression over the request's rows, ``lifecycle_side.server_side``).
    """
    same = pl.col(KEY) == pl.col(KEY).shift(1)
    same_next = pl.col(KEY) == pl.col(KEY).shift(-1)
    seq = control.with_columns(
        state_after(pl.col("event"), admitted).alias("state"),
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


def tokens_while_queued(
    ticks: pl.DataFrame, control: pl.DataFrame, runs: pl.DataFrame
) -> pl.DataFrame:
    """Keys of requests with a tick between a preemption and the next admission.

    ``ticks`` are sorted by request and time; ``runs`` holds each request's key and
    number of ticks, in the same order (``lifecycle``'s tick aggregates).
    """
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
    # The preempted requests' runs of ticks, gathered by index: no hash lookup and no mask
    # over every tick, and the rows stay in (request, time) order, as the as-of join needs.
    of_preempted = runs[KEY].is_in(preempted[KEY].implode()).to_numpy()
    later_ticks = ticks.select(KEY, "ts")[run_rows(runs["ticks"].to_numpy(), of_preempted)]
    hits = later_ticks.join_asof(
        gates,
        on="ts",
        by=KEY,
        strategy="backward",
        allow_exact_matches=True,
        check_sortedness=False,
    )
    return hits.filter(pl.col("queued").fill_null(False)).select(KEY).unique()


def run_rows(lengths: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Row indices of the ``chosen`` runs of a frame made of consecutive runs of the given
    ``lengths``, in order: each chosen run's rows, without a mask over every row."""
    lengths = lengths.astype(np.int64, copy=False)
    starts = np.cumsum(lengths) - lengths
    picked, sizes = starts[chosen], lengths[chosen]
    # Row i of the result is the start of its run plus its place within the run.
    offsets = np.repeat(picked - (np.cumsum(sizes) - sizes), sizes)
    return np.arange(offsets.shape[0], dtype=np.int64) + offsets


def prev_state_at_cancel() -> pl.Expr:
    """Per request (in a ``group_by``): the state it was cancelled in."""
    return (
        pl.col("prev_state").filter(pl.col("event") == "cancellation").first().alias("cancel_state")
    )


def rule_column() -> pl.Expr:
    """The first rule (``RULES`` order) a request breaks, from its aggregate columns."""
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


def transitions(seq: pl.DataFrame, valid_keys: pl.DataFrame) -> pl.DataFrame:
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
