"""Runs from resolved sources: each ``RunSource`` loaded (``load``), labelled and sorted by
declared load; or, with ``pool``, every run's events in one trace, ids made unique per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from servetrace.errors import UsageError
from servetrace.runs.declared import declared_for
from servetrace.runs.labels import make_labels
from servetrace.runs.load import Loaded, Settings, analyze_in_memory, collected, load
from servetrace.runs.model import Run, Runs
from servetrace.settings import Engine
from servetrace.sources.inputs import RunSource


def analyze_runs(
    sources: Sequence[RunSource],
    settings: Settings,
    labels: Sequence[str] | None = None,
    *,
    sort: bool = True,
) -> Runs:
    """One ``Run`` per source (per benchmark of a GuideLLM file), sorted by declared load
    (``sort=False``: in the order found, for callers pairing runs with per-run flags)."""
    parts = [part for source in sources for part in load(source, settings)]
    if labels:
        if len(labels) != len(parts):
            raise UsageError(
                f"{len(labels)} --label given for {len(parts)} runs",
                hint="give one --label per run, in the order the runs are found, or none",
            )
        names = list(labels)
    elif _own_names(parts):
        names = _own_names(parts)
    else:
        names = make_labels(
            [_named_by(p) for p in parts],
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


def _own_names(parts: Sequence[Loaded]) -> list[str]:
    """Each run's own name, when every run is a summary row naming itself (vLLM's ``Test
    name``, GuideLLM's strategy) and no two share one; else empty."""
    names = [str((p.reported or {}).get("run_name") or "") for p in parts]
    return names if all(names) and len(set(names)) == len(names) else []


def _named_by(part: Loaded) -> Path:
    """The path a run's label is made from: a row of a summary holding several runs (vLLM's
    ``benchmark_results.json``) is named by the row's own name (``Test name``), as if it were a
    file beside the summary, so its label reads like its per-request file's (``qps_04``)."""
    name = (part.reported or {}).get("run_name")
    where = part.source.where
    return where.parent / str(name) if name else where


def pool_runs(
    sources: Sequence[RunSource], settings: Settings, labels: Sequence[str] | None = None
) -> Runs:
    """All runs as one trace (``--pool``): ``request_id`` becomes ``LABEL:ID`` and a
    ``run`` column holds the label, so ``--by run`` splits the pool again."""
    if settings.engine is not Engine.local:
        raise UsageError("--pool reads every run's events: it needs the local engine")
    frames: list[pl.DataFrame] = []
    wheres = []
    for source in sources:
        for frame in collected(source, settings.ingest)[0]:
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
    note = f"{len(frames)} runs pooled into one trace (--pool); request ids are LABEL:ID"
    inputs = tuple(str(w) for w in wheres)
    analysis = analyze_in_memory(events, inputs, settings, (note,), None)
    pooled = RunSource(paths=tuple(dict.fromkeys(wheres)), fmt=None, texts=inputs)
    label = "pooled" if len(frames) > 1 else names[0]
    return Runs(runs=(Run(label, pooled, declared_for(None, None, None), analysis),))
