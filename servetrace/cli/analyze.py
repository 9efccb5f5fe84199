"""``servetrace analyze`` and ``servetrace validate``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from servetrace.analysis.lifecycle import RULES
from servetrace.analysis.memory import Analysis, AnalysisOptions, summarize_by
from servetrace.analysis.summary import GoodputTarget
from servetrace.check.gate import parse_goodput_target
from servetrace.cli._app import app, guarded, out_console, warn
from servetrace.cli._events import PlotsOpt, analysis_plots
from servetrace.cli._inputs import (
    ColumnOpt,
    EventMapOpt,
    FromOpt,
    TimeUnitOpt,
    load_analysis,
)
from servetrace.errors import ExitCode, UsageError
from servetrace.render.naming import Naming
from servetrace.render.summary import (
    SummaryFormat,
    render_csv,
    render_json,
    render_markdown,
    render_table,
    report_dict,
)
from servetrace.schema import EVENT_ALIASES, EVENT_KINDS

TracesArg = Annotated[
    list[str],
    typer.Argument(help="Trace file(s), glob(s) or directory(ies) of parts; read as one trace."),
]


OUTPUT_SUFFIXES = (".parquet", ".csv", ".arrow", ".ipc", ".jsonl", ".ndjson")


def check_output_path(path: Path | None, flag: str) -> None:
    """Refuse an output path before the analysis runs, not after."""
    if path is None:
        return
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise UsageError(
            f"{flag} {path}: cannot tell the output format from the suffix {path.suffix.lower()!r}",
            hint="use .parquet, .csv, .arrow or .jsonl",
        )
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: directory {path.parent} does not exist")


def write_frame(frame: pl.DataFrame, path: Path) -> None:
    """Write a frame as Parquet, CSV, Arrow IPC or JSON Lines by the file's suffix."""
    check_output_path(path, "output")
    suffix = path.suffix.lower()
    writers: dict[str, Callable[[Path], object]] = {
        ".parquet": frame.write_parquet,
        ".csv": frame.write_csv,
        ".arrow": frame.write_ipc,
        ".ipc": frame.write_ipc,
        ".jsonl": frame.write_ndjson,
        ".ndjson": frame.write_ndjson,
    }
    if suffix == ".csv":
        # CSV cannot hold nested values; lists are written as JSON text.
        nested = [c for c, t in frame.schema.items() if isinstance(t, (pl.List, pl.Struct))]
        frame = frame.with_columns(
            pl.col(c).map_elements(str, return_dtype=pl.String) for c in nested
        )
        writers[".csv"] = frame.write_csv
    try:
        writers[suffix](path)
    except OSError as error:
        raise UsageError(f"{path}: cannot write: {error.strerror or error}") from None


def parse_goodput(texts: list[str]) -> tuple[GoodputTarget, ...]:
    if not texts:
        return ()
    return tuple(parse_goodput_target(text) for text in texts)


def _report_warnings(analysis: Analysis) -> None:
    for message in analysis.summary.warnings:
        warn(message)


@app.command(
    epilog="Event kinds: "
    + ", ".join(EVENT_KINDS)
    + ". Aliases: "
    + ", ".join(f"{k}→{v}" for k, v in sorted(EVENT_ALIASES.items()))
    + "."
)
@guarded
def analyze(
    traces: TracesArg,
    fmt: Annotated[SummaryFormat, typer.Option("--format", "-f", help="Report format.")] = (
        SummaryFormat.table
    ),
    requests_out: Annotated[
        Path | None,
        typer.Option(help="Write per-request metrics here (.parquet or .csv)."),
    ] = None,
    quarantine_out: Annotated[
        Path | None,
        typer.Option(help="Write rows of invalid requests here, with a 'rule' column."),
    ] = None,
    by: Annotated[str | None, typer.Option(help="One summary per value of this column.")] = None,
    goodput: Annotated[
        list[str] | None,
        typer.Option(help="Per-request SLO target, e.g. 'ttft<=200ms'; repeat for several."),
    ] = None,
    strict: Annotated[bool, typer.Option(help="Exit 1 if any request breaks a rule.")] = False,
    naming: Annotated[
        Naming, typer.Option(help="Show metrics under the names this tool uses.")
    ] = Naming.servetrace,
    formula_abs_tol_ms: Annotated[
        float, typer.Option(help="Formula check: absolute tolerance (ms).")
    ] = 1.0,
    formula_rel_tol: Annotated[
        float, typer.Option(help="Formula check: tolerance relative to response time.")
    ] = 0.01,
    streaming: Annotated[
        bool | None,
        typer.Option(
            "--streaming/--no-streaming",
            help="Read in batches (Polars streaming engine), for traces larger than memory; "
            "ITL percentiles then come from a ±0.0125% histogram. Default: stream traces of "
            "30 million events or more.",
            show_default=False,
        ),
    ] = None,
    batch_rows: Annotated[
        int, typer.Option(help="Rows per batch with --streaming.", min=1000)
    ] = 2_000_000,
    column: ColumnOpt = None,
    time_unit: TimeUnitOpt = None,
    event_map: EventMapOpt = None,
    from_format: FromOpt = None,
    plots: PlotsOpt = None,
) -> None:
    """Summarise a trace: queue wait, prefill, decode, TTFT, ITL, throughput, formula check."""
    options = AnalysisOptions(
        goodput=parse_goodput(goodput or []),
        formula_abs_tol_ns=round(formula_abs_tol_ms * 1e6),
        formula_rel_tol=formula_rel_tol,
    )
    check_output_path(requests_out, "--requests-out")
    check_output_path(quarantine_out, "--quarantine-out")
    analysis = load_analysis(
        traces, options, column, time_unit, event_map, from_format, streaming, batch_rows, by
    )
    _report_warnings(analysis)
    groups = summarize_by(analysis, by, options) if by else None
    if requests_out:
        write_frame(analysis.requests_out(), requests_out)
    if quarantine_out:
        write_frame(analysis.quarantine(), quarantine_out)
    summary, inputs = analysis.summary, analysis.inputs
    name = naming.value
    links = (
        analysis_plots(analysis, plots, traces, column, time_unit, event_map, from_format)
        if plots
        else ""
    )
    if fmt is SummaryFormat.json:
        out_console.out(render_json(report_dict(summary, inputs, groups, by, name)))
    elif fmt is SummaryFormat.csv:
        out_console.out(render_csv(groups or {None: summary}, by, name), end="")
    elif fmt is SummaryFormat.markdown:
        text = render_markdown(summary, inputs, name)
        for value, group in (groups or {}).items():
            text += "\n" + render_markdown(group, inputs, name, title=f"{by} = {value}")
        out_console.out(text + links, end="")
    else:
        out_console.print(render_table(summary, inputs, name))
        for value, group in (groups or {}).items():
            out_console.print()
            out_console.print(render_table(group, inputs, name, title=f"{by} = {value}"))
    if strict and analysis.summary.accounting.rows_quarantined:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


@app.command()
@guarded
def validate(
    traces: TracesArg,
    quarantine_out: Annotated[
        Path | None,
        typer.Option(help="Write rows of invalid requests here, with a 'rule' column."),
    ] = None,
    fmt: Annotated[
        SummaryFormat, typer.Option("--format", "-f", help="table or json.")
    ] = SummaryFormat.table,
    column: ColumnOpt = None,
    time_unit: TimeUnitOpt = None,
    event_map: EventMapOpt = None,
    from_format: FromOpt = None,
) -> None:
    """Check schema and lifecycle rules only; exit 1 if any request is invalid."""
    check_output_path(quarantine_out, "--quarantine-out")
    analysis = load_analysis(traces, AnalysisOptions(), column, time_unit, event_map, from_format)
    _report_warnings(analysis)
    summary = analysis.summary
    if quarantine_out:
        write_frame(analysis.quarantine(), quarantine_out)
    if fmt is SummaryFormat.json:
        body = report_dict(summary, analysis.inputs)
        keep = (
            "servetrace_version",
            "schema_version",
            "inputs",
            "accounting",
            "outcomes",
            "violations",
            "leaked_state",
            "warnings",
        )
        out_console.out(render_json({k: body[k] for k in keep}))
    else:
        a = summary.accounting
        out_console.out(
            f"{', '.join(analysis.inputs)}: {a.rows:,} rows, {a.requests:,} requests: "
            f"{a.requests_valid:,} valid, {a.requests_invalid:,} invalid; "
            f"{a.rows_analyzed:,} rows analysable, {a.rows_quarantined:,} quarantined"
        )
        for rule in RULES:  # in rule order, every run the same
            if rule not in summary.violations:
                continue
            info = summary.violations[rule]
            examples = ", ".join(map(str, info["examples"]))
            out_console.out(
                f"  {rule}: {info['requests']:,} requests, {info['rows']:,} rows — "
                f"{RULES[rule]}" + (f" (e.g. {examples})" if examples else "")
            )
        if summary.leaked_state and summary.leaked_state["requests"]:
            out_console.out(
                f"  leaked_state: {summary.leaked_state['requests']:,} finished requests "
                "were never released"
            )
    if summary.accounting.requests_invalid or summary.accounting.rows_quarantined:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))
