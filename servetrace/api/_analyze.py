"""``servetrace.analyze``, ``analyze_runs`` and ``read_events``: inputs of any kind → results.

Each resolves its arguments once (``sources.inputs.resolve``) and loads every run the one
way ``runs.load`` does, so a Python user gets the CLI's numbers for every input the CLI
accepts.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import polars as pl

from servetrace.analysis.fluidity import FluidityTargets, parse_targets
from servetrace.analysis.memory import summarize_by
from servetrace.analysis.partial_io import write_partial
from servetrace.analysis.partial_merge import finish
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.summary import GoodputTarget
from servetrace.analysis.window import WindowSpec
from servetrace.errors import UsageError
from servetrace.rules.grammar import parse_goodput_target
from servetrace.runs.analyze import analyze_runs as load_runs
from servetrace.runs.analyze import pool_runs
from servetrace.runs.load import Settings, collected, shard_partial
from servetrace.runs.model import Runs
from servetrace.settings import Engine
from servetrace.sources.canonical import IngestOptions
from servetrace.sources.inputs import resolve

DEFAULTS = AnalysisOptions()

PathsLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
GoodputLike = Sequence[GoodputTarget | str]

log = logging.getLogger("servetrace")


def path_texts(paths: PathsLike) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    texts = [os.fspath(p) for p in paths]
    if not texts:
        raise UsageError("no trace given")
    return texts


def ingest_options(
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
) -> IngestOptions:
    return IngestOptions(
        columns=dict(columns or {}), time_unit=time_unit, event_map=dict(event_map or {})
    )


def as_targets(goodput: GoodputLike) -> tuple[GoodputTarget, ...]:
    if isinstance(goodput, str):
        goodput = [goodput]
    return tuple(t if isinstance(t, GoodputTarget) else parse_goodput_target(t) for t in goodput)


def require_number(name: str, value: float, low: float, high: float = math.inf) -> None:
    """The API's counterpart of the CLI's ``in_range``: NaN, ±inf, out of range → UsageError."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (real and math.isfinite(value) and low <= value <= high):
        raise UsageError(f"{name} must be a finite number in [{low:g}, {high:g}] (got {value})")


def settings_of(
    *,
    by: str | None = None,
    goodput: GoodputLike = (),
    formula_abs_tol_ns: int | None = None,
    formula_rel_tol: float | None = None,
    streaming: bool | None = None,
    batch_rows: int | None = None,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    window: str | WindowSpec | None = None,
    steady_state: bool = False,
    slice_ns: int | None = None,
    fluidity: str | FluidityTargets | None = None,
    engine: Engine | str = Engine.local,
    ray_address: str | None = None,
) -> Settings:
    """How to analyse, from the API's keyword arguments (each checked as the CLI checks it)."""
    given = {
        name: value
        for name, value in (
            ("formula_abs_tol_ns", formula_abs_tol_ns),
            ("formula_rel_tol", formula_rel_tol),
        )
        if value is not None
    }
    if formula_abs_tol_ns is not None:
        require_number("formula_abs_tol_ns", formula_abs_tol_ns, 0, 2**63 - 1)
    if formula_rel_tol is not None:
        require_number("formula_rel_tol", formula_rel_tol, 0)
    if batch_rows is not None:
        require_number("batch_rows", batch_rows, 1000, 2**63 - 1)
    if window is not None and steady_state:
        raise UsageError("--window and --steady-state exclude each other: give one")
    try:
        chosen = Engine(engine)
    except ValueError:
        raise UsageError(f"engine must be 'local' or 'ray', got {engine!r}") from None
    return Settings(
        options=AnalysisOptions(
            goodput=as_targets(goodput),
            formula_abs_tol_ns=int(given.get("formula_abs_tol_ns", DEFAULTS.formula_abs_tol_ns)),
            formula_rel_tol=float(given.get("formula_rel_tol", DEFAULTS.formula_rel_tol)),
            explicit=frozenset(given),
            fluidity=parse_targets(fluidity) if isinstance(fluidity, str) else fluidity,
        ),
        ingest=ingest_options(columns, time_unit, event_map),
        by=by,
        streaming=streaming,
        batch_rows=batch_rows,
        window=window,
        steady_state=steady_state,
        slice_ns=slice_ns,
        engine=chosen,
        ray_address=ray_address,
    )


def analyze_runs(
    paths: PathsLike,
    *,
    from_format: str | None = None,
    labels: Sequence[str] | None = None,
    pool: bool = False,
    steps: str | os.PathLike[str] | None = None,
    steps_from: str | None = None,
    **options: Any,
) -> Runs:
    """Analyse every run the inputs hold: one ``Run`` each, sorted by declared load.

    A run is one tool export (a vLLM result file, an AIPerf/GenAI-Perf/GuideLLM run
    folder, one GuideLLM benchmark), one canonical event log (files, globs, directories
    of parts, object-store URIs) or a set of partial results (merged). Each ``Run`` has
    its ``label`` (``labels``, else the path parts that differ), ``declared`` facts and
    ``analysis`` (None for a tool's summary alone, whose numbers are in ``reported``).
    ``pool=True`` pools the runs into one, request ids made unique per run (``LABEL:ID``,
    and a ``run`` column). ``steps`` (a step file, format ``steps_from`` or detected)
    joins the one run's inter-token gaps to the engine's steps (``Analysis.stalls``).
    ``options`` are ``analyze``'s.
    """
    settings = settings_of(**options)
    if steps is not None:  # the stall join reads the timeline's ticks: keep them
        settings = replace(settings, options=replace(settings.options, keep_ticks=True))
    sources = resolve(path_texts(paths), from_format)
    if pool and len(sources) > 1:
        runs = pool_runs(sources, settings, labels)
    else:
        runs = load_runs(sources, settings, labels)
    if steps is None:
        return runs
    from servetrace.api._stalls import with_stalls

    analysis = one_run(runs, path_texts(paths))
    joined = with_stalls(analysis, steps, steps_from)
    return replace(runs, runs=(replace(runs[0], analysis=joined),))


def analyze(
    paths: PathsLike,
    *,
    by: str | None = None,
    goodput: GoodputLike = (),
    formula_abs_tol_ns: int | None = None,
    formula_rel_tol: float | None = None,
    streaming: bool | None = None,
    batch_rows: int | None = None,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
    pool: bool = False,
    window: str | WindowSpec | None = None,
    steady_state: bool = False,
    slice_ns: int | None = None,
    fluidity: str | FluidityTargets | None = None,
    engine: Engine | str = Engine.local,
    ray_address: str | None = None,
    steps: str | os.PathLike[str] | None = None,
    steps_from: str | None = None,
) -> Analysis:
    """Analyse one run (``analyze_runs`` for several, or ``pool=True`` to pool them into
    one, request ids made unique per run): its ``Analysis``.

    ``streaming``: True reads in batches of ``batch_rows``, False in memory, None (the
    CLI's default) streams traces of 30 million events or more. ``by`` adds one summary
    per value of that request column. ``window`` (``"60:600"``, seconds from the trace
    start, or timestamps) or ``steady_state`` analyse only the requests arriving in it;
    ``slice_ns`` adds per-slice figures; ``fluidity`` (``"ttft=500ms,tbt=50ms"``) Etalon's
    fluidity-index; ``steps`` (a step file, ``steps_from`` its format, default detected)
    adds ``stalls``: where the ITL stalls come from. Raises ``InputError`` (unreadable
    input) or ``UsageError`` (bad option, or inputs that are not one run), never a Polars
    error.
    """
    runs = analyze_runs(
        paths,
        from_format=from_format,
        pool=pool,
        by=by,
        goodput=goodput,
        formula_abs_tol_ns=formula_abs_tol_ns,
        formula_rel_tol=formula_rel_tol,
        streaming=streaming,
        batch_rows=batch_rows,
        columns=columns,
        time_unit=time_unit,
        event_map=event_map,
        window=window,
        steady_state=steady_state,
        slice_ns=slice_ns,
        fluidity=fluidity,
        engine=engine,
        ray_address=ray_address,
        steps=steps,
        steps_from=steps_from,
    )
    return one_run(runs, path_texts(paths))


def one_run(runs: Runs, texts: Sequence[str]) -> Analysis:
    """The analysis of the one run ``runs`` holds; a usage error naming them otherwise."""
    if len(runs) == 1 and runs[0].analysis is not None:
        return runs[0].analysis
    given = ", ".join(texts)
    if len(runs) == 1:
        raise UsageError(
            f"{given}: only the tool's summary (no per-request file): there are no "
            "requests to analyse one by one",
            hint="give the per-request export the summary was made from",
        )
    labels = ", ".join(run.label for run in runs)
    raise UsageError(
        f"{given} holds {len(runs)} runs ({labels}); this needs one run",
        hint="name one run's file or folder (servetrace analyze --pool pools runs on purpose)",
    )


def analyze_shard(
    paths: PathsLike,
    partial_out: str | os.PathLike[str],
    *,
    from_format: str | None = None,
    by: str | None = None,
    **options: Any,
) -> Analysis:
    """Analyse one shard of a trace split by request, and write its mergeable partial
    result to ``partial_out`` (``docs/partials.md``): the report is the partial's own."""
    settings = settings_of(by=by, **options)
    sources = resolve(path_texts(paths), from_format)
    partial = shard_partial(sources, settings.ingest, settings.options)
    write_partial(partial, partial_out)
    analysis = finish(partial, settings.options)
    groups = summarize_by(analysis, by, settings.options) if by else None
    return replace(analysis, by=by, groups=groups)


def read_events(
    paths: PathsLike,
    *,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
) -> pl.DataFrame:
    """Canonical events (``request_id, event, ts, …``, ts in int ns) of traces or exports.

    Files, globs and directories of parts form one trace; every run found is read and
    their events concatenated. An importer's warnings go to the ``servetrace`` logger.
    """
    ingest = ingest_options(columns, time_unit, event_map)
    frames: list[pl.DataFrame] = []
    for source in resolve(path_texts(paths), from_format):
        read, notes = collected(source, ingest)
        frames += read
        for note in notes:
            log.warning("%s", note)
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
