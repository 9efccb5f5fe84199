"""``servetrace analyze`` and ``servetrace validate``: options → ``servetrace.analyze`` → render."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from servetrace.cli._app import app, examples, guarded, warn
from servetrace.cli._events import PlotsOpt, analysis_plots, check_plots_dir
from servetrace.cli._options import (
    ByOpt,
    ClockOffsetOpt,
    CsvRawTextOpt,
    FormulaAbsTolOpt,
    FormulaRelTolOpt,
    GoodputOpt,
    NamingOpt,
    ServerMetricsFromOpt,
    ServerMetricsOpt,
    StallsOutOpt,
    StepsFromOpt,
    StepsOpt,
    StrictOpt,
    TracesArg,
    goodput_targets,
    in_range,
    ns_of_ms,
    reading_options,
    steps_needed,
)
from servetrace.cli._report import (
    REPORT_FORMAT,
    ReportOutOpt,
    SummaryFormatOpt,
    check_report_output,
    deliver,
    terminal_width,
)
from servetrace.cli._scale import (
    EngineOpt,
    PartialOutOpt,
    QuarantineOutUriOpt,
    RayAddressOpt,
    RequestsOutUriOpt,
    check_outputs,
    output_path,
    write_requests,
)
from servetrace.cli._stage_pairs import stage_pairs_view
from servetrace.errors import ExitCode, UsageError
from servetrace.render.formats import SummaryFormat, ValidateFormat
from servetrace.render.naming import Naming
from servetrace.schema import EVENT_ALIASES, EVENT_KINDS
from servetrace.settings import DEFAULT_BATCH_ROWS, Engine

if TYPE_CHECKING:
    from servetrace.analysis.result import Analysis
    from servetrace.runs.model import Runs


def _report_warnings(analysis: Analysis) -> None:
    for message in analysis.warnings:
        warn(message)


@app.command(
    epilog=examples(
        "servetrace analyze trace.parquet",
        "servetrace analyze result.json --goodput 'ttft<=200ms' -f json -o report.json",
        "servetrace analyze logs/ --by policy --window 60s:600s",
        before="Event kinds: "
        + ", ".join(EVENT_KINDS)
        + ". Aliases: "
        + ", ".join(f"{k}→{v}" for k, v in sorted(EVENT_ALIASES.items()))
        + ".",
    )
)
@guarded
@reading_options
def analyze(
    traces: TracesArg,
    fmt: SummaryFormatOpt = SummaryFormat.table,
    output: ReportOutOpt = None,
    requests_out: RequestsOutUriOpt = None,
    quarantine_out: QuarantineOutUriOpt = None,
    csv_raw_text: CsvRawTextOpt = False,
    by: ByOpt = None,
    goodput: GoodputOpt = None,
    strict: StrictOpt = False,
    naming: NamingOpt = Naming.servetrace,
    formula_abs_tol_ms: FormulaAbsTolOpt = None,
    formula_rel_tol: FormulaRelTolOpt = None,
    streaming: Annotated[
        bool | None,
        typer.Option(
            "--streaming/--no-streaming",
            help="Read in batches (Polars streaming engine), for traces larger than memory; "
            "ITL percentiles then come from a ±0.0123% histogram. Default: stream traces of "
            "30 million events or more.",
            show_default=False,
        ),
    ] = None,
    batch_rows: Annotated[
        int,
        typer.Option(
            metavar="ROWS",
            help="Rows per batch with --streaming.",
            callback=in_range(1000, 2**63 - 1),
        ),
    ] = DEFAULT_BATCH_ROWS,
    plots: PlotsOpt = None,
    server_metrics: ServerMetricsOpt = None,
    server_metrics_from: ServerMetricsFromOpt = None,
    clock_offset_ms: ClockOffsetOpt = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            metavar="LABEL",
            help="Name the runs (repeat, one per run, in the order found); default: the "
            "parts of their paths that differ.",
        ),
    ] = None,
    pool: Annotated[
        bool,
        typer.Option(
            help="Pool several runs into one trace, request ids made unique per run "
            "(LABEL:ID, and a 'run' column for --by run)."
        ),
    ] = False,
    window: Annotated[
        str | None,
        typer.Option(
            metavar="START:END",
            help="Analyse only requests arriving in START:END (seconds from the trace start, "
            "e.g. 60:600 or 1m:10m, or ISO timestamps; an empty side is open).",
        ),
    ] = None,
    steady_state: Annotated[
        bool,
        typer.Option(
            "--steady-state",
            help="Choose the window: in-system concurrency within ±5% of its plateau, "
            "after warm-up, ending one median e2e before the drain (reported).",
        ),
    ] = False,
    slice_: Annotated[
        str | None,
        typer.Option(
            "--slice",
            metavar="DURATION",
            help="Per-slice throughput, goodput, TTFT/TPOT p50/p99, queued and running, "
            "e.g. 10s (with --format csv: the CSV is the per-slice table).",
        ),
    ] = None,
    fluidity: Annotated[
        str | None,
        typer.Option(
            metavar="DEADLINES",
            help="Etalon's fluidity-index for per-token deadlines, e.g. 'ttft=500ms,tbt=50ms'.",
        ),
    ] = None,
    censoring: Annotated[
        bool,
        typer.Option(
            "--censoring",
            help="Under the table: Kaplan–Meier TTFT, e2e and queue-wait p50/p90/p99 with "
            "cancelled and in-flight requests censored, beside the completed-only figures "
            "(always in the JSON as 'survival').",
        ),
    ] = False,
    steps: StepsOpt = None,
    steps_from: StepsFromOpt = None,
    stalls_out: StallsOutOpt = None,
    partial_out: PartialOutOpt = None,
    engine: EngineOpt = Engine.local,
    ray_address: RayAddressOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Summarise a trace: queue wait, prefill, decode, TTFT, ITL, throughput, formula check.

    Several runs (tool exports, run folders, a sweep folder) give one row per run."""
    from servetrace import api
    from servetrace.analysis.slices import parse_slice
    from servetrace.render.analysis_report import analysis_text

    if len(traces) == 1 and stage_pairs_view(traces[0], fmt, output):
        return
    check_outputs(traces, engine, requests_out, quarantine_out, partial_out)
    check_report_output(output, traces)
    check_plots_dir(plots, traces)
    check_steps_options(traces, steps, steps_from, stalls_out)
    requests_target = output_path(requests_out)  # a local Path, or a URI as text
    quarantine_target = output_path(quarantine_out)
    options: dict[str, Any] = {
        "by": by,
        "goodput": goodput_targets(goodput),
        "formula_abs_tol_ns": ns_of_ms(formula_abs_tol_ms),
        "formula_rel_tol": formula_rel_tol,
        **(reading or {}),
    }
    if partial_out is not None:
        refuse_with_partial(
            window=window,
            steady_state=steady_state,
            slice_=slice_,
            fluidity=fluidity,
            pool=pool,
            plots=plots,
            streaming=streaming,
            steps=steps,
        )
        analysis = api.analyze_shard(traces, partial_out, **options)
    else:
        runs = api.analyze_runs(
            traces,
            streaming=streaming,
            batch_rows=batch_rows,
            window=window,
            steady_state=steady_state,
            slice_ns=parse_slice(slice_) if slice_ is not None else None,
            fluidity=fluidity,
            labels=label,
            pool=pool,
            engine=engine,
            ray_address=ray_address,
            steps=steps,
            steps_from=steps_from,
            **options,
        )
        if len(runs) > 1 or runs[0].analysis is None:
            if server_metrics is not None:
                raise UsageError(
                    "--server-metrics describes one server: these inputs are several runs",
                    hint="name one run",
                )
            _runs_output(runs, fmt, output, requests_target, quarantine_target, plots)
            if strict and any(
                run.analysis is not None and run.analysis.summary.accounting.rows_quarantined
                for run in runs
            ):
                raise typer.Exit(int(ExitCode.CHECK_FAILED))
            return
        analysis = runs[0].analysis
    if server_metrics is not None:
        offset = ns_of_ms(clock_offset_ms)
        analysis = api.with_server_metrics(analysis, server_metrics, server_metrics_from, offset)
    _report_warnings(analysis)
    if requests_target:
        write_requests(analysis.requests, requests_target, engine, ray_address)
    if quarantine_target:
        write_requests(
            analysis.quarantine, quarantine_target, Engine.local, None, "--quarantine-out"
        )
    if stalls_out is not None and analysis.stalls is not None:
        from servetrace.outputs import write_table
        from servetrace.render.stalls import gap_rows

        write_table(gap_rows(analysis.stalls), stalls_out)
    links = analysis_plots(analysis, plots, traces, output) if plots else ""
    report = analysis_text(analysis, fmt, naming.value, censoring)
    if isinstance(report, str) and fmt is SummaryFormat.markdown:
        report += links
    deliver(report, output)
    if strict and analysis.summary.accounting.rows_quarantined:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def check_steps_options(
    traces: list[str], steps: Path | None, steps_from: str | None, stalls_out: Path | None
) -> None:
    """--steps-from and --stalls-out need --steps; outputs are checked before any read."""
    from servetrace.outputs import check_frame_output, refuse_overwriting_inputs

    steps_needed(steps, ("--steps-from", steps_from), ("--stalls-out", stalls_out))
    if steps is None:
        return
    check_frame_output(stalls_out, "--stalls-out")
    refuse_overwriting_inputs([("--stalls-out", stalls_out)], [*traces, steps])


def refuse_with_partial(**given: object) -> None:
    """Options that need the events cannot be combined with --partial-out."""
    for name, value in given.items():
        if value not in (None, False):
            flag = "--" + name.rstrip("_").replace("_", "-")
            raise UsageError(
                f"{flag} cannot be combined with --partial-out",
                hint=f"a partial holds the whole shard; analyse the trace itself with {flag}",
            )


def _runs_output(
    runs: Runs,
    fmt: SummaryFormat,
    output: Path | None,
    requests_out: Path | str | None,
    quarantine_out: Path | str | None,
    plots: Path | None,
) -> None:
    """Several runs: one row each (``render/runs``); frames get a ``run`` column."""
    from servetrace.render import runs as render
    from servetrace.render.warnings import grouped_warnings

    if plots:
        raise UsageError(
            "--plots draws one trace; these inputs are several runs",
            hint="name one run, or --pool them",
        )
    for line in grouped_warnings(runs.notes()):
        warn(line)
    for flag, path, frame_of in (
        ("--requests-out", requests_out, lambda a: a.requests),
        ("--quarantine-out", quarantine_out, lambda a: a.quarantine),
    ):
        if path is None:
            continue
        frame = runs.frame(frame_of)
        if frame is None:
            raise UsageError(f"{flag}: no run has per-request rows (summaries only)")
        write_requests(frame, path, Engine.local, None, flag)
    if fmt is SummaryFormat.json:
        report = render.render_runs_json(runs) + "\n"
    elif fmt is SummaryFormat.csv:
        report = render.render_runs_csv(runs)
    elif fmt is SummaryFormat.markdown:
        report = render.render_runs_markdown(runs)
    else:
        report = render.render_runs_table(runs, width=None if output else terminal_width())
    deliver(report, output)


@app.command(epilog=examples("servetrace validate trace.parquet --quarantine-out invalid.parquet"))
@guarded
@reading_options
def validate(
    traces: TracesArg,
    quarantine_out: QuarantineOutUriOpt = None,
    csv_raw_text: CsvRawTextOpt = False,
    fmt: Annotated[ValidateFormat, REPORT_FORMAT] = ValidateFormat.table,
    output: ReportOutOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Check schema and lifecycle rules only; exit 1 if any request is invalid."""
    from servetrace import api
    from servetrace.render.summary import render_json
    from servetrace.render.validate import validate_dict, validate_text

    check_outputs(traces, Engine.local, None, quarantine_out, None)
    check_report_output(output, traces)
    quarantine_target = output_path(quarantine_out)
    analysis = api.analyze(traces, streaming=False, **(reading or {}))
    _report_warnings(analysis)
    summary = analysis.summary
    if quarantine_target:
        write_requests(
            analysis.quarantine, quarantine_target, Engine.local, None, "--quarantine-out"
        )
    if fmt is ValidateFormat.json:
        deliver(render_json(validate_dict(summary, analysis.inputs)) + "\n", output)
    else:
        deliver(validate_text(summary, analysis.inputs), output)
    if summary.accounting.requests_invalid or summary.accounting.rows_quarantined:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))
