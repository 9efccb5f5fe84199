"""``servetrace whatif TRACE --policy B``: what another policy would have done on this
very trace, from an engine model calibrated on it and validated by replaying it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from servetrace.cli._app import app, examples, guarded
from servetrace.cli._options import COUNT, StepsFromOpt, reading_options
from servetrace.cli._report import ReportOutOpt, SummaryFormatOpt, check_report_output, deliver
from servetrace.errors import ExitCode, UsageError
from servetrace.render.formats import SummaryFormat
from servetrace.sim.config import LIMITS, Policy


def _pairs(texts: list[str], flag: str) -> dict[str, list[int]]:
    """``NAME=V1,V2`` → {name: [values]}; names with - or _."""
    out: dict[str, list[int]] = {}
    for text in texts:
        name, sep, values = text.partition("=")
        key = name.strip().replace("-", "_")
        if not sep or key not in LIMITS:
            raise UsageError(
                f"{flag} {text!r}: give NAME=VALUE with NAME one of "
                + ", ".join(k.replace("_", "-") for k in LIMITS)
            )
        try:
            out[key] = [int(v) for v in values.split(",")]
        except ValueError:
            raise UsageError(f"{flag} {text!r}: values must be whole numbers") from None
    return out


@app.command(
    epilog=examples(
        "servetrace whatif trace.parquet --policy chunked --max-batch-tokens 512",
        "servetrace whatif trace.parquet --policy chunked --sweep max-batch-tokens=256,512,1024",
        "servetrace whatif trace.parquet --policy sjf --calibration-out model.json -f json",
        "servetrace whatif trace.parquet --policy priority --priority-by tier",
    )
)
@guarded
@reading_options
def whatif(
    traces: Annotated[list[str], typer.Argument(metavar="TRACE...", help="One run.")],
    policy: Annotated[Policy, typer.Option(help="The policy to predict.")],
    max_batch_tokens: Annotated[
        int | None, typer.Option(help="Token budget per step under the policy.", callback=COUNT)
    ] = None,
    max_running: Annotated[
        int | None, typer.Option(help="Most requests running at once.", callback=COUNT)
    ] = None,
    kv_tokens: Annotated[
        int | None, typer.Option(help="KV-cache capacity in tokens.", callback=COUNT)
    ] = None,
    priority_by: Annotated[
        str | None,
        typer.Option(
            metavar="ATTR",
            help="Under --policy priority: the per-request attribute that orders the queue "
            "(lower first; requests without one last).",
        ),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option(metavar="KNOB=V1,V2,…", help="Predict once per value of one knob."),
    ] = None,
    trace_policy: Annotated[
        Policy | None,
        typer.Option(help="The trace's own policy (default: told from its steps)."),
    ] = None,
    trace_limit: Annotated[
        list[str] | None,
        typer.Option(
            metavar="KNOB=VALUE",
            help="A limit the trace's engine ran with (e.g. max-running=128); repeatable.",
        ),
    ] = None,
    steps: Annotated[
        Path | None, typer.Option(help="Engine step records of the trace, to fit on.")
    ] = None,
    steps_from: StepsFromOpt = None,
    calibration: Annotated[
        Path | None, typer.Option(help="Use this calibration file instead of fitting.")
    ] = None,
    calibration_out: Annotated[
        Path | None, typer.Option(help="Write the calibration here (JSON).")
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            help="Also write an HTML page: the validation scatter, real vs replayed vs "
            "predicted CDFs (needs the report extra)."
        ),
    ] = None,
    events_out: Annotated[
        Path | None, typer.Option(help="Write the predicted trace here (.parquet, .csv…).")
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Predict even when the replay misses its tolerances.")
    ] = False,
    extrapolate: Annotated[
        bool, typer.Option(help="Predict outside the calibrated range.")
    ] = False,
    fmt: SummaryFormatOpt = SummaryFormat.table,
    output: ReportOutOpt = None,
    reading: dict[str, Any] | None = None,
) -> None:
    """Predict another policy on this trace's requests: calibrate, replay, predict.

    The engine model is fitted on the trace (or its --steps), replayed under the trace's
    own policy and compared request by request; only a replay within its tolerances
    predicts (exit 1 with the figures otherwise, unless --force). Each prediction carries
    the replay's error as its band."""
    from servetrace.api._whatif import whatif as run
    from servetrace.render import whatif as render

    if fmt is SummaryFormat.csv:
        raise UsageError("whatif writes table, json or markdown", hint="use -f json for data")
    from servetrace.outputs import check_directory, check_frame_output, write_frame, write_text

    check_report_output(output, traces)
    check_frame_output(events_out, "--events-out")
    if report is not None:
        from servetrace.render.report import require_extra

        require_extra()
        check_report_output(report, traces)
    if calibration_out is not None:
        check_directory(calibration_out, "--calibration-out")
    knobs = dict(max_batch_tokens=max_batch_tokens, max_running=max_running, kv_tokens=kv_tokens)
    chosen = [(policy.value, knobs)]
    if sweep is not None:
        ((name, values),) = _pairs([sweep], "--sweep").items()
        if knobs.get(name) is not None:
            flag = name.replace("_", "-")
            raise UsageError(f"--sweep {flag} and --{flag} exclude each other: give one")
        chosen = [(policy.value, {**knobs, name: value}) for value in values]
    if events_out is not None and len(chosen) > 1:
        raise UsageError("--events-out writes one predicted trace: give no --sweep")
    given = {k: v[0] for k, v in _pairs(trace_limit or [], "--trace-limit").items()}
    result = run(
        traces,
        chosen,
        steps=steps,
        steps_format=steps_from,
        calibration=calibration,
        trace_limits=given,
        trace_policy=trace_policy.value if trace_policy else None,
        force=force,
        extrapolate=extrapolate,
        reading=reading,
        priority_by=priority_by,
    )
    if calibration_out is not None:
        write_text(result.calibration.to_json(), calibration_out)
    if events_out is not None and result.predictions:
        write_frame(result.predictions[0].analysis.events("--events-out").collect(), events_out)
    if report is not None and result.predictions:
        from servetrace.render.whatif_report import whatif_html

        write_text(whatif_html(result), report)
    if fmt is SummaryFormat.json:
        deliver(render.render_whatif_json(result), output)
    elif fmt is SummaryFormat.markdown:
        deliver(render.whatif_markdown(result), output)
    else:
        deliver([render.whatif_table(result)], output)
    if not result.trusted and not force:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))
