"""One ``RunSource`` → its ``Analysis`` (or the tool's reported numbers), the same way for
every command: the events read once (a canonical log scanned, an export imported), the
engine chosen (``analysis.dispatch``), the time options applied (``windowed``), the
groups summarised, and a reader of the events kept for the views that draw them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.memory import analyze_events, summarize_by, unreadable
from servetrace.analysis.partial import Partial, partial_of
from servetrace.analysis.partial_io import read_partial
from servetrace.analysis.partial_merge import combine, finish
from servetrace.analysis.partial_settings import ShardSettings
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.slices import slice_figures
from servetrace.analysis.window import Window, WindowSpec
from servetrace.analysis.window import restrict as restrict_to
from servetrace.errors import UsageError
from servetrace.runs.declared import declared_for
from servetrace.runs.throughput import DECLARED_DURATION_NOTE, with_declared_window
from servetrace.runs.time import windowed
from servetrace.settings import Engine
from servetrace.sources import blis, requests_table
from servetrace.sources.canonical import IngestOptions
from servetrace.sources.canonical import read_events as scan_trace
from servetrace.sources.inputs import RUN_FORMATS, RunSource
from servetrace.sources.registry import import_file, nesting_refused


@dataclass(frozen=True)
class Settings:
    """How every run of one command is analysed."""

    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    ingest: IngestOptions = field(default_factory=IngestOptions)
    by: str | None = None
    streaming: bool | None = None  # None: stream traces of 30 million events or more
    batch_rows: int | None = None
    window: str | WindowSpec | None = None
    steady_state: bool = False
    slice_ns: int | None = None
    engine: Engine = Engine.local
    ray_address: str | None = None

    @property
    def restricted(self) -> bool:
        return self.window is not None or self.steady_state or self.slice_ns is not None


def import_events(
    source: RunSource, ingest: IngestOptions
) -> tuple[pl.DataFrame, tuple[str, ...], dict[str, Any] | None]:
    """The events of an export (every path of ``source``), the importers' notes, and the
    tool's own aggregate figures the first file came with (its declared facts)."""
    assert source.fmt is not None
    if source.fmt == requests_table.FORMAT:  # the one importer whose columns the user names
        results = []
        for path in source.paths:
            with nesting_refused(path):
                results.append(requests_table.read(path, ingest.columns, ingest.time_unit))
    elif source.fmt == blis.FORMAT:  # its header may be named apart from its CSV
        results = [blis.read(path, source.summary) for path in source.paths]
    else:
        results = [import_file(p, source.fmt) for p in source.paths]
    notes = tuple(f"{r.path}: {message}" for r in results for message in r.warnings)
    events = pl.concat([r.events for r in results], how="diagonal_relaxed")
    return events, notes, results[0].tool_summary


def split_benchmarks(events: pl.DataFrame) -> list[tuple[int | None, pl.DataFrame]]:
    """A GuideLLM file's benchmarks, each one run (a file of one benchmark: itself)."""
    if "benchmark" not in events.columns:
        return [(None, events)]
    values = events["benchmark"].drop_nulls().unique().sort().to_list()
    if len(values) < 2:
        return [(None, events)]
    return [(int(v), events.filter(pl.col("benchmark") == v)) for v in values]


def collected(
    source: RunSource, ingest: IngestOptions
) -> tuple[list[pl.DataFrame], tuple[str, ...]]:
    """Every run's events of ``source`` collected (``--pool``, shards, ``read_events``),
    and what reading them said."""
    if source.summary_only or source.partials:
        what = "a summary" if source.summary_only else "a partial result"
        raise UsageError(
            f"{source.where}: {what} has no events",
            hint="give the per-request files or the trace itself",
        )
    if source.fmt is None:
        trace = scan_trace(source.trace_texts, ingest)
        try:
            return [trace.events.collect()], source.notes
        except pl.exceptions.PolarsError as error:
            raise unreadable(trace, error) from None
    events, notes, _ = import_events(source, ingest)
    frames = [f for _, f in split_benchmarks(events)] if source.fmt == "guidellm" else [events]
    return frames, (*source.notes, *notes)


@dataclass(frozen=True)
class Loaded:
    """One run as read: its analysis, or (a summary alone) the tool's numbers."""

    source: RunSource
    declared: dict[str, Any]
    analysis: Analysis | None
    reported: dict[str, Any] | None = None
    benchmark: int | None = None


def _finish(
    analysis: Analysis,
    settings: Settings,
    chosen: Window | None,
    scan: Callable[[], pl.LazyFrame] | None,
    notes: tuple[str, ...],
    declared: dict[str, Any] | None,
) -> Analysis:
    """The engine's analysis completed with the groups, slices and what the run says."""
    options = settings.options
    groups = summarize_by(analysis, settings.by, options) if settings.by else None
    slices = None
    if settings.slice_ns is not None:
        assert scan is not None
        ticks = scan() if chosen is None else restrict_to(scan(), chosen)
        origin = chosen.start_ns if chosen is not None else None
        slices = slice_figures(analysis, settings.slice_ns, origin, ticks, options.goodput)
    return replace(
        analysis,
        by=settings.by,
        groups=groups,
        read_warnings=(*analysis.read_warnings, *notes),
        declared=declared,
        window=chosen,
        slices=slices,
        fluidity=options.fluidity,
        events_reader=scan,
    )


def _canonical(source: RunSource, settings: Settings) -> Analysis:
    """A canonical event log (files, globs, directories of parts, object-store URIs)."""
    texts = source.trace_texts
    if settings.engine is Engine.ray:
        from servetrace.analysis.ray_engine import analyze_ray

        _refuse_restricted(settings, "--engine ray")
        result = analyze_ray(texts, settings.ingest, settings.options, settings.ray_address)
        return _finish(result, settings, None, None, source.notes, None)

    def scan() -> pl.LazyFrame:
        return scan_trace(texts, settings.ingest).events

    result, chosen = windowed(
        lambda keep: analyze_paths(
            texts,
            settings.ingest,
            settings.options,
            settings.streaming,
            settings.batch_rows,
            settings.by,
            keep,
        ),
        scan,
        settings.window,
        settings.steady_state,
    )
    return _finish(result, settings, chosen, scan, source.notes, None)


def analyze_in_memory(
    events: pl.DataFrame,
    inputs: tuple[str, ...],
    settings: Settings,
    notes: tuple[str, ...],
    declared: dict[str, Any] | None,
) -> Analysis:
    """Events already in memory (an export, pooled runs): analysed, windowed, completed."""
    lazy = events.lazy()

    def scan() -> pl.LazyFrame:
        return lazy

    result, chosen = windowed(
        lambda keep: analyze_events(
            events if keep is None else keep(lazy), settings.options, inputs=inputs
        ),
        scan,
        settings.window,
        settings.steady_state,
    )
    if declared is not None:
        result = with_declared_window(result, declared)
        if result.summary.window_source == "declared":  # the importer could not know
            told = tuple(
                n.replace(
                    "throughput and concurrency are unavailable",
                    "throughput uses the run's declared duration, concurrency is unavailable",
                )
                for n in notes
            )
            if told != notes:  # the importer's note now says it: say it once
                result = _without_warning(result, DECLARED_DURATION_NOTE)
            notes = told
    return _finish(result, settings, chosen, scan, notes, declared)


def _without_warning(result: Analysis, message: str) -> Analysis:
    summary = result.summary
    kept = tuple(w for w in summary.warnings if w != message)
    return replace(result, summary=replace(summary, warnings=kept))


def _refuse_restricted(settings: Settings, what: str) -> None:
    if settings.restricted:
        raise UsageError(
            f"{what}: --window, --steady-state and --slice need the events",
            hint="analyse the trace itself (the local engine) for a time-restricted report",
        )


def _partials(source: RunSource, settings: Settings) -> Analysis:
    _refuse_restricted(settings, "partials")
    if settings.engine is Engine.ray:
        raise UsageError("--engine ray analyses traces; these inputs are partial results")
    part = merged_partial(source.paths)
    # The shards' own settings, where the merge is given none (goodput in --by too).
    settings = replace(settings, options=part.settings.applied(settings.options))
    merged = finish(part, settings.options)
    by = settings.by
    if by and merged.gaps.height == 0 and (merged.summary.metrics["itl"]["count"] or 0) > 0:
        raise UsageError(
            f"--by {by}: these ITL gaps were kept as one histogram, not per group",
            hint="use --by on the trace itself, or on partials of fewer than "
            "4,000,000 ITL gaps in all",
        )
    return _finish(merged, settings, None, None, source.notes, None)


def merged_partial(paths: Sequence[Path]) -> Partial:
    """Partial results of request-split shards, read and combined into one."""
    return combine([read_partial(path) for path in paths])


def merge_partials(texts: Sequence[str], output: Path | None) -> list[str]:
    """``servetrace merge``: the partials ``texts`` name (paths or globs on this machine),
    merged into ``output`` when given; returns what to analyse as the whole trace."""
    from servetrace.analysis.partial_io import check_partial_output, write_partial
    from servetrace.errors import InputError
    from servetrace.outputs import refuse_overwriting_inputs
    from servetrace.sources.inputs import is_partial, resolve
    from servetrace.sources.paths import has_magic

    for text in texts:  # name the first input that is not a partial, and why
        if not has_magic(text) and not is_partial(text):
            read_partial(text)
    sources = resolve(list(texts))
    if not sources[0].partials:
        raise InputError(f"{', '.join(texts)}: no partial found")
    found = list(sources[0].paths)
    if output is None:
        return [str(p) for p in found]
    check_partial_output(output, "--output")
    refuse_overwriting_inputs([("--output", output)], [str(p) for p in found])
    if any(Path(output).resolve() == p.resolve() for p in found):
        raise UsageError(f"--output {output}: is one of the partials merged")
    write_partial(merged_partial(found), output)
    return [str(output)]


def load(source: RunSource, settings: Settings) -> list[Loaded]:
    """The runs of one source: one, or one per benchmark of a GuideLLM file."""
    if source.summary_only:
        from servetrace.runs.reported import reported_run

        reported, declared = reported_run(source)
        return [Loaded(source, declared, None, reported)]
    if source.partials:
        return [Loaded(source, _declared(None), _partials(source, settings))]
    if source.fmt is None:
        return [Loaded(source, _declared(None), _canonical(source, settings))]
    if settings.engine is Engine.ray:
        raise UsageError(
            f"--engine ray reads canonical Parquet event logs, not {source.fmt} exports",
            hint="convert the export first: servetrace import … -o trace.parquet",
        )
    events, read_notes, tool_summary = import_events(source, settings.ingest)
    notes = (*source.notes, *read_notes)
    inputs = tuple(source.trace_texts)
    if source.fmt not in RUN_FORMATS or len(source.paths) != 1:  # an engine's export
        analysis = analyze_in_memory(events, inputs, settings, notes, None)
        return [Loaded(source, _declared(source.fmt), analysis)]
    path = source.paths[0]
    parts = split_benchmarks(events) if source.fmt == "guidellm" else [(None, events)]
    out = []
    for benchmark, frame in parts:
        declared = declared_for(source.fmt, path, tool_summary, benchmark)
        analysis = analyze_in_memory(frame, (str(path),), settings, notes, declared)
        out.append(Loaded(source, declared, analysis, None, benchmark))
    return out


def _declared(fmt: str | None) -> dict[str, Any]:
    return declared_for(fmt, None, None)


def shard_partial(
    sources: list[RunSource], ingest: IngestOptions, options: AnalysisOptions
) -> Partial:
    """One shard (its canonical events, or an export's) as a mergeable partial result,
    recording the settings it is read and reported with."""
    frames: list[pl.DataFrame] = []
    notes: tuple[str, ...] = ()
    for source in sources:
        read, said = collected(source, ingest)
        frames += read
        notes += said
    inputs = tuple(text for source in sources for text in source.trace_texts)
    settings = ShardSettings.of(ingest.event_map, options)
    return partial_of(pl.concat(frames, how="diagonal_relaxed"), inputs, notes, settings=settings)
