"""Load a trace's canonical events *and* its analysis, for the views that draw events
(``timeline``, ``report``, ``--plots``): the analysis keeps no ticks or preemption times.
"""

from __future__ import annotations

import polars as pl

from servetrace.analysis.memory import Analysis, AnalysisOptions, analyze_events, unreadable
from servetrace.cli._app import warn
from servetrace.cli._inputs import _importable, ingest_options
from servetrace.sources.canonical import read_events, resolve_paths
from servetrace.sources.registry import import_file


def load_events(
    traces: list[str],
    column: list[str] | None = None,
    time_unit: str | None = None,
    event_map: list[str] | None = None,
    from_format: str | None = None,
) -> pl.DataFrame:
    """The canonical events of the trace (one frame, in memory), native or imported."""
    paths = resolve_paths(traces)
    fmt = _importable(paths, from_format)
    if fmt is None:
        trace = read_events(traces, ingest_options(column, time_unit, event_map))
        try:
            return trace.events.collect()
        except pl.exceptions.PolarsError as error:
            raise unreadable(trace, error) from None
    results = [import_file(path, fmt) for path in paths]
    for result in results:
        for message in result.warnings:
            warn(f"{result.path}: {message}")
    return pl.concat([r.events for r in results], how="diagonal_relaxed")


def load_with_events(
    traces: list[str],
    options: AnalysisOptions | None = None,
    column: list[str] | None = None,
    time_unit: str | None = None,
    event_map: list[str] | None = None,
    from_format: str | None = None,
) -> tuple[Analysis, pl.DataFrame]:
    """Events and their in-memory analysis; the analysis' warnings go to stderr."""
    events = load_events(traces, column, time_unit, event_map, from_format)
    analysis = analyze_events(events, options or AnalysisOptions(), inputs=tuple(traces))
    for message in analysis.summary.warnings:
        warn(message)
    return analysis, events
