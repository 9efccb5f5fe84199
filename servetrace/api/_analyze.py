"""``servetrace.analyze`` and ``servetrace.read_events``: inputs of any kind → ``Analysis``."""

from __future__ import annotations

import logging
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.analysis import memory
from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.summary import GoodputTarget, Summary
from servetrace.errors import UsageError
from servetrace.render.summary import report_dict
from servetrace.rules.grammar import parse_goodput_target
from servetrace.sources import detect, requests_table
from servetrace.sources.canonical import IngestOptions
from servetrace.sources.canonical import read_events as scan_events
from servetrace.sources.registry import import_file

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
) -> Analysis:
    """Analyse one trace (files, globs, directories) or one tool's exports.

    ``streaming``: True reads in batches of ``batch_rows``, False in memory, None (the
    CLI's default) streams traces of 30 million events or more. ``by`` adds one summary
    per value of that request column. Raises ``InputError`` (unreadable input) or
    ``UsageError`` (bad option), never a Polars error.
    """
    require_number("formula_abs_tol_ns", formula_abs_tol_ns, 0, 2**63 - 1)
    require_number("formula_rel_tol", formula_rel_tol, 0)
    if batch_rows is not None:
        require_number("batch_rows", batch_rows, 1000, 2**63 - 1)
    options = memory.AnalysisOptions(
        goodput=as_targets(goodput),
        formula_abs_tol_ns=int(formula_abs_tol_ns),
        formula_rel_tol=float(formula_rel_tol),
    )
    texts = path_texts(paths)
    fmt, resolved = detect.inputs(texts, from_format)
    notes: tuple[str, ...] = ()
    if fmt is None:
        ingest = _ingest(columns, time_unit, event_map)
        engine = analyze_paths(texts, ingest, options, streaming, batch_rows, by)
    else:
        events, notes = _imported(resolved, fmt, columns, time_unit)
        engine = memory.analyze_events(events, options, inputs=tuple(texts))
    groups = memory.summarize_by(engine, by, options) if by else None
    return Analysis(engine=engine, by=by, groups=groups, read_warnings=notes)
