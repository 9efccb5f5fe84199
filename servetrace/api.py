"""The library API: what ``servetrace analyze``, ``compare`` and ``check`` do, from Python.

The CLI calls exactly these functions, so a Python user gets the CLI's numbers for every
input the CLI accepts — canonical traces in any file form, and other tools' exports
(detected by content as the CLI detects them, or named with ``from_format``).

>>> import servetrace
>>> analysis = servetrace.analyze("sample_traces/realistic.parquet")   # doctest: +SKIP
>>> analysis.summary.metrics["ttft"]["p99"]                            # ns  # doctest: +SKIP
>>> analysis.to_dict() == json.loads(`servetrace analyze … --format json`)  # doctest: +SKIP

Numbers are integer ns (or plain ratios); ``to_dict()`` is the JSON report, in its units.
This module is a thin adapter over ``sources``, ``analysis``, ``compare`` and ``check``.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.analysis import memory
from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.summary import GoodputTarget, Summary
from servetrace.check.gate import (
    GateConfig,
    GateResult,
    Rule,
    evaluate,
    load_config,
    parse_goodput_target,
    parse_rules,
)
from servetrace.compare.catalog import DEFAULT_COMPARE_METRICS
from servetrace.compare.measure import DEFAULT_ARRIVAL_TOLERANCE_NS, Comparison
from servetrace.compare.measure import compare as compare_analyses
from servetrace.errors import InputError, UsageError
from servetrace.render.summary import report_dict
from servetrace.sources.canonical import IngestOptions, resolve_paths
from servetrace.sources.canonical import read_events as scan_events
from servetrace.sources.detect import source_format
from servetrace.sources.registry import import_file
from servetrace.stats import DEFAULT_COMPARE_STATS, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES

__all__ = ["Analysis", "CheckResult", "Comparison", "analyze", "check", "compare", "read_events"]

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
        return report_dict(self.summary, self.inputs, self.groups, self.by, naming)


@dataclass(frozen=True)
class CheckResult:
    """The gate's verdict, with what it was run on (``gate`` is the core result)."""

    gate: GateResult
    trace: str
    baseline: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return self.gate.passed

    @property
    def failures(self) -> tuple[Any, ...]:
        return self.gate.failures

    def to_dict(self) -> dict[str, Any]:
        """The report of ``servetrace check --format json``."""
        from servetrace.render.check import check_dict

        return check_dict(self.gate, trace=self.trace, baseline=self.baseline)


# ------------------------------------------------------------------------------ inputs


def _texts(paths: PathsLike) -> list[str]:
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


def _targets(goodput: GoodputLike) -> tuple[GoodputTarget, ...]:
    if isinstance(goodput, str):
        goodput = [goodput]
    return tuple(t if isinstance(t, GoodputTarget) else parse_goodput_target(t) for t in goodput)


def _imported(paths: list[Path], fmt: str) -> tuple[pl.DataFrame, tuple[str, ...]]:
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
    texts = _texts(paths)
    fmt = source_format(resolve_paths(texts), from_format)
    if fmt is not None:
        events, notes = _imported(resolve_paths(texts), fmt)
        for note in notes:
            log.warning(note)
        return events
    trace = scan_events(texts, _ingest(columns, time_unit, event_map))
    try:
        return trace.events.collect()
    except pl.exceptions.PolarsError as error:
        raise memory.unreadable(trace, error) from None


def _check_number(name: str, value: float, low: float, high: float = math.inf) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high):
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
) -> Analysis:
    """Analyse one trace (files, globs, directories) or one tool's exports.

    ``streaming``: True reads in batches of ``batch_rows``, False in memory, None (the
    CLI's default) streams traces of 30 million events or more. ``by`` adds one summary
    per value of that request column. Raises ``InputError`` (unreadable input) or
    ``UsageError`` (bad option), never a Polars error.
    """
    _check_number("formula_abs_tol_ns", formula_abs_tol_ns, 0, 2**63 - 1)
    _check_number("formula_rel_tol", formula_rel_tol, 0)
    if batch_rows is not None:
        _check_number("batch_rows", batch_rows, 1000, 2**63 - 1)
    options = memory.AnalysisOptions(
        goodput=_targets(goodput),
        formula_abs_tol_ns=int(formula_abs_tol_ns),
        formula_rel_tol=float(formula_rel_tol),
    )
    texts = _texts(paths)
    resolved = resolve_paths(texts)
    fmt = source_format(resolved, from_format)
    notes: tuple[str, ...] = ()
    if fmt is None:
        ingest = _ingest(columns, time_unit, event_map)
        engine = analyze_paths(texts, ingest, options, streaming, batch_rows, by)
    else:
        events, notes = _imported(resolved, fmt)
        engine = memory.analyze_events(events, options, inputs=tuple(texts))
    groups = memory.summarize_by(engine, by, options) if by else None
    return Analysis(engine=engine, by=by, groups=groups, read_warnings=notes)


# ------------------------------------------------------------------------------ compare


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


def _label(trace: PathsLike | Analysis) -> str:
    if isinstance(trace, Analysis):
        return ", ".join(trace.inputs)
    return ", ".join(_texts(trace))


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
    _check_number("min_change", min_change, 0)
    _check_number("confidence", confidence, 0, 1)
    _check_number("arrival_tolerance_ns", arrival_tolerance_ns, 0, 2**63 - 1)
    _check_number("seed", seed, 0, 2**64 - 1)
    targets = _targets(goodput)
    reading: dict[str, Any] = {
        "columns": columns,
        "time_unit": time_unit,
        "event_map": event_map,
        "from_format": from_format,
    }
    chosen = metrics or [m for m in DEFAULT_COMPARE_METRICS if targets or m != "goodput"]
    base = _analysis_of(baseline, targets, reading)
    cand = _analysis_of(candidate, targets, reading)
    return compare_analyses(
        base.engine,
        cand.engine,
        metrics=chosen,
        stats=stats or DEFAULT_COMPARE_STATS,
        seed=int(seed),
        resamples=int(resamples),
        min_change=float(min_change),
        confidence=float(confidence),
        pair_on=pair_on,
        arrival_tolerance_ns=int(arrival_tolerance_ns),
        goodput=targets,
        baseline_label=baseline_label or _label(baseline),
        candidate_label=candidate_label or _label(candidate),
    )


# ------------------------------------------------------------------------------ check


def analysis_report(path: Path) -> dict[str, Any] | None:
    """The report of ``servetrace analyze --format json``, if ``path`` is one."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # not ours: let the trace readers and importers try it
    if not (isinstance(document, dict) and "servetrace_version" in document):
        return None
    if not isinstance(document.get("metrics"), dict) or "rows" in document:
        raise InputError(
            f"{path}: a servetrace report, but not one of 'servetrace analyze --format json'",
            hint="write the baseline with: servetrace analyze TRACE --format json > base.json",
        )
    if document.get("naming", "servetrace") != "servetrace":
        raise InputError(
            f"{path}: written with --naming {document['naming']}: its metric names are "
            "another tool's",
            hint="write the baseline without --naming",
        )
    return document


def check_config(config: str | os.PathLike[str] | None) -> GateConfig:
    """The rules file ``check`` uses: ``config``, else servetrace.toml found from the cwd up."""
    return load_config(Path(config) if config is not None else None)


def check(
    trace: PathsLike | Analysis,
    rules: str | Sequence[str | Rule] = (),
    *,
    baseline: PathsLike | Analysis | Mapping[str, Any] | None = None,
    goodput: GoodputLike = (),
    config: str | os.PathLike[str] | None = None,
    significance: bool = True,
    seed: int | None = None,
    resamples: int | None = None,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
    event_map: Mapping[str, str] | None = None,
    from_format: str | None = None,
) -> CheckResult:
    """Evaluate SLO rules and regression budgets on a trace (the CI gate).

    ``rules`` adds to those of the config file (``config``, or servetrace.toml /
    ``[tool.servetrace]`` found from the working directory up, as the CLI finds it). The
    baseline is a trace, an ``Analysis``, the parsed JSON report of ``analyze --format
    json`` or a path to one; without it the config's baseline is used, if any.
    """
    settings = check_config(config)
    checked = list(settings.rules)
    for item in [rules] if isinstance(rules, str) else rules:
        checked.extend(parse_rules(item) if isinstance(item, str) else [item])
    if not checked:
        raise UsageError(
            "no rules to check",
            hint="give --slo 'ttft.p99<=500ms' or --max-regression 'ttft.p99:+10%', "
            "or put them in servetrace.toml",
        )
    if seed is not None:
        _check_number("seed", seed, 0, 2**64 - 1)
    targets = (*settings.goodput, *_targets(goodput))
    reading: dict[str, Any] = {
        "columns": columns,
        "time_unit": time_unit,
        "event_map": event_map,
        "from_format": from_format,
    }
    notes: list[str] = []

    def load(side: PathsLike | Analysis) -> Analysis:
        if isinstance(side, Analysis):
            analysis = side
        else:  # in memory: budgets are tested on every gap
            analysis = analyze(side, goodput=targets, streaming=False, **reading)
        notes.extend(analysis.read_warnings)  # already name their file
        notes.extend(f"{_label(side)}: {message}" for message in analysis.summary.warnings)
        return analysis

    analysis = load(trace)
    chosen = baseline if baseline is not None else settings.baseline
    reference: memory.Analysis | Mapping[str, Any] | None = None
    label: str | None = None
    if isinstance(chosen, Mapping):
        reference, label = chosen, None
    elif chosen is not None:
        label = _label(chosen)
        if isinstance(chosen, Analysis):
            reference = chosen.engine
        else:
            texts = _texts(chosen)
            if len(texts) == 1 and not any(ch in texts[0] for ch in "*?["):
                if not Path(texts[0]).exists():
                    raise InputError(f"{texts[0]}: baseline not found")
                reference = analysis_report(Path(texts[0]))
            if reference is None:
                reference = load(chosen).engine
    gate = evaluate(
        analysis.engine,
        checked,
        reference,
        goodput=targets,
        significance=significance and settings.significance,
        seed=settings.seed if seed is None else int(seed),
        resamples=settings.resamples if resamples is None else int(resamples),
        confidence=settings.confidence,
    )
    return CheckResult(gate=gate, trace=_label(trace), baseline=label, warnings=tuple(notes))
