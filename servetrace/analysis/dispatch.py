"""Choose the engine for a trace: in memory, or in batches when it is large (partitioned
by request when the log is not in time order).

Both engines build on ``memory`` (the in-memory pieces); this module sits above both, so
neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import polars as pl

from servetrace.analysis.memory import analyze_trace
from servetrace.analysis.partitioned import analyze_partitioned
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.streaming import NotTimeOrdered, analyze_streaming
from servetrace.settings import DEFAULT_BATCH_ROWS
from servetrace.sources.canonical import IngestOptions, read_events

# Above this many events the batched path is both lighter and faster: at 1e8 events it takes
# a tenth of the memory and less time than the in-memory one (docs/scale.md).
AUTO_STREAMING_EVENTS = 30_000_000


_NO_LIMIT = 2**63  # load_below that loads every trace


def analyze_paths(
    paths: Sequence[str],
    ingest: IngestOptions | None = None,
    options: AnalysisOptions | None = None,
    streaming: bool | None = False,
    batch_rows: int | None = None,
    by: str | None = None,
    restrict: Callable[[pl.LazyFrame], pl.LazyFrame] | None = None,
) -> Analysis:
    """Analyse trace files; ``streaming=None`` streams traces of AUTO_STREAMING_EVENTS+.

    A streamed log that turns out not to be in time order is analysed again partitioned
    by request (``partitioned``), never refused and never loaded whole into memory."""
    auto = streaming is None
    # A trace bound for the in-memory engine is decoded once, at the read (its ingest
    # checks then run on the decoded columns instead of reading the file again).
    load_below = AUTO_STREAMING_EVENTS if auto else (None if streaming else _NO_LIMIT)
    trace = read_events(paths, ingest, load_below=load_below)
    if restrict is not None:  # --window: only the requests arriving in it (analysis.window)
        trace = replace(trace, events=restrict(trace.events))
    if auto:
        streaming = not trace.loaded
    if not streaming:
        return analyze_trace(trace, options)
    try:
        return analyze_streaming(trace, options, batch_rows or DEFAULT_BATCH_ROWS, by)
    except NotTimeOrdered:
        # Sorted by request, merged from shards, or unsorted: partition the rows by
        # request_id (spilled to disk when larger than a batch) and analyse each partition
        # with the same kernel; the answers are those of the in-memory engine.
        return analyze_partitioned(trace, options, batch_rows or DEFAULT_BATCH_ROWS, by)
