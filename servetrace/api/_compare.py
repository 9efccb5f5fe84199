"""``servetrace.compare``: two traces (paths or analyses) → ``Comparison``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from servetrace.analysis.result import Analysis
from servetrace.analysis.summary import GoodputTarget
from servetrace.api._analyze import (
    GoodputLike,
    PathsLike,
    analyze,
    as_targets,
    log,
    path_texts,
    require_number,
)
from servetrace.comparison.catalog import DEFAULT_COMPARE_METRICS, DEFAULT_COMPARE_STATS
from servetrace.comparison.compare import Comparison
from servetrace.comparison.compare import compare as compare_analyses
from servetrace.comparison.load import compare_load
from servetrace.settings import DEFAULT_ARRIVAL_TOLERANCE_NS, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES


def _analysis_of(
    trace: PathsLike | Analysis, goodput: tuple[GoodputTarget, ...], reading: dict[str, Any]
) -> Analysis:
    if isinstance(trace, Analysis):
        return trace
    # In memory: compare needs every gap, which a streamed analysis does not keep.
    analysis = analyze(trace, goodput=goodput, streaming=False, **reading)
    label = ", ".join(analysis.inputs)
    for message in analysis.read_warnings:
        log.warning("%s", message)
    for message in analysis.summary.warnings:
        log.warning("%s: %s", label, message)
    return analysis


def label_of(trace: PathsLike | Analysis) -> str:
    if isinstance(trace, Analysis):
        return ", ".join(trace.inputs)
    return ", ".join(path_texts(trace))


def compare(
    baseline: PathsLike | Analysis,
    candidate: PathsLike | Analysis,
    *,
    metrics: Sequence[str] | None = None,
    stats: Sequence[str] | None = None,
    min_change: float = 0.05,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    pair_on: str | None = None,
    arrival_tolerance_ns: int = DEFAULT_ARRIVAL_TOLERANCE_NS,
    goodput: GoodputLike = (),
    baseline_label: str | None = None,
    candidate_label: str | None = None,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
) -> Comparison:
    """Compare a candidate with the baseline: ratio, CI, significance, verdict per metric.

    Each side is a path (or paths) or an ``Analysis`` already made (analysed with the
    same ``goodput`` targets). Without goodput targets, goodput is left out of the
    default metrics rather than reported empty (as the CLI does).
    """
    require_number("min_change", min_change, 0)
    require_number("confidence", confidence, 0, 1)
    require_number("arrival_tolerance_ns", arrival_tolerance_ns, 0, 2**63 - 1)
    require_number("seed", seed, 0, 2**64 - 1)
    require_number("resamples", resamples, 100, 10_000_000)
    targets = as_targets(goodput)
    reading: dict[str, Any] = {
        "columns": columns,
        "time_unit": time_unit,
        "event_map": event_map,
        "from_format": from_format,
    }
    chosen = metrics or [m for m in DEFAULT_COMPARE_METRICS if targets or m != "goodput"]
    base = _analysis_of(baseline, targets, reading)
    cand = _analysis_of(candidate, targets, reading)
    comparison = compare_analyses(
        base,
        cand,
        metrics=chosen,
        stats=stats or DEFAULT_COMPARE_STATS,
        seed=int(seed),
        resamples=int(resamples),
        min_change=float(min_change),
        confidence=float(confidence),
        pair_on=pair_on,
        arrival_tolerance_ns=int(arrival_tolerance_ns),
        goodput=targets,
        baseline_label=baseline_label or label_of(baseline),
        candidate_label=candidate_label or label_of(candidate),
    )
    return replace(comparison, load=compare_load(base.declared, cand.declared))
