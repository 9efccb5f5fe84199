"""Per-request metrics and per-gap ITL (DESIGN §4), as Polars expressions over the timeline.

All durations are Int64 nanoseconds with an ``_ns`` suffix; the two per-request means
(``itl_mean_ns``, ``tpot_ns``) and the formula residual are Float64 ns. A value a request
never reached (a TTFT for a request cancelled while queued) is null, never zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle import Timeline
from servetrace.analysis.lifecycle_rules import DECODING, KEY, QUEUED, RUNNING
from servetrace.analysis.output_counts import known_count

# A request attribute an importer sets to False where the source dropped what a cancelled
# request delivered; such a request was cancelled in an unknown stage.
PARTIAL_OUTPUT_KNOWN = "partial_output_known"
UNKNOWN_STAGE = "unknown"

# Columns of the per-request frame, in output order (attributes follow).
REQUEST_COLUMNS: tuple[str, ...] = (
    "request_id",
    "outcome",
    "cancelled_in",
    "arrival_ns",
    "queue_wait_ns",
    "prefill_ns",
    "ttft_ns",
    "decode_ns",
    "response_ns",
    "e2e_ns",
    "delivery_tail_ns",
    "tpot_ns",
    "itl_mean_ns",
    "itl_max_ns",
    "output_tokens",
    "prompt_tokens",
    "ticks",
    "preemptions",
    "requeued_ns",
    "formula_residual_ns",
)


def partial_output_dropped(columns: Sequence[str]) -> pl.Expr:
    """Whether the source dropped what a cancelled request delivered (AIPerf keeps no
    partial output): its state at cancel and its output count are unknown."""
    if PARTIAL_OUTPUT_KNOWN not in columns:
        return pl.lit(False)
    return pl.col(PARTIAL_OUTPUT_KNOWN).fill_null(True).not_() & pl.col("first_tick_ns").is_null()


def _cancelled_in(columns: Sequence[str]) -> pl.Expr:
    state = pl.col("cancel_state")
    reached_first = pl.col("first_tick_ns").is_not_null() & (
        pl.col("first_tick_ns") <= pl.col("terminal_ns")
    )
    # Per request (lifecycle docstring): only an admitted request can be "in prefill"; a
    # client-side one cancelled before its first token cannot say where it was.
    before_first = (
        pl.when(pl.col("n_admission") > 0)
        .then(pl.lit("prefill"))
        .otherwise(pl.lit("before_first_token"))
    )
    return (
        pl.when(pl.col("outcome") != "cancelled")
        .then(pl.lit(None, pl.String))
        .when(partial_output_dropped(columns))
        .then(pl.lit(UNKNOWN_STAGE))
        .when(state == QUEUED)
        .then(pl.lit("queued"))
        .when((state == DECODING) | ((state == RUNNING) & reached_first))
        .then(pl.lit("decode"))
        .otherwise(before_first)
        .alias("cancelled_in")
    )


def request_metrics(timeline: Timeline, attributes: list[str]) -> pl.DataFrame:
    """One row per valid request with every metric of DESIGN §4."""
    valid = timeline.requests.filter(pl.col("rule").is_null())

    def column(name: str, otherwise: pl.Expr) -> pl.Expr:
        return pl.col(name) if name in valid.columns else otherwise

    # Request-level imports (no per-token ticks) carry ticks_available=False and their
    # last-token time, if the tool logged one apart from stream close, as last_token_ns.
    no_ticks = column("ticks_available", pl.lit(True)).fill_null(True).not_()
    completed = pl.col("outcome") == "completed"
    fallback_last = column("last_token_ns", pl.lit(None, pl.Int64))
    last_tick = (
        pl.when(no_ticks)
        .then(pl.coalesce(fallback_last, pl.when(completed).then(pl.col("terminal_ns"))))
        .otherwise(pl.col("last_tick_ns"))
    )
    reported = column("reported_output_tokens", pl.lit(None, pl.Int64))
    n_out = pl.coalesce(reported, pl.col("tokens_sum"))
    # A request-level trace's one tick is no count: unknown, not 1 (analysis.output_counts).
    frame = valid.with_columns(
        last_tick.alias("_last_tick_ns"),
        pl.when(
            known_count(no_ticks, reported, pl.col("ticks"))
            & ~partial_output_dropped(valid.columns)
        )
        .then(n_out.fill_null(0))
        .cast(pl.Int64)
        .alias("output_tokens"),
        pl.col("ticks").fill_null(0).cast(pl.Int64),
        pl.col("preemptions").fill_null(0).cast(pl.Int64),
        _cancelled_in(valid.columns),
    )
    arrival, first = pl.col("arrival_ns"), pl.col("first_tick_ns")
    last, n = pl.col("_last_tick_ns"), pl.col("output_tokens")
    decode = last - first
    itl_mean = pl.when(~no_ticks & (pl.col("ticks") >= 2)).then(
        decode.cast(pl.Float64) / (pl.col("ticks") - 1)
    )
    # A request cancelled while still waiting for its first admission queued until then.
    never_admitted = pl.col("admission_ns").is_null() & (pl.col("cancelled_in") == "queued")
    frame = frame.with_columns(
        pl.when(never_admitted)
        .then(pl.col("terminal_ns") - arrival)
        .otherwise(pl.col("admission_ns") - arrival)
        .alias("queue_wait_ns"),
        (first - pl.col("admission_ns")).alias("prefill_ns"),
        (first - arrival).alias("ttft_ns"),
        decode.alias("decode_ns"),
        (last - arrival).alias("response_ns"),
        (pl.col("terminal_ns") - arrival).alias("e2e_ns"),
        pl.when(completed).then(pl.col("terminal_ns") - last).alias("delivery_tail_ns"),
        pl.when(n >= 2).then(decode.cast(pl.Float64) / (n - 1)).alias("tpot_ns"),
        itl_mean.alias("itl_mean_ns"),
        pl.when(~no_ticks).then(pl.col("itl_max_ns")).alias("itl_max_ns"),
        pl.when(pl.col("preemptions") > 0)
        .then(pl.col("requeued_ns"))
        .otherwise(0)
        .cast(pl.Int64)
        .alias("requeued_ns"),
    )
    # T_response ≈ TTFT + (N−1)·mean ITL; zero exactly when every tick carries one token.
    predicted_decode = pl.when(n <= 1).then(0.0).otherwise((n - 1) * pl.col("itl_mean_ns"))
    frame = frame.with_columns(
        (pl.col("response_ns") - pl.col("ttft_ns") - predicted_decode).alias("formula_residual_ns")
    )
    # Sets, not lists: a wide trace (100k attribute columns) must stay linear.
    present, fixed = set(frame.columns), set(REQUEST_COLUMNS)
    extra = [c for c in attributes if c in present and c not in fixed]
    if "prompt_tokens" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.Int64).alias("prompt_tokens"))
    # Arrival order, ties by id: deterministic (keys of string ids are not, see lifecycle).
    return frame.select(KEY, *REQUEST_COLUMNS, *extra).sort(
        "arrival_ns", "request_id", nulls_last=True
    )


def gap_frame(timeline: Timeline, requests: pl.DataFrame) -> pl.DataFrame:
    """Every inter-tick gap of completed requests with real ticks: ``_key``, ``itl_ns``."""
    kept = requests.filter(
        (pl.col("outcome") == "completed") & pl.col("itl_mean_ns").is_not_null()
    ).select(KEY)
    ticks = timeline.ticks
    # The ticks are sorted by request, and the timeline's requests by key with their tick
    # counts: each request's keep flag repeated over its run of ticks is the row mask,
    # with no hash lookup per tick.
    runs = timeline.requests.select(
        pl.col(KEY).is_in(kept[KEY].implode()).alias("kept"),
        pl.col("ticks").fill_null(0).alias("ticks"),
    )
    if runs["ticks"].sum() == ticks.height and timeline.requests[KEY].is_sorted():
        mask = np.repeat(runs["kept"].to_numpy(), runs["ticks"].to_numpy())
        rows = pl.Series(mask) & ticks["gap_ns"].is_not_null()
    else:
        rows = ticks["gap_ns"].is_not_null() & ticks[KEY].is_in(kept[KEY].implode())
    return ticks.select(KEY, pl.col("gap_ns").alias("itl_ns")).filter(rows)
