"""Analyse a large trace that is not in time order: partition it by request, then stream.

The batched engine (``streaming``) needs a log in time order: a request's rows must not
turn up after the request finished. A log sorted by request, merged from shards or simply
unsorted breaks that. This engine makes no assumption about row order:

1. **Partition.** One streamed pass (``collect_batches``) assigns every row to one of K
   partitions by ``hash(request_id) mod K``, so all rows of a request land in the same
   partition, in their original order. With K = 1 (the trace fits one batch) the rows stay
   in memory; otherwise each partition is appended, batch by batch, to its own Parquet
   file in a temporary directory (spilled: the trace never has to fit in memory).
2. **Analyse.** Each partition is read back on its own and goes through exactly the
   per-request kernel of the other engines (``build_timeline``, ``request_metrics``,
   ``gap_frame``) with the facts of the whole trace (``trace_facts``: its span, whether it
   logs admissions and releases), so every per-request value equals the in-memory one.
3. **Merge.** Per-request rows and concurrency transitions are concatenated (exact); ITL
   gaps are pooled in ``histogram.PooledGaps``: exact while they fit its budget, beyond it
   a log histogram within ``histogram.RELATIVE_BOUND`` (±0.0123 %) of the in-memory
   percentiles. The summary is then computed once over the merged frames, as in memory.

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

from servetrace.analysis.histogram import (
    EXACT_GAPS,
    GAP_SCHEMA,
    GapBudget,
    PooledGaps,
    add_by_group,
)
from servetrace.analysis.known_facts import whole_trace_facts
from servetrace.analysis.lifecycle import (
    KEY,
    TraceFacts,
    admission_warnings,
    build_timeline,
    has_invalid,
    key_renumbering,
    quarantined_rows,
)
from servetrace.analysis.memory import (
    attribute_columns,
    span_warnings,
    unreadable,
)
from servetrace.analysis.metrics import gap_frame, request_metrics
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.stream_state import KeptRequests, spill_directory
from servetrace.analysis.streaming import _histogram_warning
from servetrace.analysis.summary import summarize
from servetrace.errors import InputError, UsageError
from servetrace.settings import DEFAULT_BATCH_ROWS
from servetrace.sources.trace import Trace

PART = "_partition"


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
    try:
        with spill_directory() as kept:
            return _analyze_partitioned(
                trace,
                options or AnalysisOptions(),
                batch_rows,
                by,
                exact_gaps,
                partitions,
                spill_dir,
                kept,
            )
    except pl.exceptions.PolarsError as error:
        raise unreadable(trace, error) from None


class _Merged:
    """What is kept of each analysed partition (small: one row per request)."""

    def __init__(
        self, facts: TraceFacts, attributes: list[str], by: str | None, exact_gaps: int, kept: Path
    ) -> None:
        self.facts = facts
        self.attributes = attributes
        self.by = by
        self.kept = KeptRequests(grouped=by is not None, spill=kept)
        self.empty_ticks: pl.DataFrame | None = None
        self.quarantine: list[pl.DataFrame] = []
        self.itl = PooledGaps(GapBudget(exact_gaps))
        self.by_budget = GapBudget(exact_gaps)  # shared by the groups: their sum stays bounded
        self.itl_by: dict[object, PooledGaps] = {}
        self.next_key = 0

    def add(self, frame: pl.DataFrame) -> None:
        """One partition: every row of each of its requests."""
        if frame.height == 0:
            return
        timeline = build_timeline(frame, self.attributes, self.facts)
        metrics = request_metrics(timeline, self.attributes)
        gaps = gap_frame(timeline, metrics)
        if self.by is not None:
            grouped = gaps.join(metrics.select(KEY, self.by), on=KEY, how="left")
            add_by_group(self.itl_by, grouped, self.by, self.by_budget)
        # Keys are unique within one partition only: renumber them trace-wide.
        rekey = key_renumbering(timeline.requests, self.next_key)
        self.next_key += timeline.requests.height
        # Exact gaps are kept with their trace-wide keys: the in-memory gap frame.
        if self.itl.exact:
            self.itl.add_frame(rekey(gaps))
        else:
            self.itl.add(gaps["itl_ns"])

        # Only what is read after the kernel (stream_state); not the ticks, the bulk of
        # a partition, whose gaps are counted.
        if self.empty_ticks is None:
            self.empty_ticks = timeline.ticks.clear()
        self.kept.add(timeline, metrics, rekey)
        if has_invalid(timeline):
            self.quarantine.append(quarantined_rows(frame, timeline))


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


def _analyze_partitioned(
    trace: Trace,
    options: AnalysisOptions,
    batch_rows: int,
    by: str | None,
    exact_gaps: int,
    partitions: int | None,
    spill_dir: str | Path | None,
    kept: Path,
) -> Analysis:
    facts = whole_trace_facts(trace)
    schema = trace.events.collect_schema()
    attributes = attribute_columns(list(schema.names()))
    if by is not None and by not in attributes:
        raise UsageError(
            f"--by {by}: no such request column",
            hint="columns: " + ", ".join(attributes) if attributes else "the trace has none",
        )
    merged = _Merged(facts, attributes, by, exact_gaps, kept)
    if partitions is None:
        rows = int(trace.events.select(pl.len()).collect().item())
        partitions = partition_count(rows, batch_rows)
    if partitions <= 1:
        merged.add(trace.events.collect())
    else:
        with tempfile.TemporaryDirectory(prefix="servetrace-partitions-", dir=spill_dir) as tmp:
            for path in _spill(trace, partitions, batch_rows, Path(tmp)):
                merged.add(pl.read_parquet(path))
    if not len(merged.kept) or merged.empty_ticks is None:
        raise InputError(
            f"{', '.join(trace.inputs)}: the trace has no event rows",
            hint="a trace needs at least one row: request_id, event, ts",
        )
    timeline = merged.kept.timeline(facts, merged.empty_ticks)
    requests = merged.kept.requests()
    exact = merged.itl.frame(GAP_SCHEMA)
    summary = summarize(
        timeline,
        requests,
        exact if exact is not None else merged.itl.describe(),
        targets=options.goodput,
        formula_tolerance=(options.formula_abs_tol_ns, options.formula_rel_tol),
        warnings=[
            *span_warnings(timeline),
            *admission_warnings(timeline),
            *_histogram_warning(merged.itl, merged.itl_by.values()),
        ],
    )
    rows_out = (
        pl.concat(merged.quarantine, how="diagonal_relaxed")
        if merged.quarantine
        else pl.DataFrame(schema={**schema, "rule": pl.String})
    )
    return Analysis(
        inputs=trace.inputs,
        timeline=timeline,
        per_request=requests,
        gaps=exact if exact is not None else pl.DataFrame(schema=GAP_SCHEMA),
        summary=summary,
        quarantine_rows=rows_out,
        attributes=tuple(attributes),
        itl_by=(by, {value: h.describe() for value, h in merged.itl_by.items()}) if by else None,
    )
