"""``servetrace report``: one self-contained HTML file of charts, each read in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from servetrace.cli._app import app, err_console, examples, guarded, warn
from servetrace.cli._options import (
    ClockOffsetOpt,
    GoodputOpt,
    ServerMetricsFromOpt,
    ServerMetricsOpt,
    StepsFromOpt,
    StepsOpt,
    goodput_targets,
    in_range,
    ns_of_ms,
    reading_options,
    steps_needed,
)
from servetrace.cli._report import check_report_output
from servetrace.errors import UsageError


@app.command(
    epilog=examples(
        "servetrace report trace.parquet -o report.html",
        "servetrace report fcfs.parquet chunked.parquet -o comparison.html",
        "servetrace report trace.parquet --steps steps.parquet -o stalls.html",
        "servetrace report sweep/ --goodput 'ttft<=200ms' -o sweep.html",
    )
)
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
    server_metrics: ServerMetricsOpt = None,
    server_metrics_from: ServerMetricsFromOpt = None,
    clock_offset_ms: ClockOffsetOpt = None,
    steps: StepsOpt = None,
    steps_from: StepsFromOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Write an offline HTML report: summary, CDFs, load over time, slowest requests.

    Also the formula residuals; with two or more traces, the comparison of each with the
    first. A sweep (a folder of runs, or --sweep): its latency curve and SLO attainment by load."""
    from servetrace.analysis.slices import parse_slice
    from servetrace.outputs import write_text
    from servetrace.render.report_build import build_report

    if output.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--output {output}: use an .html file name")
    steps_needed(steps, ("--steps-from", steps_from))
    check_report_output(output, [*traces, *([steps] if steps else [])])
    page = build_report(
        traces,
        seed=seed,
        slice_ns=parse_slice(slice_) if slice_ else None,
        sweep=sweep,
        goodput=goodput_targets(goodput),
        attainment=attainment,
        gpus=gpus,
        reading=reading,
        server_metrics=None
        if server_metrics is None
        else (str(server_metrics), server_metrics_from, ns_of_ms(clock_offset_ms)),
        steps=None if steps is None else (str(steps), steps_from),
    )
    for message in page.warnings:
        warn(message)
    write_text(page.html, output)
    err_console.print(f"wrote {output} ({len(page.html.encode()) / 1e6:.2f} MB)", markup=False)
