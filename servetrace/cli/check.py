"""``servetrace check``: SLOs and regression budgets as a CI gate (exit 1 on failure)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servetrace.analysis.memory import Analysis, AnalysisOptions
from servetrace.check.baseline import ReportBaseline, read_report
from servetrace.check.config import load_config
from servetrace.check.evaluate import evaluate
from servetrace.check.grammar import parse_goodput_target, parse_rules
from servetrace.cli._app import app, err_console, guarded, out_console
from servetrace.cli._inputs import ColumnOpt, EventMapOpt, FromOpt, TimeUnitOpt, load_reported
from servetrace.errors import ExitCode, InputError, UsageError
from servetrace.render.check import CheckFormat, check_table, render_check, rule_line


@app.command("check")
@guarded
def check_command(
    trace: Annotated[str, typer.Argument(help="The trace to check.")],
    slo: Annotated[
        list[str] | None,
        typer.Option(help="SLO rule, e.g. 'ttft.p99<=500ms' or 'ttft.p99<=2s && tpot.p99<=200ms'."),
    ] = None,
    max_regression: Annotated[
        list[str] | None,
        typer.Option(
            help="Regression budget vs the baseline, e.g. 'ttft.p99:+10%', 'itl.p50:+2ms'."
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="Baseline trace, or a JSON report of 'servetrace analyze -f json'."),
    ] = None,
    goodput: Annotated[
        list[str] | None, typer.Option(help="Per-request target behind goodput.* rules.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Rules file (default: servetrace.toml or [tool.servetrace] in "
            "pyproject.toml, found from the working directory up)."
        ),
    ] = None,
    significance: Annotated[
        bool, typer.Option(help="A regression fails only if it is also significant.")
    ] = True,
    require_all: Annotated[
        bool,
        typer.Option(
            "--require-all",
            help="Fail (exit 1) when a rule is skipped because the trace cannot express "
            "its metric (e.g. ITL of a request-level export).",
        ),
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Seed of the bootstrap.")] = None,
    resamples: Annotated[int | None, typer.Option(help="Bootstrap resamples.")] = None,
    fmt: Annotated[
        CheckFormat, typer.Option("--format", "-f", help="Report format.")
    ] = CheckFormat.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write the report to this file.")
    ] = None,
    column: ColumnOpt = None,
    time_unit: TimeUnitOpt = None,
    event_map: EventMapOpt = None,
    from_format: FromOpt = None,
) -> None:
    """Check SLO rules and regression budgets; exit 0 all pass, 1 any failed."""
    settings = load_config(config)
    rules = list(settings.rules)
    for text in [*(slo or []), *(max_regression or [])]:
        rules.extend(parse_rules(text))
    if not rules:
        raise UsageError(
            "no rules to check",
            hint="give --slo 'ttft.p99<=500ms' or --max-regression 'ttft.p99:+10%', "
            "or put them in servetrace.toml",
        )
    targets = (*settings.goodput, *(parse_goodput_target(t) for t in goodput or []))
    options = AnalysisOptions(goodput=targets)

    def load(path: str) -> Analysis:
        return load_reported(path, options, column, time_unit, event_map, from_format)

    analysis = load(trace)
    baseline_path = baseline or settings.baseline
    reference: Analysis | ReportBaseline | None = None
    if baseline_path is not None:
        if not Path(baseline_path).exists():
            raise InputError(f"{baseline_path}: baseline not found")
        reference = read_report(Path(baseline_path)) or load(str(baseline_path))
    result = evaluate(
        analysis,
        rules,
        reference,
        goodput=targets,
        significance=significance and settings.significance,
        require_all=require_all or settings.require_all,
        seed=settings.seed if seed is None else seed,
        resamples=settings.resamples if resamples is None else resamples,
        confidence=settings.confidence,
    )
    text = render_check(
        result, fmt, trace=trace, baseline=str(baseline_path) if baseline_path else None
    )
    if fmt is CheckFormat.table:
        out_console.print(check_table(result))
    else:
        out_console.out(text, end="" if text.endswith("\n") else "\n")
        # Machine formats keep stdout clean; CI logs still show each failure in words.
        for rule in (*result.failures, *result.skipped):
            err_console.print(rule_line(rule), markup=False)
    if output:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as error:
            raise UsageError(f"{output}: cannot write: {error.strerror or error}") from None
    if not result.passed:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))
