"""``servetrace compare``: the same workload under different policies, side by side."""

from __future__ import annotations

from typing import Annotated

import typer

from servetrace.analysis.memory import Analysis, AnalysisOptions
from servetrace.cli._app import app, guarded, out_console, warn
from servetrace.cli._events import PlotsOpt, compare_plots
from servetrace.cli._inputs import ColumnOpt, EventMapOpt, FromOpt, TimeUnitOpt, load_reported
from servetrace.cli.analyze import parse_goodput
from servetrace.compare.catalog import DEFAULT_COMPARE_METRICS
from servetrace.compare.measure import DEFAULT_ARRIVAL_TOLERANCE_NS, compare
from servetrace.render.compare import CompareFormat, render_compare
from servetrace.stats import DEFAULT_COMPARE_STATS, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES


@app.command("compare")
@guarded
def compare_command(
    baseline: Annotated[str, typer.Argument(help="The reference trace (file or directory).")],
    candidates: Annotated[list[str], typer.Argument(help="One or more traces to compare.")],
    fmt: Annotated[
        CompareFormat, typer.Option("--format", "-f", help="Report format.")
    ] = CompareFormat.table,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show non-significant rows too.")
    ] = False,
    metric: Annotated[
        list[str] | None, typer.Option(help="Metrics to compare (default: all); repeatable.")
    ] = None,
    stat: Annotated[
        list[str] | None, typer.Option(help="Statistics (default: mean p50 p90 p99).")
    ] = None,
    min_change: Annotated[
        float, typer.Option(help="Smallest change that counts, as a fraction (0.05 = 5%).")
    ] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = DEFAULT_RESAMPLES,
    confidence: Annotated[float, typer.Option(help="Confidence level.")] = DEFAULT_CONFIDENCE,
    pair_on: Annotated[
        str | None, typer.Option(help="Pair requests on this column instead of request_id.")
    ] = None,
    arrival_tolerance_ms: Annotated[
        float, typer.Option(help="Arrival offsets within this count as the same workload.")
    ] = DEFAULT_ARRIVAL_TOLERANCE_NS / 1e6,
    goodput: Annotated[
        list[str] | None, typer.Option(help="Per-request SLO target for goodput, e.g. ttft<=200ms.")
    ] = None,
    column: ColumnOpt = None,
    time_unit: TimeUnitOpt = None,
    event_map: EventMapOpt = None,
    from_format: FromOpt = None,
    plots: PlotsOpt = None,
) -> None:
    """Compare candidates with a baseline: ratio, CI, significance and a verdict per metric."""
    targets = parse_goodput(goodput or [])
    options = AnalysisOptions(goodput=targets)

    def load(path: str) -> Analysis:
        return load_reported(path, options, column, time_unit, event_map, from_format)

    # Goodput needs per-request targets: without them it is left out, not reported empty.
    metrics = metric or [m for m in DEFAULT_COMPARE_METRICS if targets or m != "goodput"]
    base = load(baseline)
    analyses = {candidate: load(candidate) for candidate in candidates}
    comparisons = [
        compare(
            base,
            analyses[candidate],
            metrics=metrics,
            stats=stat or DEFAULT_COMPARE_STATS,
            seed=seed,
            resamples=resamples,
            min_change=min_change,
            confidence=confidence,
            pair_on=pair_on,
            arrival_tolerance_ns=round(arrival_tolerance_ms * 1e6),
            goodput=targets,
            baseline_label=baseline,
            candidate_label=candidate,
        )
        for candidate in candidates
    ]
    # Each warning once on stderr (the report repeats them in context on stdout).
    for message in dict.fromkeys(w for c in comparisons for w in c.warnings):
        warn(message)
    links = compare_plots(baseline, base, analyses, comparisons, plots) if plots else ""
    out_console.out(render_compare(comparisons, fmt, verbose=verbose), end="")
    if fmt is CompareFormat.markdown:
        out_console.out(links, end="")
