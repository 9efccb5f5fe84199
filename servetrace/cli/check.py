"""``servetrace check``: options → ``servetrace.check`` → render; exit 1 on failure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from servetrace.cli._app import app, emit, err_console, examples, guarded, out_console, warn
from servetrace.cli._options import (
    RESAMPLES,
    SEED,
    ServerMetricsFromOpt,
    ServerMetricsOpt,
    StepsFromOpt,
    StepsOpt,
    in_range,
    reading_options,
)
from servetrace.cli._report import REPORT_FORMAT, ReportOutOpt, check_report_output
from servetrace.errors import ExitCode
from servetrace.render.formats import CheckFormat
from servetrace.settings import PercentileGate


@app.command(
    "check",
    epilog=examples(
        "servetrace check trace.parquet --slo 'ttft.p99<=500ms' --slo 'itl.p50<=30ms'",
        "servetrace check new.parquet --baseline old.json --max-regression 'ttft.p99:+10%'",
        "servetrace check trace.parquet --slo 'e2e.p90<=20s' -f junit -o check.xml",
        "servetrace check trace.parquet   # the rules of servetrace.toml",
    ),
)
@guarded
@reading_options
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
    seed: Annotated[int | None, typer.Option(help="Seed of the bootstrap.", callback=SEED)] = None,
    resamples: Annotated[
        int | None,
        typer.Option(help="Bootstrap resamples.", callback=RESAMPLES),
    ] = None,
    fmt: Annotated[CheckFormat, REPORT_FORMAT] = CheckFormat.table,
    output: ReportOutOpt = None,
    fluidity: Annotated[
        str | None,
        typer.Option(
            help="Per-token deadlines behind fluidity.* rules, e.g. 'ttft=500ms,tbt=50ms'."
        ),
    ] = None,
    confidence: Annotated[
        float | None,
        typer.Option(
            help="Confidence of every interval: the bootstrap of budgets and the "
            "order-statistic interval of percentile SLOs (default 0.95, or the config's).",
            callback=in_range(0.5, 0.999999),
        ),
    ] = None,
    allow_inconclusive: Annotated[
        bool,
        typer.Option(
            "--allow-inconclusive",
            help="Exit 0 when a percentile SLO is INCONCLUSIVE (its interval contains the "
            "limit); by default an inconclusive rule fails the check (exit 1).",
        ),
    ] = False,
    gate: Annotated[
        PercentileGate,
        typer.Option(
            help="How an SLO on a latency percentile is decided. interval: its whole 95% "
            "interval must meet the limit (a small run can be INCONCLUSIVE: ~200 requests "
            "cannot bound a p99 from above); point: the observed percentile must, as "
            "vLLM, AIPerf and GenAI-Perf gate, the interval reported beside it. Use point "
            "for small benchmark runs, interval to know the SLO holds beyond this sample.",
        ),
    ] = PercentileGate.interval,
    steps: StepsOpt = None,
    steps_from: StepsFromOpt = None,
    server_metrics: ServerMetricsOpt = None,
    server_metrics_from: ServerMetricsFromOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Check SLO rules and regression budgets; exit 0 all pass, 1 any failed."""
    from servetrace.api import check, check_config
    from servetrace.outputs import write_text
    from servetrace.render.check import check_table, render_check
    from servetrace.render.check_words import rule_line

    if output is not None:
        # Everything check reads: the trace, the baseline (given or configured), the rules.
        settings = check_config(config)
        chosen = baseline or settings.baseline
        read: list[str | Path] = [trace]
        read += [p for p in (chosen, settings.source) if p is not None]
        check_report_output(output, read)
    result = check(
        trace,
        [*(slo or []), *(max_regression or [])],
        baseline=baseline,
        goodput=goodput or [],
        config=config,
        significance=significance,
        require_all=require_all,
        seed=seed,
        resamples=resamples,
        fluidity=fluidity,
        confidence=confidence,
        allow_inconclusive=allow_inconclusive,
        gate=gate.value,
        steps=steps,
        steps_from=steps_from,
        server_metrics=server_metrics,
        server_metrics_from=server_metrics_from,
        **(reading or {}),
    )
    for message in result.warnings:
        warn(message)
    text = render_check(result, fmt, trace=result.trace, baseline=result.baseline_file)
    if fmt is CheckFormat.table:
        out_console.print(check_table(result))
    else:
        emit(text, end="" if text.endswith("\n") else "\n")
        # Machine formats keep stdout clean; CI logs still show each failure in words.
        for rule in (*result.failures, *result.skipped, *result.inconclusive):
            err_console.print(rule_line(rule), markup=False)
    if output:
        write_text(text, output)
    if not result.passed:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))
