"""``servetrace report``: one self-contained HTML file of charts, each read in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from servetrace.cli._app import app, err_console, guarded, warn
from servetrace.cli._options import (
    GoodputOpt,
    goodput_targets,
    in_range,
    reading_options,
)
from servetrace.errors import UsageError


@app.command()
@guarded
@reading_options
def report(
    traces: Annotated[
        list[str],
        typer.Argument(help="One trace, or a baseline then candidates to compare with it."),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The .html file to write.")],
    seed: Annotated[int, typer.Option(help="Seed of the comparison's bootstrap.")] = 0,
    slice_: Annotated[
        str | None,
        typer.Option("--slice", help="Add per-slice figures to the over-time charts, e.g. 10s."),
    ] = None,
    sweep: Annotated[
        bool,
        typer.Option(
            "--sweep",
            help="The arguments are the runs of a load sweep: draw the throughput–latency "
            "curve and SLO attainment against offered rate (automatic for a folder of runs).",
        ),
    ] = False,
    goodput: GoodputOpt = None,
    attainment: Annotated[
        str, typer.Option(help="Sweep: required SLO attainment for capacity, e.g. 90%.")
    ] = "90%",
    gpus: Annotated[
        int | None,
        typer.Option(
            help="Sweep: GPUs serving each run (default: the declared tp × pp).",
            callback=in_range(1, 2**31),
        ),
    ] = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Write an offline HTML report: summary, CDFs, load over time, slowest requests.

    Also the formula residuals; with two or more traces, the comparison of each with the
    first. A sweep (a folder of runs, or --sweep): its latency curve and SLO attainment by load."""
    from servetrace.outputs import refuse_overwriting_inputs, write_text
    from servetrace.render.report import TraceView, render_html, require_extra

    require_extra()
    if output.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--output {output}: use an .html file name")
    if not output.parent.is_dir():
        raise UsageError(f"--output {output}: directory {output.parent} does not exist")
    refuse_overwriting_inputs([("--output", output)], traces)
    from servetrace.analysis.slices import parse_slice

    read = reading or {}
    if sweep or _holds_several_runs(traces, read.get("from_format")):
        from servetrace.api._capacity import capacity

        found = capacity(
            traces,
            goodput=goodput_targets(goodput),
            attainment=attainment,
            gpus=gpus,
            reading=read,
        )
        for message in found.warnings:
            warn(message)
        html = render_html([], (), sweep=found)
        write_text(html, output)
        err_console.print(f"wrote {output} ({len(html.encode()) / 1e6:.2f} MB)", markup=False)
        return

    from servetrace.api import analyze
    from servetrace.render.series import MAX_POINTS

    slice_ns = parse_slice(slice_) if slice_ else None
    views = []
    for trace in traces:
        analysis = analyze(trace, slice_ns=slice_ns, **read)
        for note in (
            *analysis.read_warnings,
            *(f"{trace}: {m}" for m in analysis.summary.warnings),
        ):
            warn(note)
        if analysis.events_reader is None:
            warn(
                f"{trace}: partial results keep no events: the report draws no output-token "
                "rate and no requeued time"
            )
        # The page stays light with several traces: they share the scatter budget.
        views.append(TraceView(trace, analysis, points=MAX_POINTS // len(traces)))
    comparisons = []
    if len(views) > 1:
        from servetrace.comparison.catalog import DEFAULT_COMPARE_METRICS
        from servetrace.comparison.compare import compare
        from servetrace.render.compare_words import comparison_warnings

        metrics = [m for m in DEFAULT_COMPARE_METRICS if m != "goodput"]
        for view in views[1:]:
            comparisons.append(
                compare(
                    views[0].analysis,
                    view.analysis,
                    metrics=metrics,
                    seed=seed,
                    baseline_label=views[0].label,
                    candidate_label=view.label,
                )
            )
        for message in dict.fromkeys(w for c in comparisons for w in comparison_warnings(c)):
            warn(message)
    html = render_html(views, comparisons)
    write_text(html, output)
    err_console.print(f"wrote {output} ({len(html.encode()) / 1e6:.2f} MB)", markup=False)


def _holds_several_runs(traces: list[str], from_format: str | None) -> bool:
    """Arguments that hold several runs (a sweep folder, a run folder of several
    exports), as analyze resolves them: the sweep report. One run each: one view each."""
    from servetrace.sources.inputs import resolve

    return any(len(resolve([t], from_format)) > 1 for t in traces)
