"""The canonical engine-step schema, version 1: one row per engine step (forward pass).

A *step* is one iteration of a continuously batching engine: it starts, runs one forward
pass over its batch (prompt chunks of the requests being prefilled, one or more tokens of
each request decoding) and ends; every token it produces is emitted at its end. Times are
Int64 ns on the trace's clock, like the event log's ``ts``. Every importer returns a frame
in exactly this shape (`conform`), so the join and the attribution read one layout.
"""

from __future__ import annotations

import polars as pl

# name → (dtype, required, meaning). ``required`` columns may still hold nulls where one
# step of a source cannot tell the value (a null is *unknown*, never zero).
STEP_COLUMNS: dict[str, tuple[pl.DataType, bool, str]] = {
    "step": (pl.Int64(), False, "the engine's own step index, where it gives one"),
    "replica": (
        pl.String(),
        False,
        "data-parallel rank or engine instance; joins the event log's `replica` attribute",
    ),
    "ts_start": (pl.Int64(), True, "when the step started (ns); or give `duration`"),
    "ts_end": (pl.Int64(), True, "when the step ended and its tokens were emitted (ns)"),
    "prefill_requests": (pl.Int64(), True, "requests with prompt tokens in the step"),
    "prefill_tokens": (pl.Int64(), True, "prompt tokens processed in the step"),
    "decode_requests": (pl.Int64(), True, "requests decoding in the step"),
    "decode_tokens": (pl.Int64(), True, "output tokens decoded in the step"),
    "cached_tokens": (pl.Int64(), False, "prompt tokens served from the prefix cache"),
    "kv_tokens": (pl.Int64(), False, "tokens held in the KV cache during the step"),
    "kv_usage": (pl.Float64(), False, "fraction of the KV cache in use, 0–1"),
    "queued_requests": (pl.Int64(), False, "requests waiting when the step was scheduled"),
    "preempted": (pl.Int64(), False, "requests preempted when the step was scheduled"),
    "request_ids": (
        pl.List(pl.String()),
        False,
        "the requests in the step's batch, where the source gives membership",
    ),
}
STEP_SCHEMA: dict[str, pl.DataType] = {name: dtype for name, (dtype, _, _) in STEP_COLUMNS.items()}
REQUIRED_STEP_COLUMNS: tuple[str, ...] = tuple(
    name for name, (_, required, _) in STEP_COLUMNS.items() if required
)
# The columns that count requests or tokens (each ≥ 0): the integers but the index and times.
COUNT_COLUMNS: tuple[str, ...] = tuple(
    name
    for name, (dtype, _, _) in STEP_COLUMNS.items()
    if dtype == pl.Int64() and name not in ("step", "ts_start", "ts_end")
)
_INT64_MAX = 2**63 - 1


def is_count(value: object) -> bool:
    """Whether a decoded record's ``value`` is a count an Int64 step column holds."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _INT64_MAX


def conform(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in the canonical column order and types; absent optional columns are null.

    ``ts_start`` may be absent when a ``duration`` (ns) column is given instead.
    """
    if "ts_start" not in frame.columns and "duration" in frame.columns:
        frame = frame.with_columns(ts_start=pl.col("ts_end") - pl.col("duration"))
    return frame.select(
        (
            pl.col(name).cast(dtype)
            if name in frame.columns
            else pl.lit(None, dtype=dtype).alias(name)
        )
        for name, dtype in STEP_SCHEMA.items()
    )
