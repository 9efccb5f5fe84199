"""Options every trace-reading command shares, and the one function that loads a trace.

A trace is read natively (canonical schema, with column mapping) or through an importer
when ``--from FORMAT`` is given or a JSON file's content identifies a known tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.memory import Analysis, AnalysisOptions, analyze_events
from servetrace.cli._app import warn
from servetrace.errors import InputError
from servetrace.sources.canonical import IngestOptions, parse_mapping, resolve_paths
from servetrace.sources.registry import detect_format, engine_inputs, import_file

ColumnOpt = Annotated[
    list[str] | None,
    typer.Option(help="Map a canonical column to yours, e.g. 'ts=time_ms'; repeatable."),
]
TimeUnitOpt = Annotated[
    str | None,
    typer.Option(help="Unit of numeric timestamps: ns, us, ms or s (default: ints ns, floats s)."),
]
EventMapOpt = Annotated[
    list[str] | None,
    typer.Option(help="Map your event name to a kind, e.g. 'enqueue=arrival'; repeatable."),
]
FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from",
        help="Read another tool's export: aiperf, genai-perf, vllm-bench, "
        "guidellm, llmperf, otlp, sglang, trtllm, mlcommons (default: canonical trace, "
        "or detected from content).",
    ),
]

JSON_SUFFIXES = (".json", ".jsonl", ".gz")


def ingest_options(
    column: list[str] | None, time_unit: str | None, event_map: list[str] | None
) -> IngestOptions:
    return IngestOptions(
        columns=parse_mapping(column or [], "--column"),
        time_unit=time_unit,
        event_map=parse_mapping(event_map or [], "--event-map"),
    )


def _importable(paths: list[Path], from_format: str | None) -> str | None:
    """The foreign format to import these files with, or None for a canonical trace."""
    if from_format:
        return from_format
    if not all(p.suffix.lower() in JSON_SUFFIXES for p in paths):
        return None
    detected = {p: detect_format(p) for p in paths}
    formats = set(detected.values())
    if formats == {None}:
        return None
    if len(formats) == 1:
        return formats.pop()
    listed = "; ".join(f"{p}: {fmt or 'not a known export'}" for p, fmt in detected.items())
    raise InputError(
        f"the inputs are not all the same kind of file ({listed})",
        hint="give one tool's per-request exports at a time (and --from FORMAT if needed)",
    )


def load_analysis(
    traces: list[str],
    options: AnalysisOptions,
    column: list[str] | None = None,
    time_unit: str | None = None,
    event_map: list[str] | None = None,
    from_format: str | None = None,
    streaming: bool | None = False,
    batch_rows: int | None = None,
    by: str | None = None,
) -> Analysis:
    ingest = ingest_options(column, time_unit, event_map)
    # Engine exports (a folder of rotated files, an SQLite database) before canonical parts.
    engine = engine_inputs(traces, from_format)
    fmt: str | None
    if engine is not None:
        fmt, paths = engine
    else:
        paths = resolve_paths(traces)
        fmt = _importable(paths, from_format)
    if fmt is None:
        return analyze_paths(traces, ingest, options, streaming, batch_rows, by)
    results = [import_file(path, fmt) for path in paths]
    for result in results:
        for message in result.warnings:
            warn(f"{result.path}: {message}")
    events = pl.concat([r.events for r in results], how="diagonal_relaxed")
    return analyze_events(events, options, inputs=tuple(traces))


def load_reported(
    path: str,
    options: AnalysisOptions,
    column: list[str] | None,
    time_unit: str | None,
    event_map: list[str] | None,
    from_format: str | None,
) -> Analysis:
    """One trace of several (compare, check): its warnings name the file they are about."""
    analysis = load_analysis([path], options, column, time_unit, event_map, from_format)
    for message in analysis.summary.warnings:
        warn(f"{path}: {message}")
    return analysis
