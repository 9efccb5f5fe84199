"""Analyse runs: each ``RunSource`` → one ``Run`` (a GuideLLM file of several
benchmarks → one per benchmark), labelled and sorted by declared load; or, with
``pool``, every run's events in one trace with ids made unique per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from servetrace.analysis import memory
from servetrace.analysis.dispatch import analyze_paths
from servetrace.api._analyze import Analysis, _imported
from servetrace.errors import UsageError
from servetrace.runs.declared import declared_for
from servetrace.runs.labels import make_labels
from servetrace.runs.model import Run, Runs, RunSource, empty_declared
from servetrace.runs.reported import reported_run
from servetrace.runs.throughput import with_declared_window
from servetrace.sources.canonical import IngestOptions
from servetrace.sources.canonical import read_events as scan_events
from servetrace.sources.registry import import_file


@dataclass(frozen=True)
class Settings:
    options: memory.AnalysisOptions
    ingest: IngestOptions
    by: str | None = None
    streaming: bool | None = None
    batch_rows: int | None = None


@dataclass(frozen=True)
class _Part:
    source: RunSource
    declared: dict[str, Any]
    analysis: Analysis | None
    reported: dict[str, Any] | None
    benchmark: int | None


def _split_benchmarks(events: pl.DataFrame) -> list[tuple[int | None, pl.DataFrame]]:
    if "benchmark" not in events.columns:
        return [(None, events)]
    values = events["benchmark"].drop_nulls().unique().sort().to_list()
    if len(values) < 2:
        return [(None, events)]
    return [(int(v), events.filter(pl.col("benchmark") == v)) for v in values]


def _imported_parts(source: RunSource, settings: Settings) -> list[_Part]:
    path = source.paths[0]
    assert source.fmt is not None
    result = import_file(path, source.fmt)
    notes = (*source.notes, *(f"{path}: {m}" for m in result.warnings))
    parts = (
        _split_benchmarks(result.events) if source.fmt == "guidellm" else [(None, result.events)]
    )
    out = []
    for benchmark, events in parts:
        declared = declared_for(source.fmt, path, result.tool_summary, benchmark)
        engine = memory.analyze_events(events, settings.options, inputs=(str(path),))
        engine = with_declared_window(engine, declared)
        if engine.summary.window_source == "declared":  # the importer could not know
            notes = tuple(
                n.replace(
                    "throughput and concurrency are unavailable",
                    "throughput uses the run's declared duration, concurrency is unavailable",
                )
                for n in notes
            )
        groups = memory.summarize_by(engine, settings.by, settings.options) if settings.by else None
        analysis = Analysis(
            engine=engine, by=settings.by, groups=groups, read_warnings=notes, declared=declared
        )
        out.append(_Part(source, declared, analysis, None, benchmark))
    return out


def _trace_part(source: RunSource, settings: Settings) -> _Part:
    """A canonical event log (or an engine's export): one trace, read as before."""
    notes: tuple[str, ...] = source.notes
    texts = list(source.texts) or [str(p) for p in source.paths]
    if source.fmt is None:
        engine = analyze_paths(
            texts,
            settings.ingest,
            settings.options,
            settings.streaming,
            settings.batch_rows,
            settings.by,
        )
    else:
        events, read_notes = _imported(
            list(source.paths), source.fmt, settings.ingest.columns, settings.ingest.time_unit
        )
        notes = (*notes, *read_notes)
        engine = memory.analyze_events(events, settings.options, inputs=tuple(texts))
    groups = memory.summarize_by(engine, settings.by, settings.options) if settings.by else None
    declared = empty_declared()
    declared["tool"] = source.fmt or "servetrace"
    analysis = Analysis(
        engine=engine, by=settings.by, groups=groups, read_warnings=notes, declared=None
    )
    return _Part(source, declared, analysis, None, None)


def _parts(source: RunSource, settings: Settings) -> list[_Part]:
    from servetrace.sources.runs import RUN_FORMATS

    if source.summary_only:
        reported, declared = reported_run(source)
        return [_Part(source, declared, None, reported, None)]
    if source.fmt in RUN_FORMATS and len(source.paths) == 1:
        return _imported_parts(source, settings)
    return [_trace_part(source, settings)]


def analyze_runs(
    sources: Sequence[RunSource],
    settings: Settings,
    labels: Sequence[str] | None = None,
    *,
    sort: bool = True,
) -> Runs:
    """One ``Run`` per source (per benchmark of a GuideLLM file), sorted by declared load
    (``sort=False``: in the order found, for callers pairing runs with per-run flags)."""
    parts = [part for source in sources for part in _parts(source, settings)]
    if labels:
        if len(labels) != len(parts):
            raise UsageError(
                f"{len(labels)} --label given for {len(parts)} runs",
                hint="give one --label per run, in the order the runs are found, or none",
            )
        names = list(labels)
    else:
        names = make_labels(
            [p.source.where for p in parts],
            [None if p.benchmark is None else str(p.benchmark) for p in parts]
            if any(p.benchmark is not None for p in parts)
            else None,
        )
    runs = [
        Run(
            label=name,
            source=part.source,
            declared=part.declared,
            analysis=part.analysis,
            reported=part.reported,
            notes=part.source.notes,
        )
        for name, part in zip(names, parts, strict=True)
    ]
    if sort:
        runs.sort(key=lambda run: run.load_key)
    return Runs(runs=tuple(runs))


def _events_of(source: RunSource, settings: Settings) -> list[pl.DataFrame]:
    if source.summary_only:
        raise UsageError(
            f"{source.summary}: a summary has no requests to pool",
            hint="give the per-request files, or analyse without --pool",
        )
    if source.fmt is None:
        texts = list(source.texts) or [str(p) for p in source.paths]
        trace = scan_events(texts, settings.ingest)
        try:
            return [trace.events.collect()]
        except pl.exceptions.PolarsError as error:
            raise memory.unreadable(trace, error) from None
    events, _ = _imported(
        list(source.paths), source.fmt, settings.ingest.columns, settings.ingest.time_unit
    )
    return (
        [frame for _, frame in _split_benchmarks(events)] if source.fmt == "guidellm" else [events]
    )


def pool_runs(
    sources: Sequence[RunSource], settings: Settings, labels: Sequence[str] | None = None
) -> Analysis:
    """All runs as one trace (``--pool``): ``request_id`` becomes ``LABEL:ID`` and a
    ``run`` column holds the label, so ``--by run`` splits the pool again."""
    frames: list[pl.DataFrame] = []
    wheres = []
    for source in sources:
        for frame in _events_of(source, settings):
            frames.append(frame)
            wheres.append(source.where)
    names = list(labels) if labels else make_labels(wheres)
    if len(names) != len(frames):
        raise UsageError(f"{len(names)} --label given for {len(frames)} runs")
    tagged = [
        frame.with_columns(
            request_id=pl.format("{}:{}", pl.lit(name), pl.col("request_id").cast(pl.Utf8)),
            run=pl.lit(name),
        )
        for name, frame in zip(names, frames, strict=True)
    ]
    events = pl.concat(tagged, how="diagonal_relaxed")
    inputs = tuple(str(w) for w in wheres)
    engine = memory.analyze_events(events, settings.options, inputs=inputs)
    groups = memory.summarize_by(engine, settings.by, settings.options) if settings.by else None
    note = f"{len(frames)} runs pooled into one trace (--pool); request ids are LABEL:ID"
    return Analysis(engine=engine, by=settings.by, groups=groups, read_warnings=(note,))
