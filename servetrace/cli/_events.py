"""Load a trace's canonical events *and* its analysis, for the views that draw events
(``timeline``, ``report``, ``--plots``): the analysis keeps no ticks or preemption times.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.memory import (
    Analysis,
    AnalysisOptions,
    analyze_events,
    analyze_trace,
    unreadable,
)
from servetrace.cli._app import err_console, warn
from servetrace.cli._inputs import _importable, ingest_options
from servetrace.compare.measure import Comparison
from servetrace.sources.canonical import Trace, read_events, resolve_paths
from servetrace.sources.registry import import_file

PlotsOpt = Annotated[
    Path | None,
    typer.Option(
        help="Also write the charts of the HTML report as SVG and PNG into this directory "
        "(with plots.md linking them); needs servetrace[report]."
    ),
]


def _scan(
    traces: list[str],
    column: list[str] | None,
    time_unit: str | None,
    event_map: list[str] | None,
    from_format: str | None,
) -> Trace | pl.DataFrame:
    paths = resolve_paths(traces)
    fmt = _importable(paths, from_format)
    if fmt is None:
        return read_events(traces, ingest_options(column, time_unit, event_map))
    results = [import_file(path, fmt) for path in paths]
    for result in results:
        for message in result.warnings:
            warn(f"{result.path}: {message}")
    return pl.concat([r.events for r in results], how="diagonal_relaxed")


def load_events(
    traces: list[str],
    column: list[str] | None = None,
    time_unit: str | None = None,
    event_map: list[str] | None = None,
    from_format: str | None = None,
) -> pl.DataFrame:
    """The canonical events of the trace (one frame, in memory), native or imported."""
    scanned = _scan(traces, column, time_unit, event_map, from_format)
    if isinstance(scanned, pl.DataFrame):
        return scanned
    try:
        return scanned.events.collect()
    except pl.exceptions.PolarsError as error:
        raise unreadable(scanned, error) from None


def load_for_report(
    trace: str,
    column: list[str] | None = None,
    time_unit: str | None = None,
    event_map: list[str] | None = None,
    from_format: str | None = None,
) -> tuple[Analysis, pl.DataFrame | pl.LazyFrame]:
    """The analysis exactly as ``analyze`` makes it (streamed when the trace is large) and
    the events as a lazy scan, which the report only reduces to bins and a few rows."""
    scanned = _scan([trace], column, time_unit, event_map, from_format)
    if isinstance(scanned, pl.DataFrame):
        analysis = analyze_events(scanned, AnalysisOptions(), inputs=(trace,))
        events: pl.DataFrame | pl.LazyFrame = scanned
    else:
        ingest = ingest_options(column, time_unit, event_map)
        analysis = analyze_paths([trace], ingest, AnalysisOptions(), streaming=None)
        events = scanned.events
    for message in analysis.summary.warnings:
        warn(f"{trace}: {message}")
    return analysis, events


def analysis_plots(
    analysis: Analysis,
    directory: Path,
    traces: list[str],
    column: list[str] | None = None,
    time_unit: str | None = None,
    event_map: list[str] | None = None,
    from_format: str | None = None,
) -> str:
    """``analyze --plots DIR``: the charts, with the trace's ticks scanned again lazily
    (reduced to bins, never held: the analysis may have streamed a huge trace)."""
    from servetrace.render.plots import analysis_plots as write
    from servetrace.render.report import require_extra
    from servetrace.render.report_sections import TraceView

    require_extra()
    scanned = _scan(traces, column, time_unit, event_map, from_format)
    events = scanned if isinstance(scanned, pl.DataFrame) else scanned.events
    links = write(TraceView(", ".join(traces), analysis, events), directory)
    _wrote(directory)
    return links


def _wrote(directory: Path) -> None:
    count = len(list(directory.glob("*.svg")))
    err_console.print(
        f"wrote {count} charts as SVG and PNG to {directory} (linked from "
        f"{directory / 'plots.md'})",
        markup=False,
    )


def load_with_events(
    traces: list[str],
    options: AnalysisOptions | None = None,
    column: list[str] | None = None,
    time_unit: str | None = None,
    event_map: list[str] | None = None,
    from_format: str | None = None,
) -> tuple[Analysis, pl.DataFrame]:
    """Events and their in-memory analysis; the analysis' warnings go to stderr.

    A native trace is analysed exactly as ``analyze`` does (same path, same numbers to the
    last bit), from the events collected once.
    """
    options = options or AnalysisOptions()
    scanned = _scan(traces, column, time_unit, event_map, from_format)
    if isinstance(scanned, pl.DataFrame):
        events = scanned
        analysis = analyze_events(events, options, inputs=tuple(traces))
    else:
        try:
            events = scanned.events.collect()
        except pl.exceptions.PolarsError as error:
            raise unreadable(scanned, error) from None
        analysis = analyze_trace(replace(scanned, events=events.lazy()), options)
    for message in analysis.summary.warnings:
        warn(message)
    return analysis, events


def compare_plots(
    baseline: str,
    base: Analysis,
    candidates: dict[str, Analysis],
    comparisons: list[Comparison],
    directory: Path,
) -> str:
    """``compare --plots DIR``: the comparison's charts as SVG and PNG."""
    from servetrace.render.plots import compare_plots as write
    from servetrace.render.report import require_extra

    require_extra()
    links = write((baseline, base), list(candidates.items()), comparisons, directory)
    _wrote(directory)
    return links
