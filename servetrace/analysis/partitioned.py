"""Analyse a large trace that is not in time order: partition it by request, then stream.

The batched engine (``streaming``) needs a log in time order: a request's rows must not
turn up after the request finished. A log sorted by request, merged from shards or simply
unsorted breaks that. This engine makes no assumption about row order:

1. **Partition.** One streamed pass (``collect_batches``) assigns every row to one of K
   partitions by ``hash(request_id) mod K``, so all rows of a request land in the same
   partition, in their original order. With K = 1 (the trace fits one batch) the rows stay
   in memory; otherwise each partition is appended, batch by batch, to its own Parquet
   file in a temporary directory (spilled: the trace never has to fit in memory).
2. **Analyse.** Each partition is read back on its own and handed to ``pieces.Pieces``:
   the kernel of the other engines with the facts of the whole trace, so every
   per-request value equals the in-memory one; ITL gaps pooled exactly within their
   budget, else within ``histogram.RELATIVE_BOUND``; one summary at the end. The few
   requests with neither an admission nor an output tick are analysed last, once the
   trace is known to have admitted requests or not (``lifecycle_side``), as the batched
   engine does.

K is ``ceil(events / batch_rows)``, so a partition holds about ``batch_rows`` rows (hash
skew aside) and peak memory follows the batch size, not the trace. The spill costs one
write and one read of the trace in lz4 Parquet (the temporary directory: ``TMPDIR``, or
``spill_dir``); it is removed when the analysis ends, also on error.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.analysis.histogram import EXACT_GAPS
from servetrace.analysis.lifecycle import PLACEABLE
from servetrace.analysis.pieces import pieces_of
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.errors import InputError
from servetrace.schema import TICK_EVENTS
from servetrace.settings import DEFAULT_BATCH_ROWS
from servetrace.sources.trace import Trace

PART = "_partition"
# Rows of a request with neither an admission nor an output tick: whether it waited in a
# queue depends on the whole trace (``lifecycle_side``), so they are analysed last.
_PLACED = (PLACEABLE & pl.col("event").is_in(["admission", *TICK_EVENTS])).any()
UNPLACED = PLACEABLE & ~_PLACED.over("request_id")


def partition_count(events: int, batch_rows: int) -> int:
    """Partitions for ``events`` rows so that each holds about ``batch_rows``."""
    return max(1, math.ceil(events / max(batch_rows, 1)))


def partition_of(partitions: int) -> pl.Expr:
    """Every row's partition: a hash of its request id (null ids share one partition)."""
    return (pl.col("request_id").hash(seed=0) % partitions).cast(pl.Int64).alias(PART)


def analyze_partitioned(
    trace: Trace,
    options: AnalysisOptions | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    by: str | None = None,
    exact_gaps: int = EXACT_GAPS,
    partitions: int | None = None,
    spill_dir: str | Path | None = None,
) -> Analysis:
    """Analyse ``trace`` in any row order, one partition of requests at a time.

    ``partitions`` overrides K (tests use it to force a spill of a small trace).
    """
    with pieces_of(trace, options, by, exact_gaps) as pieces:
        if partitions is None:
            rows = int(trace.events.select(pl.len()).collect().item())
            partitions = partition_count(rows, batch_rows)
        if partitions <= 1:
            pieces.add(trace.events.collect())
        else:
            deferred: list[pl.DataFrame] = []
            with tempfile.TemporaryDirectory(prefix="servetrace-partitions-", dir=spill_dir) as tmp:
                for path in _spill(trace, partitions, batch_rows, Path(tmp)):
                    frame = pl.read_parquet(path)
                    unplaced = frame.select(UNPLACED).to_series()
                    if unplaced.any():
                        deferred.append(frame.filter(unplaced))
                        frame = frame.filter(~unplaced)
                    pieces.add(frame)
            # Queued if any valid request of the trace was admitted (as in memory).
            queued = True if pieces.has_admissions else None
            if deferred:
                pieces.add(pl.concat(deferred, how="vertical_relaxed"), queued)
        return pieces.analysis(trace.inputs)


def _spill(trace: Trace, partitions: int, batch_rows: int, directory: Path) -> list[Path]:
    """Write each partition's rows, in their original order, to its own Parquet file."""
    import pyarrow.parquet as pq

    writers: dict[int, Any] = {}
    try:
        for batch in trace.events.collect_batches(chunk_size=batch_rows):
            pieces = batch.with_columns(partition_of(partitions)).partition_by(
                PART, as_dict=True, maintain_order=True
            )
            for (part, *_), piece in pieces.items():
                table = piece.drop(PART).to_arrow()
                index = int(part)
                writer = writers.get(index)
                if writer is None:
                    path = directory / f"part-{index:06d}.parquet"
                    writer = writers[index] = pq.ParquetWriter(
                        path, table.schema, compression="lz4"
                    )
                writer.write_table(table)
    except OSError as error:
        raise InputError(
            f"{', '.join(trace.files)}: cannot spill partitions to {directory}: {error}",
            hint="the trace is partitioned by request on disk; point TMPDIR at a disk with "
            "room for a compressed copy of it",
        ) from None
    finally:
        for writer in writers.values():
            writer.close()
    return [directory / f"part-{index:06d}.parquet" for index in sorted(writers)]
