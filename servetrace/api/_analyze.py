"""``servetrace.analyze`` and ``servetrace.read_events``: inputs of any kind → ``Analysis``."""

from __future__ import annotations

import logging
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from servetrace.analysis import memory
from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.fluidity import FluidityTargets, parse_targets
from servetrace.analysis.slices import slice_figures
from servetrace.analysis.summary import GoodputTarget, Summary
from servetrace.analysis.window import Window, WindowSpec
from servetrace.analysis.window import restrict as restrict_to
from servetrace.api import _partials
from servetrace.api._time import windowed
from servetrace.errors import UsageError
from servetrace.render.summary import report_dict
from servetrace.render.time_report import time_dict
from servetrace.rules.grammar import parse_goodput_target
from servetrace.sources import detect, requests_table
from servetrace.sources.canonical import IngestOptions
from servetrace.sources.canonical import read_events as scan_events
from servetrace.sources.registry import import_file

if TYPE_CHECKING:
    from servetrace.runs.model import Runs

PathsLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
GoodputLike = Sequence[GoodputTarget | str]

log = logging.getLogger("servetrace")


@dataclass(frozen=True)
class Analysis:
    """One analysed trace: its summary, per-request and quarantine frames, the JSON report.

    ``summary`` holds integer ns; ``groups`` one ``Summary`` per value of ``by`` (each over
    its own span), or None; ``warnings`` what reading the files and the analysis found.
    """

    engine: memory.Analysis  # the core result (timeline, gaps); what compare/check consume
    by: str | None = None
    groups: Mapping[object, Summary] | None = None
    read_warnings: tuple[str, ...] = field(default_factory=tuple)
    # What the run declares about itself (servetrace.runs.model): tool, model, offered
    # rate, concurrency, duration…; None for a canonical trace.
    declared: Mapping[str, Any] | None = None
    window: Window | None = None  # --window / --steady-state: what was analysed
    slices: pl.DataFrame | None = None  # --slice: analysis.slices.slice_figures
    fluidity: FluidityTargets | None = None  # --fluidity: Etalon's per-token deadlines

    @property
    def summary(self) -> Summary:
        return self.engine.summary

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.engine.inputs

    @property
    def requests(self) -> pl.DataFrame:
        """One row per valid request (the ``--requests-out`` frame)."""
        return self.engine.requests_out()

    @property
    def quarantine(self) -> pl.DataFrame:
        """Input rows not analysed, each with its ``rule`` (the ``--quarantine-out`` frame)."""
        return self.engine.quarantine()

    @property
    def warnings(self) -> tuple[str, ...]:
        return (*self.read_warnings, *self.summary.warnings)

    def to_dict(self, naming: str = "servetrace") -> dict[str, Any]:
        """The report of ``servetrace analyze --format json`` (same keys, same numbers)."""
        report = report_dict(self.summary, self.inputs, self.groups, self.by, naming)
        if self.declared is not None:
            from servetrace.runs.declared import declared_dict

            report["declared"] = declared_dict(self.declared)
        return {**report, **time_dict(self.engine, self.window, self.slices, self.fluidity)}


# ------------------------------------------------------------------------------ inputs


def path_texts(paths: PathsLike) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    texts = [os.fspath(p) for p in paths]
    if not texts:
        raise UsageError("no trace given")
    return texts


def _ingest(
    columns: Mapping[str, str] | None,
    time_unit: str | None,
    event_map: Mapping[str, str] | None,
) -> IngestOptions:
    return IngestOptions(
        columns=dict(columns or {}), time_unit=time_unit, event_map=dict(event_map or {})
    )


def as_targets(goodput: GoodputLike) -> tuple[GoodputTarget, ...]:
    if isinstance(goodput, str):
        goodput = [goodput]
    return tuple(t if isinstance(t, GoodputTarget) else parse_goodput_target(t) for t in goodput)


def _imported(
    paths: list[Path],
    fmt: str,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
) -> tuple[pl.DataFrame, tuple[str, ...]]:
    if fmt == requests_table.FORMAT:  # the one importer whose columns the user names
        results = [requests_table.read(path, columns, time_unit) for path in paths]
    else:
        results = [import_file(path, fmt) for path in paths]
    notes = tuple(f"{r.path}: {message}" for r in results for message in r.warnings)
    return pl.concat([r.events for r in results], how="diagonal_relaxed"), notes


def read_events(
    paths: PathsLike,
    *,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
) -> pl.DataFrame:
    """Canonical events (``request_id, event, ts, …``, ts in int ns) of traces or exports.

    Files, globs and directories of parts form one trace. Another tool's export is
    imported (detected by content, or named by ``from_format``); its importer's warnings go
    to the ``servetrace`` logger.
    """
    texts = path_texts(paths)
    fmt, resolved = detect.inputs(texts, from_format)
    if fmt is not None:
        events, notes = _imported(resolved, fmt, columns, time_unit)
        for note in notes:
            log.warning(note)
        return events
    trace = scan_events(texts, _ingest(columns, time_unit, event_map))
    try:
        return trace.events.collect()
    except pl.exceptions.PolarsError as error:
        raise memory.unreadable(trace, error) from None


def require_number(name: str, value: float, low: float, high: float = math.inf) -> None:
    """The API's counterpart of the CLI's ``in_range``: NaN, ±inf, out of range → UsageError."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (real and math.isfinite(value) and low <= value <= high):
        raise UsageError(f"{name} must be a finite number in [{low:g}, {high:g}] (got {value})")


def analyze(
    paths: PathsLike,
    *,
    by: str | None = None,
    goodput: GoodputLike = (),
    formula_abs_tol_ns: int = 1_000_000,
    formula_rel_tol: float = 0.01,
    streaming: bool | None = None,
    batch_rows: int | None = None,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
    labels: Sequence[str] | None = None,
    pool: bool = False,
    window: str | WindowSpec | None = None,
    steady_state: bool = False,
    slice_ns: int | None = None,
    fluidity: str | FluidityTargets | None = None,
    engine: str = "local",
    ray_address: str | None = None,
) -> Analysis | Runs:
    """Analyse one trace or one run — or several runs, one ``Run`` each.

    A run is one tool export (a vLLM result file, an AIPerf/GenAI-Perf/GuideLLM run
    folder, one GuideLLM benchmark) or one canonical event log (files, globs,
    directories of parts). One run → ``Analysis``; several (a folder of runs, a sweep,
    ``qps_*.json``) → ``servetrace.runs.Runs``, sorted by declared load, each ``Run``
    with its ``label`` (``labels``, else the path parts that differ), ``declared``
    facts and ``analysis``. ``pool=True`` pools the runs into one ``Analysis`` with
    request ids made unique per run (``LABEL:ID``, and a ``run`` column).

    ``streaming``: True reads in batches of ``batch_rows``, False in memory, None (the
    CLI's default) streams traces of 30 million events or more. ``by`` adds one summary
    per value of that request column. ``window`` (``"60:600"``, seconds from the trace
    start, or timestamps) or ``steady_state`` analyse only the requests arriving in it;
    ``slice_ns`` adds per-slice figures; ``fluidity`` (``"ttft=500ms,tbt=50ms"``) Etalon's
    fluidity-index. Raises ``InputError`` (unreadable input) or
    ``UsageError`` (bad option), never a Polars error.
    """
    from servetrace.runs.analyze import Settings, analyze_runs, pool_runs
    from servetrace.sources.runs import discover

    require_number("formula_abs_tol_ns", formula_abs_tol_ns, 0, 2**63 - 1)
    require_number("formula_rel_tol", formula_rel_tol, 0)
    if batch_rows is not None:
        require_number("batch_rows", batch_rows, 1000, 2**63 - 1)
    options = memory.AnalysisOptions(
        goodput=as_targets(goodput),
        formula_abs_tol_ns=int(formula_abs_tol_ns),
        formula_rel_tol=float(formula_rel_tol),
        fluidity=parse_targets(fluidity) if isinstance(fluidity, str) else fluidity,
    )
    texts = path_texts(paths)
    restricted = window is not None or steady_state or slice_ns is not None
    if engine != "local" or _partials.partial_paths(texts) is not None:
        return _partials.analysis_elsewhere(
            texts,
            options,
            by,
            engine,
            ray_address,
            restricted or pool,
            _ingest(columns, time_unit, event_map),
            from_format,
        )
    if restricted:
        # Time restrictions describe one trace's timeline: one run at a time.
        return _analyze_in_time(
            texts,
            options,
            by,
            streaming,
            batch_rows,
            columns,
            time_unit,
            event_map,
            from_format,
            window,
            steady_state,
            slice_ns,
        )
    settings = Settings(
        options=options,
        ingest=_ingest(columns, time_unit, event_map),
        by=by,
        streaming=streaming,
        batch_rows=batch_rows,
    )
    sources = discover(texts, from_format)
    if pool and len(sources) > 1:
        return pool_runs(sources, settings, labels)
    runs = analyze_runs(sources, settings, labels)
    if len(runs) == 1 and runs[0].analysis is not None:
        return replace(runs[0].analysis, fluidity=options.fluidity)
    return runs


def _analyze_in_time(
    texts: list[str],
    options: memory.AnalysisOptions,
    by: str | None,
    streaming: bool | None,
    batch_rows: int | None,
    columns: Mapping[str, str] | None,
    time_unit: str | None,
    event_map: Mapping[str, str] | None,
    from_format: str | None,
    window: str | WindowSpec | None,
    steady_state: bool,
    slice_ns: int | None,
) -> Analysis:
    """One trace analysed over a window (given or the steady state), with slices."""
    fmt, resolved = detect.inputs(texts, from_format)
    notes: tuple[str, ...] = ()
    if fmt is None:
        ingest = _ingest(columns, time_unit, event_map)

        def scan() -> pl.LazyFrame:
            return scan_events(texts, ingest).events

        engine, chosen = windowed(
            lambda keep: analyze_paths(texts, ingest, options, streaming, batch_rows, by, keep),
            scan,
            window,
            steady_state,
        )
    else:
        imported, notes = _imported(resolved, fmt, columns, time_unit)

        def scan() -> pl.LazyFrame:
            return imported.lazy()

        engine, chosen = windowed(
            lambda keep: memory.analyze_events(
                imported if keep is None else keep(imported.lazy()), options, inputs=tuple(texts)
            ),
            scan,
            window,
            steady_state,
        )
    groups = memory.summarize_by(engine, by, options) if by else None
    slices = None
    if slice_ns is not None:
        ticks = scan() if chosen is None else restrict_to(scan(), chosen)
        origin = chosen.start_ns if chosen is not None else None
        slices = slice_figures(engine, slice_ns, origin, ticks, options.goodput)
    return Analysis(
        engine=engine,
        by=by,
        groups=groups,
        read_warnings=notes,
        window=chosen,
        slices=slices,
        fluidity=options.fluidity,
    )


def analyze_one(paths: PathsLike, **options: Any) -> Analysis:
    """``analyze`` for callers that need one trace (compare, check): several runs, or a
    summary without requests, are a usage error naming them."""
    result = analyze(paths, **options)
    if isinstance(result, Analysis):
        return result
    labels = ", ".join(run.label for run in result)
    if len(result) == 1:
        raise UsageError(
            f"{', '.join(path_texts(paths))}: only the tool's summary (no per-request "
            "file): there are no requests to compare or check",
            hint="give the per-request export the summary was made from",
        )
    raise UsageError(
        f"{', '.join(path_texts(paths))} holds {len(result)} runs ({labels}); this needs one run",
        hint="name one run's file or folder (servetrace analyze --pool pools runs on purpose)",
    )
