"""The engine model's own step records: what each step did and which requests it ran.

`StepRecorder` collects one row per step and the step's batch (the requests decoding and
prefilling in it) while the engine runs; `canonical_steps` turns a run's steps into the
canonical step schema (`servetrace.sources.steps.schema`), with exact membership, so a
simulated trace comes with the oracle the stall join is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import polars as pl

#: Columns of a `Simulation`'s `steps`, all Int64, in this order.
STEP_ROW_COLUMNS = (
    "step",
    "start_ns",
    "end_ns",
    "prefill_tokens",
    "decode_tokens",
    "batch_tokens",
    "prefill_seqs",
    "decode_seqs",
    "running",
    "queued",
    "kv_blocks_used",
    "preempted",
    "kv_tokens",
)


@dataclass
class StepRecorder:
    """Steps in the order they ran; members as flat request indices with one step index each."""

    rows: list[tuple[int, ...]] = field(default_factory=list)
    member_step: list[np.ndarray] = field(default_factory=list)
    member_req: list[np.ndarray] = field(default_factory=list)

    def record(
        self,
        index: int,
        span: tuple[int, int],
        decoders: np.ndarray,
        prefillers: np.ndarray,
        prefill_tokens: int,
        state: tuple[int, int, int, int, int],
    ) -> None:
        """One step: ``span`` (start, end ns); ``state`` (running, queued before it, KV
        blocks used, preempted while scheduling it, KV tokens it reads)."""
        running, queued, blocks, preempted, kv_tokens = state
        n_decode = len(decoders)
        self.rows.append(
            (
                index,
                *span,
                prefill_tokens,
                n_decode,
                prefill_tokens + n_decode,
                len(prefillers),
                n_decode,
                running,
                queued,
                blocks,
                preempted,
                kv_tokens,
            )
        )
        batch = np.concatenate([decoders, prefillers])
        self.member_req.append(batch)
        self.member_step.append(np.full(len(batch), index, dtype=np.int64))

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(steps, members): one row per step (`STEP_ROW_COLUMNS`); one per (step, request
        index) in the order each batch listed them (decoders first)."""
        steps = pl.DataFrame(
            self.rows, schema=dict.fromkeys(STEP_ROW_COLUMNS, pl.Int64), orient="row"
        )
        empty = np.zeros(0, dtype=np.int64)
        members = pl.DataFrame(
            {
                "step": np.concatenate(self.member_step) if self.member_step else empty,
                "request": np.concatenate(self.member_req) if self.member_req else empty,
            },
            schema={"step": pl.Int64, "request": pl.Int64},
        )
        return steps, members


class RecordedRun(Protocol):
    """What `canonical_steps` reads of a run (a `Simulation`), named here so the recorder
    does not import the engine that imports it."""

    @property
    def workload_ids(self) -> pl.Series: ...
    @property
    def steps(self) -> pl.DataFrame: ...
    @property
    def members(self) -> pl.DataFrame: ...


def canonical_steps(sim: RecordedRun) -> pl.DataFrame:
    """The run's steps in the canonical step schema, with ``request_ids`` (exact batch
    membership) on one replica (``replica`` null)."""
    from servetrace.sources.steps.schema import conform

    ids = sim.workload_ids
    members = (
        sim.members.with_columns(request_id=ids.gather(sim.members["request"]).cast(pl.String))
        .group_by("step", maintain_order=True)
        .agg("request_id")
    )
    frame = sim.steps.select(
        "step",
        pl.col("start_ns").alias("ts_start"),
        pl.col("end_ns").alias("ts_end"),
        pl.col("prefill_seqs").alias("prefill_requests"),
        "prefill_tokens",
        pl.col("decode_seqs").alias("decode_requests"),
        "decode_tokens",
        "kv_tokens",
        pl.col("queued").alias("queued_requests"),
        "preempted",
    ).join(members.rename({"request_id": "request_ids"}), on="step", how="left")
    return conform(frame.sort("step"))


def step_file(sim: RecordedRun, path: Path) -> pl.DataFrame:
    """`canonical_steps` as a file at ``path`` holds them: CSV holds no list, so there
    ``request_ids`` is the ids joined by ``;`` (as the canonical step reader reads them)."""
    steps = canonical_steps(sim)
    if path.suffix.lower() != ".csv":
        return steps
    return steps.with_columns(pl.col("request_ids").list.join(";"))
