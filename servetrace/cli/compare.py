"""``servetrace compare``: options → ``servetrace.compare`` per candidate → render."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from servetrace.cli._app import app, examples, guarded, help_built_when_shown, warn
from servetrace.cli._events import PlotsOpt, check_plots_dir, compare_plots
from servetrace.cli._options import (
    DURATION_MS,
    NON_NEGATIVE,
    RESAMPLES,
    SEED,
    StepsFromOpt,
    goodput_targets,
    in_range,
    reading_options,
    steps_needed,
)
from servetrace.cli._report import REPORT_FORMAT, ReportOutOpt, check_report_output, deliver
from servetrace.errors import UsageError
from servetrace.render.formats import CompareFormat
from servetrace.settings import DEFAULT_ARRIVAL_TOLERANCE_NS, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from servetrace.units import NS_PER_MS

if TYPE_CHECKING:
    from servetrace.analysis.result import Analysis


def _metric_help() -> str:
    from servetrace.comparison.catalog import COMPARED_METRICS, DEFAULT_COMPARE_METRICS

    others = [name for name in COMPARED_METRICS if name not in DEFAULT_COMPARE_METRICS]
    return (
        "Metric to compare; repeatable: "
        + ", ".join(COMPARED_METRICS)
        + f" (default: all but {', '.join(others)})."
    )


@app.command(
    "compare",
    cls=help_built_when_shown(metric=_metric_help),
    epilog=examples(
        "servetrace compare fcfs.parquet chunked.parquet",
        "servetrace compare fcfs.parquet chunked.parquet sjf.parquet --metric ttft --metric e2e",
        "servetrace compare base/ candidate/ -f markdown -o comparison.md",
        "servetrace compare fcfs.parquet chunked.parquet --steps fcfs_steps.parquet "
        "--steps chunked_steps.parquet",
    ),
)
@guarded
@reading_options
def compare_command(
    baseline: Annotated[str, typer.Argument(help="The reference trace (file or directory).")],
    candidates: Annotated[list[str], typer.Argument(help="One or more traces to compare.")],
    fmt: Annotated[CompareFormat, REPORT_FORMAT] = CompareFormat.table,
    output: ReportOutOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show non-significant rows too.")
    ] = False,
    metric: Annotated[
        list[str] | None,
        typer.Option(metavar="METRIC", help="Metric to compare; repeatable (listed in --help)."),
    ] = None,
    stat: Annotated[
        list[str] | None, typer.Option(help="Statistics (default: mean p50 p90 p99).")
    ] = None,
    min_change: Annotated[
        float,
        typer.Option(
            help="Smallest change that counts, as a fraction (0.05 = 5%).", callback=NON_NEGATIVE
        ),
    ] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.", callback=SEED)] = 0,
    resamples: Annotated[
        int, typer.Option(help="Bootstrap resamples.", callback=RESAMPLES)
    ] = DEFAULT_RESAMPLES,
    confidence: Annotated[
        float,
        typer.Option(help="Confidence level.", callback=in_range(0.5, 1, high_open=True)),
    ] = DEFAULT_CONFIDENCE,
    pair_on: Annotated[
        str | None, typer.Option(help="Pair requests on this column instead of request_id.")
    ] = None,
    arrival_tolerance_ms: Annotated[
        float,
        typer.Option(
            help="Arrival offsets within this count as the same workload.", callback=DURATION_MS
        ),
    ] = DEFAULT_ARRIVAL_TOLERANCE_NS / NS_PER_MS,
    goodput: Annotated[
        list[str] | None, typer.Option(help="Per-request SLO target for goodput, e.g. ttft<=200ms.")
    ] = None,
    plots: PlotsOpt = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            help="Label of each trace, baseline first, then the candidates in order "
            "(default: the shortest path parts that tell them apart); repeat once per trace."
        ),
    ] = None,
    steps: Annotated[
        list[Path] | None,
        typer.Option(
            "--steps",
            metavar="STEPS",
            help="Engine step records of each run, baseline first, then the candidates in "
            "order (one per trace): adds each run's ITL stall shares by cause and their change.",
        ),
    ] = None,
    steps_from: StepsFromOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Compare candidates with a baseline: ratio, CI, significance and a verdict per metric."""
    from servetrace.api import analyze, compare
    from servetrace.comparison.catalog import DEFAULT_COMPARE_METRICS, DEFAULT_COMPARE_STATS
    from servetrace.comparison.compare import resolve
    from servetrace.render.compare import render_compare
    from servetrace.render.compare_words import comparison_warnings

    # An unknown metric or statistic is a usage error before any trace is read.
    resolve(metric or DEFAULT_COMPARE_METRICS, stat or DEFAULT_COMPARE_STATS)

    for flag, given, what in (("--label", label, "label"), ("--steps", steps, "steps")):
        if given is not None and len(given) != 1 + len(candidates):
            raise UsageError(
                f"{len(given)} {flag} for {1 + len(candidates)} traces: give one per trace",
                hint=f"the baseline's {what} first, then one per candidate, in order",
            )
    steps_needed(
        steps,
        ("--steps-from", steps_from),
        hint="give the engine's step records of each run: --steps STEPS, once per trace",
    )
    check_report_output(output, [baseline, *candidates, *(steps or [])])
    check_plots_dir(plots, [baseline, *candidates])
    targets = goodput_targets(goodput)
    read = reading or {}

    step_files = dict(zip([baseline, *candidates], steps, strict=True)) if steps else {}

    def load(path: str) -> Analysis:
        # One trace of several: its warnings name the file they are about.
        analysis = analyze(
            [path],
            goodput=targets,
            streaming=False,
            steps=step_files.get(path),
            steps_from=steps_from if steps else None,
            **read,
        )
        for message in analysis.read_warnings:
            warn(message)
        for message in analysis.summary.warnings:
            warn(f"{path}: {message}")
        return analysis

    base = load(baseline)
    analyses = {candidate: load(candidate) for candidate in candidates}
    comparisons = [
        compare(
            base,
            analyses[candidate],
            metrics=metric,
            stats=stat,
            seed=seed,
            resamples=resamples,
            min_change=min_change,
            confidence=confidence,
            pair_on=pair_on,
            arrival_tolerance_ns=round(arrival_tolerance_ms * NS_PER_MS),
            goodput=targets,
            baseline_label=label[0] if label else baseline,
            candidate_label=label[1 + i] if label else candidate,
        )
        for i, candidate in enumerate(candidates)
    ]
    # Each warning once on stderr (the report repeats them in context on stdout).
    for message in dict.fromkeys(w for c in comparisons for w in comparison_warnings(c)):
        warn(message)
    # The charts name each trace as the report does: by its --label, else its run label.
    labelled = [
        (c.candidate_label, analyses[path]) for c, path in zip(comparisons, candidates, strict=True)
    ]
    links = (
        compare_plots(
            comparisons[0].baseline_label,
            base,
            labelled,
            comparisons,
            plots,
            named=label is not None,
            markdown=output,
        )
        if plots
        else ""
    )
    report = render_compare(comparisons, fmt, verbose=verbose)
    deliver(report + links if fmt is CompareFormat.markdown else report, output)
