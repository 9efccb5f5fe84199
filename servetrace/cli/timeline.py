"""``servetrace timeline``: request lifecycles for Perfetto UI and chrome://tracing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from servetrace.cli._app import app, err_console, examples, guarded, warn
from servetrace.cli._options import (
    ClockOffsetOpt,
    ServerMetricsFromOpt,
    ServerMetricsOpt,
    StepsFromOpt,
    TimelineStepsOpt,
    ns_of_ms,
    reading_options,
    steps_needed,
)
from servetrace.cli._report import check_report_output
from servetrace.errors import UsageError
from servetrace.render.format import counted


@app.command(
    epilog=examples(
        "servetrace timeline trace.parquet -o timeline.json.gz",
        "servetrace timeline trace.parquet --slowest 50 --ticks -o slowest.json",
        "servetrace timeline trace.parquet --steps steps.parquet -o steps.json",
    )
)
@guarded
@reading_options
def timeline(
    traces: Annotated[list[str], typer.Argument(help="Trace file(s), glob(s) or directories.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Trace Event Format file: .json or .json.gz.")
    ],
    slowest: Annotated[
        int | None, typer.Option(help="Only the N requests with the longest e2e.", min=1)
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(help="Only requests alive in START:END from the trace start (10s:20s)."),
    ] = None,
    requests: Annotated[
        list[str] | None, typer.Option(help="Only these request ids (comma-separated).")
    ] = None,
    ticks: Annotated[
        bool, typer.Option(help="Every output tick as an instant event (large files).")
    ] = False,
    server_metrics: ServerMetricsOpt = None,
    server_metrics_from: ServerMetricsFromOpt = None,
    clock_offset_ms: ClockOffsetOpt = None,
    steps: TimelineStepsOpt = None,
    steps_from: StepsFromOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Write one slice per request (queued, prefill, decode, requeued) packed into lanes."""
    from servetrace.api import analyze
    from servetrace.outputs import write_bytes
    from servetrace.render.timeline import TimelineOptions, build_trace, parse_ids, parse_window

    name = output.name.lower()
    if not (name.endswith(".json") or name.endswith(".json.gz")):
        raise UsageError(f"--output {output}: use a .json or .json.gz file name")
    steps_needed(steps, ("--steps-from", steps_from))
    check_report_output(output, [*traces, *([steps] if steps else [])])
    options = TimelineOptions(
        requests=parse_ids(requests),
        window_ns=parse_window(window) if window else None,
        slowest=slowest,
        ticks=ticks,
    )
    analysis = analyze(traces, **(reading or {}))
    if server_metrics is not None:  # counter tracks of its series, on the trace's clock
        from servetrace.api import with_server_metrics

        offset = ns_of_ms(clock_offset_ms)
        analysis = with_server_metrics(analysis, server_metrics, server_metrics_from, offset)
    records = None
    if steps is not None:  # a lane and counters per replica, on the trace's clock
        from servetrace.api import read_step_records

        records = read_step_records(analysis, steps, steps_from)
    for note in (*analysis.warnings, *(records.file.notes if records else ())):
        warn(note)
    text, info = build_trace(analysis, options, records)
    write_bytes(text.encode(), output)
    err_console.print(
        f"wrote {output}: {counted(info['requests'], 'request')} on "
        f"{counted(info['lanes'], 'lane')}, "
        f"{info['phase_slices']:,} phase and {info['requeued_slices']:,} requeued slices, "
        f"{info['tick_events']:,} ticks, {info['counter_events']:,} counter points"
        + (
            f", {info['server_counter_events']:,} server metric points"
            if "server_counter_events" in info
            else ""
        )
        + (_steps_words(info["steps"]) if "steps" in info else "")
        + " "
        "(open it in https://ui.perfetto.dev)",
        markup=False,
    )


def _steps_words(steps: dict[str, Any]) -> str:
    unavailable = steps["counters_unavailable"]
    return (
        f", {counted(steps['slices'] + steps['instants'], 'step')} on "
        f"{counted(len(steps['replicas']), 'replica')} with {steps['counter_events']:,} step "
        "counter points" + (f" ({', '.join(unavailable)} unavailable)" if unavailable else "")
    )
