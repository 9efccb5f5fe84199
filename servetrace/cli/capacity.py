"""``servetrace capacity RUN...``: the throughput–latency curve of a load sweep, SLO
attainment against offered load, capacity at ``--attainment`` and the Pareto frontier."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from servetrace.cli._app import app, examples, guarded, warn
from servetrace.cli._options import (
    CsvRawTextOpt,
    GoodputOpt,
    goodput_targets,
    in_range,
    reading_options,
)
from servetrace.cli._report import (
    FILE_WIDTH,
    ReportOutOpt,
    SummaryFormatOpt,
    check_report_output,
    deliver,
    terminal_width,
)
from servetrace.errors import UsageError
from servetrace.render.formats import SummaryFormat


@app.command(
    epilog=examples(
        "servetrace capacity sweep/ --goodput 'ttft<=200ms' --attainment 90%",
        "servetrace capacity qps_*.json --goodput 'ttft<=200ms' --goodput 'tpot<=50ms' -f csv",
    )
)
@guarded
@reading_options
def capacity(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="The runs of a sweep: result files, run folders or a sweep folder, found "
            "as analyze finds runs (never pooled)."
        ),
    ],
    goodput: GoodputOpt = None,
    attainment: Annotated[
        str,
        typer.Option(help="Required SLO attainment for capacity, e.g. 90% or 0.9."),
    ] = "90%",
    rate: Annotated[
        list[float] | None,
        typer.Option(
            help="Offered request rate of each run (req/s), in the order the runs are found "
            "(arguments in order, a folder's runs by name); repeat once per run. Default: "
            "the rate each run declares (vllm bench serve, GuideLLM, AIPerf…).",
        ),
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(help="Label of each run, in argument order (default: from the paths)."),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            help="GPUs serving each run, for the tok/s-per-GPU Pareto frontier (default: "
            "the declared tp × pp; this replaces it).",
            callback=in_range(1, 2**31),
        ),
    ] = None,
    fmt: SummaryFormatOpt = SummaryFormat.table,
    csv_raw_text: CsvRawTextOpt = False,
    output: ReportOutOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Capacity from a sweep: the highest offered rate whose SLO attainment meets the bar."""
    from servetrace.api._capacity import capacity as sweep_capacity
    from servetrace.render import capacity as render
    from servetrace.render.summary import render_json

    check_report_output(output, runs)
    for value in rate or []:
        if math.isnan(value) or value <= 0:
            raise UsageError(
                f"--rate {value:g} is not a positive request rate (req/s; inf allowed)"
            )
    report = sweep_capacity(
        runs,
        rates=rate,
        labels=label,
        goodput=goodput_targets(goodput),
        attainment=attainment,
        gpus=gpus,
        reading=reading,
    )
    for message in report.warnings:
        warn(message)
    undeclared = [p.label for p in report.curve if p.offered_rate is None]
    if undeclared:
        warn(
            "no offered rate for "
            + ", ".join(undeclared)
            + ": give --rate once per run (the run's tool did not declare one)"
        )
    if fmt is SummaryFormat.json:
        deliver(render_json(render.report_dict(report)) + "\n", output)
    elif fmt is SummaryFormat.csv:
        deliver(render.render_csv(report), output)
    elif fmt is SummaryFormat.markdown:
        deliver(render.render_markdown(report), output)
    else:
        width = FILE_WIDTH if output else terminal_width()
        deliver([render.render_table(report, width)], output)
