"""``servetrace capacity`` from Python: the runs of a sweep through the run model, then
the curve.

>>> report = servetrace.capacity(["sweep/"], goodput="ttft<=200ms")  # doctest: +SKIP
>>> report.capacity.rate  # req/s  # doctest: +SKIP

Each argument is found and read exactly as ``analyze`` finds runs
(``sources.runs.discover`` → ``runs.analyze.analyze_runs``): a result file is one run,
a run folder or a sweep folder gives one run per export (vLLM's ``benchmark_results.json``
and ``cumulative_results.md`` beside them are noted and skipped), and arguments are never
pooled into one trace. Each run brings what it declares (``Run.declared``): the offered
rate (``request_rate_per_s``), the GPUs (``gpus`` = tp × pp) and its label; throughput
over the declared duration where the trace has no send times. ``rates`` (one per run,
in the order the runs are found) replaces the declared rates; ``gpus`` replaces the
declared GPU count (and the report says where they differed). A summary-only run has
no per-request data, so no attainment: it is left out and named in the notes.
Ready-made ``RunPoint`` values are taken as they are.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from servetrace.analysis.capacity import CapacityReport, RunPoint, sweep
from servetrace.analysis.result import AnalysisOptions
from servetrace.api._analyze import GoodputLike, as_targets, ingest_options
from servetrace.errors import UsageError
from servetrace.runs.analyze import analyze_runs
from servetrace.runs.load import Settings
from servetrace.sources.inputs import resolve


def parse_attainment(text: str | float) -> float:
    """``90%`` or ``0.9`` → 0.9; a share in (0, 1]."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"--attainment {text!r} is not a share such as 90% or 0.9") from None
    if not (0 < value <= 1) or math.isnan(value):
        raise UsageError(f"--attainment {text!r} is not a share in (0, 100%]")
    return value


def _declared_gpus(declared: Mapping[str, Any]) -> int | None:
    value = declared.get("gpus")
    return int(value) if isinstance(value, int) and value > 0 else None


def _rate_of(declared: Mapping[str, Any]) -> float | None:
    value = declared.get("request_rate_per_s")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _sweeps(
    found: Sequence[Any], names: Sequence[str], points: Sequence[RunPoint]
) -> dict[str, str] | None:
    """Run label → sweep, when the runs are several sweeps side by side: they come from
    more than one folder and repeat an offered rate (vLLM's ``01_tp8_pp1/ 02_tp4_pp2/``,
    each a sweep of the same rates). One folder, or distinct rates, is one sweep."""
    folders = {name: run.source.where.parent for name, run in zip(names, found, strict=False)}
    placed = [p for p in points if p.offered_rate is not None]
    rates = [p.offered_rate for p in placed]
    if len(set(folders.values())) < 2 or len(set(rates)) == len(rates):
        return None
    short = {f: f.name or str(f) for f in folders.values()}
    if len(set(short.values())) < len(short):
        short = {f: str(f) for f in folders.values()}
    return {p.label: short[folders[p.label]] if p.label in folders else p.label for p in points}


def capacity(
    runs: Sequence[str | os.PathLike[str] | RunPoint],
    *,
    rates: Sequence[float | None] | None = None,
    labels: Sequence[str] | None = None,
    goodput: GoodputLike = (),
    attainment: str | float | None = 0.9,
    gpus: int | None = None,
    reading: Mapping[str, Any] | None = None,
) -> CapacityReport:
    """The throughput–latency curve, SLO attainment per offered rate and capacity."""
    if not runs:
        raise UsageError("capacity needs the runs of a sweep")
    given = [r for r in runs if isinstance(r, RunPoint)]
    paths = [os.fspath(r) for r in runs if not isinstance(r, RunPoint)]
    opts = dict(reading or {})
    settings = Settings(
        options=AnalysisOptions(goodput=as_targets(goodput)),
        ingest=ingest_options(opts.get("columns"), opts.get("time_unit"), opts.get("event_map")),
    )
    # Resolved per argument: two trace files are two runs, never one pooled trace.
    sources = [s for text in paths for s in resolve([text], opts.get("from_format"))]
    found = list(analyze_runs(sources, settings, None, sort=False)) if sources else []
    total = len(found) + len(given)
    if rates is not None and len(rates) != total:
        raise UsageError(
            f"{len(rates)} --rate values for {total} runs: give one per run",
            hint="runs are counted as analyze finds them (a sweep folder holds several)",
        )
    if labels is not None and len(labels) != total:
        raise UsageError(f"{len(labels)} --label values for {total} runs: give one per run")
    if labels is None and found:
        names = [run.label for run in found]
    else:
        names = list(labels or [])[: len(found)]
    points: list[RunPoint] = []
    notes: list[str] = []
    warnings: list[str] = []
    reported: list[str] = []
    overridden: list[str] = []
    for i, run in enumerate(found):
        warnings.extend(f"{names[i]}: {w}" for w in run.notes)
        if run.analysis is None:
            reported.append(names[i])
            continue
        warnings.extend(f"{names[i]}: {w}" for w in run.analysis.warnings)
        rate = rates[i] if rates is not None else _rate_of(run.declared)
        own = _declared_gpus(run.declared)
        if gpus is not None and own is not None and own != gpus:
            overridden.append(f"{names[i]} ({own})")
        points.append(
            RunPoint(
                names[i],
                rate,
                run.analysis,
                gpus=gpus if gpus is not None else own,
                declared={
                    k: float(v)
                    for k, v in run.declared.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)
                },
            )
        )
    for j, point in enumerate(given):
        at = len(found) + j
        if rates is not None or labels is not None:
            point = replace(
                point,
                label=labels[at] if labels is not None else point.label,
                offered_rate=rates[at] if rates is not None else point.offered_rate,
            )
        points.append(point)
    if reported:
        notes.append(
            "only the tool's summary (no per-request data, so no SLO attainment): left out: "
            + ", ".join(reported)
        )
    if overridden:
        notes.append(
            f"--gpus {gpus} replaces the declared GPU count (tp × pp) of " + ", ".join(overridden)
        )
    if not points:
        raise UsageError(
            f"{', '.join(paths)}: no run with per-request data: capacity needs each run's requests",
            hint="give the per-request exports the summaries were made from",
        )
    share = parse_attainment(attainment) if attainment is not None else None
    report = sweep(points, share, None, _sweeps(found, names, points))
    return replace(report, notes=(*notes, *report.notes), warnings=tuple(warnings))
