"""``servetrace capacity RUN...``: the throughput–latency curve of a load sweep, SLO
attainment against offered load, capacity at ``--attainment`` and the Pareto frontier."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from servetrace.cli._app import app, emit, guarded, out_console, warn
from servetrace.cli._options import (
    ColumnOpt,
    CsvRawTextOpt,
    EventMapOpt,
    FromOpt,
    GoodputOpt,
    TimeUnitOpt,
    goodput_targets,
    in_range,
    reading,
)
from servetrace.errors import UsageError
from servetrace.render.formats import SummaryFormat
from servetrace.render.summary import render_json


@app.command()
@guarded
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
    fmt: Annotated[SummaryFormat, typer.Option("--format", "-f", help="Report format.")] = (
        SummaryFormat.table
    ),
    csv_raw_text: CsvRawTextOpt = False,
    column: ColumnOpt = None,
    time_unit: TimeUnitOpt = None,
    event_map: EventMapOpt = None,
    from_format: FromOpt = None,
) -> None:
    """Capacity from a sweep: the highest offered rate whose SLO attainment meets the bar."""
    from servetrace.api._capacity import capacity as sweep_capacity
    from servetrace.render import capacity as render

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
        reading=reading(column, time_unit, event_map, from_format),
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
        emit(render_json(render.report_dict(report)))
    elif fmt is SummaryFormat.csv:
        emit(render.render_csv(report), end="")
    elif fmt is SummaryFormat.markdown:
        emit(render.render_markdown(report), end="")
    else:
        out_console.print(render.render_table(report))
