"""Partials in the library: a shard's partial, partials as inputs (analyze, compare, check).

A partial directory, or several, is an analysed trace: wherever a trace is read
(``servetrace.analyze``, hence ``compare``, ``check`` and ``report``), inputs that are all
partials are merged (``analysis.partial``) instead of read as events.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from servetrace.analysis import memory
from servetrace.analysis.partial import Partial, combine, finish, partial_of
from servetrace.analysis.partial_io import is_partial, read_partial
from servetrace.errors import UsageError
from servetrace.sources import detect
from servetrace.sources.canonical import IngestOptions
from servetrace.sources.canonical import read_events as scan_events

if TYPE_CHECKING:
    from servetrace.api._analyze import Analysis


def partial_paths(texts: Sequence[str]) -> list[Path] | None:
    """The partial directories ``texts`` name (globs expanded), or None if any is not one."""
    found: list[Path] = []
    for text in texts:
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        if not matches:
            return None
        for match in matches:
            if not is_partial(match):
                return None
            found.append(Path(match))
    return found or None


def read_combined(paths: Sequence[str | os.PathLike[str]]) -> Partial:
    """Read every partial and combine them (shards split by request)."""
    return combine([read_partial(path) for path in paths])


def merged_analysis(
    paths: Sequence[str | os.PathLike[str]], options: memory.AnalysisOptions
) -> memory.Analysis:
    return finish(read_combined(paths), options)


def shard_partial(
    texts: Sequence[str],
    ingest: IngestOptions,
    from_format: str | None = None,
) -> Partial:
    """One shard (a canonical trace or a tool export) as a partial: read it, run the kernel."""
    from servetrace.api._analyze import _imported

    fmt, resolved = detect.inputs(texts, from_format)
    if fmt is not None:
        events, notes = _imported(resolved, fmt, ingest.columns, ingest.time_unit)
        return partial_of(events, tuple(texts), notes)
    trace = scan_events(list(texts), ingest)
    try:
        events = trace.events.collect()
    except Exception as error:  # a Polars error while the lazy scan runs
        import polars as pl

        if isinstance(error, pl.exceptions.PolarsError):
            raise memory.unreadable(trace, error) from None
        raise
    return partial_of(events, trace.inputs)


def refuse_with_partial(flag: str, given: bool) -> None:
    if given:
        raise UsageError(
            f"{flag} cannot be combined with --partial-out",
            hint=f"a partial holds the whole shard; analyse the trace itself with {flag}",
        )


def analysis_elsewhere(
    texts: Sequence[str],
    options: memory.AnalysisOptions,
    by: str | None,
    engine: str,
    ray_address: str | None,
    restricted: bool,
    ingest: IngestOptions,
    from_format: str | None,
) -> Analysis:
    """Partials merged, or a Parquet dataset analysed on Ray: one ``Analysis`` either way."""
    from servetrace.api._analyze import Analysis

    if engine not in ("local", "ray"):
        raise UsageError(f"engine must be 'local' or 'ray', got {engine!r}")
    what = "partials" if engine == "local" else "--engine ray"
    if restricted:
        raise UsageError(
            f"{what}: --window, --steady-state, --slice and --pool need the events",
            hint="analyse the trace itself (the local engine) for a time-restricted report",
        )
    if engine == "ray":
        from servetrace.analysis.ray_engine import analyze_ray

        result = analyze_ray(texts, ingest, options, ray_address, from_format)
    else:
        found = partial_paths(texts)
        assert found is not None
        result = merged_analysis(found, options)
    groups = None
    if by:
        if result.gaps.height == 0 and (result.summary.metrics["itl"]["count"] or 0) > 0:
            raise UsageError(
                f"--by {by}: these ITL gaps were kept as one histogram, not per group",
                hint="use --by on the trace itself, or on partials of fewer than "
                "4,000,000 ITL gaps in all",
            )
        groups = memory.summarize_by(result, by, options)
    return Analysis(engine=result, by=by, groups=groups, fluidity=options.fluidity)


def refuse_partials(texts: Sequence[str], why: str) -> None:
    """A command that needs the events themselves, given a partial: say so (exit 2)."""
    for text in texts:
        if partial_paths([text]) is not None:
            raise UsageError(
                f"{text}: is a partial (per-request results), not events; {why}",
                hint="give the trace itself; analyze, merge, compare and check take partials",
            )
