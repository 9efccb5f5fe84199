"""Vidur's per-batch records (microsoft/vidur): ``*_batches.csv.gz`` with
``batch_id, replica_id, scheduled_at, completed_at`` (simulated seconds), ``batch_size,
num_prefill_tokens, num_decode_tokens``; and, when the sibling ``*_iterations.parquet``
is there, the batch membership: one row per (request, batch) with ``prefill_done_before``
(1: the request was decoding in that batch, 0: prefilling or a prefill chunk).

Times become ns as the event logs of the same runs were made: ``round(seconds × 1e9)``.
Without membership a batch's decode requests are its decode tokens (one token each) and
the rest of ``batch_size`` are prefill requests.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.sources.file_scan import read_table
from servetrace.sources.steps.formats import StepFile
from servetrace.sources.steps.validate import require_columns

BATCH_COLUMNS = (
    "batch_id",
    "replica_id",
    "scheduled_at",
    "completed_at",
    "batch_size",
    "num_prefill_tokens",
    "num_decode_tokens",
)
MEMBER_COLUMNS = ("request_id", "batch_id", "prefill_done_before")


def iterations_of(path: Path) -> Path | None:
    """The membership beside a batches file: ``X_batches.csv.gz`` → ``X_iterations.parquet``."""
    name = path.name
    for suffix in ("_batches.csv.gz", "_batches.csv"):
        if name.endswith(suffix):
            candidate = path.with_name(name[: -len(suffix)] + "_iterations.parquet")
            return candidate if candidate.is_file() else None
    return None


def _membership(path: Path) -> pl.DataFrame:
    members = read_table(path)
    require_columns(path, members.columns, MEMBER_COLUMNS, "a Vidur file", hint=None)
    decoding = pl.col("prefill_done_before") == 1
    return members.group_by("batch_id").agg(
        pl.col("request_id").cast(pl.String).sort().alias("request_ids"),
        (~decoding).sum().cast(pl.Int64).alias("prefill_requests"),
        decoding.sum().cast(pl.Int64).alias("decode_requests"),
    )


def _ns(column: str) -> pl.Expr:
    return (pl.col(column) * 1e9).round().cast(pl.Int64)


def read(path: Path, ticks: pl.Series | None = None) -> StepFile:
    """The batches of ``path`` as steps, with membership from the sibling file if present."""
    batches = read_table(path)
    require_columns(path, batches.columns, BATCH_COLUMNS, "a Vidur file", hint=None)
    frame = batches.select(
        pl.col("batch_id").cast(pl.Int64).alias("step"),
        pl.col("replica_id").cast(pl.String).alias("replica"),
        _ns("scheduled_at").alias("ts_start"),
        _ns("completed_at").alias("ts_end"),
        (pl.col("batch_size") - pl.col("num_decode_tokens")).alias("prefill_requests"),
        pl.col("num_prefill_tokens").alias("prefill_tokens"),
        pl.col("num_decode_tokens").alias("decode_requests"),
        pl.col("num_decode_tokens").alias("decode_tokens"),
    )
    notes: tuple[str, ...] = ()
    iterations = iterations_of(path)
    if iterations is not None:
        members = _membership(iterations)
        frame = frame.drop("prefill_requests", "decode_requests").join(
            members.with_columns(pl.col("batch_id").cast(pl.Int64)).rename({"batch_id": "step"}),
            on="step",
            how="left",
            maintain_order="left",
        )
        notes = (f"{path}: batch membership from {iterations.name}",)
    return StepFile(frame, notes)
