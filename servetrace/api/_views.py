"""Events *and* their analysis, for the views that draw events (``timeline``, ``report``,
``--plots``): an analysis keeps no ticks or preemption times, so these read both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import polars as pl

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.memory import (
    Analysis,
    AnalysisOptions,
    analyze_events,
    analyze_trace,
    unreadable,
)
from servetrace.api._analyze import _imported, _ingest, log, path_texts
from servetrace.sources import detect
from servetrace.sources.canonical import Trace, read_events


def _scan(
    traces: list[str],
    columns: Mapping[str, str] | None,
    time_unit: str | None,
    event_map: Mapping[str, str] | None,
    from_format: str | None,
) -> Trace | pl.DataFrame:
    fmt, paths = detect.inputs(traces, from_format)
    if fmt is None:
        return read_events(traces, _ingest(columns, time_unit, event_map))
    events, notes = _imported(paths, fmt, columns, time_unit)
    for note in notes:
        log.warning("%s", note)
    return events


def scan_events(
    traces: list[str],
    *,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
) -> pl.DataFrame | pl.LazyFrame:
    """The trace's canonical events: a lazy scan of a native trace (a view reduces it to
    bins and a few rows, never holding it), the imported frame of another tool's export."""
    scanned = _scan(path_texts(traces), columns, time_unit, event_map, from_format)
    return scanned if isinstance(scanned, pl.DataFrame) else scanned.events


def load_for_report(
    trace: str,
    *,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
) -> tuple[Analysis, pl.DataFrame | pl.LazyFrame, tuple[str, ...]]:
    """The analysis exactly as ``analyze`` makes it (streamed when the trace is large), the
    events as a lazy scan, and the analysis' warnings (each naming the trace)."""
    scanned = _scan([trace], columns, time_unit, event_map, from_format)
    if isinstance(scanned, pl.DataFrame):
        analysis = analyze_events(scanned, AnalysisOptions(), inputs=(trace,))
        events: pl.DataFrame | pl.LazyFrame = scanned
    else:
        ingest = _ingest(columns, time_unit, event_map)
        analysis = analyze_paths([trace], ingest, AnalysisOptions(), streaming=None)
        events = scanned.events
    return analysis, events, tuple(f"{trace}: {m}" for m in analysis.summary.warnings)


def load_with_events(
    traces: list[str],
    options: AnalysisOptions | None = None,
    *,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
) -> tuple[Analysis, pl.DataFrame, tuple[str, ...]]:
    """Events, their in-memory analysis and its warnings.

    A native trace is analysed exactly as ``analyze`` does (same path, same numbers to the
    last bit), from the events collected once.
    """
    options = options or AnalysisOptions()
    scanned = _scan(traces, columns, time_unit, event_map, from_format)
    if isinstance(scanned, pl.DataFrame):
        events = scanned
        analysis = analyze_events(events, options, inputs=tuple(traces))
    else:
        try:
            events = scanned.events.collect()
        except pl.exceptions.PolarsError as error:
            raise unreadable(scanned, error) from None
        analysis = analyze_trace(replace(scanned, events=events.lazy()), options)
    return analysis, events, analysis.summary.warnings
