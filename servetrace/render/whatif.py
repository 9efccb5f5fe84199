"""The what-if report: JSON (``whatif``: calibration, validation, predictions), a table
and Markdown, from one dictionary."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from servetrace.render.format import short_ms
from servetrace.render.summary import render_json
from servetrace.whatif.model import Prediction, WhatIf
from servetrace.whatif.replay import METRICS, STATS, TOLERANCES

NAMES = {"ttft": "TTFT", "queue_wait": "queue wait", "e2e": "e2e", "itl_mean": "mean ITL"}


def whatif_dict(result: WhatIf) -> dict[str, Any]:
    calibration = asdict(result.calibration)
    return {
        "whatif": {
            "trace": result.trace,
            "calibration": calibration,
            "workload": {
                "requests": result.workload.requests.height,
                "left_out": result.workload.left_out,
                "left_out_reason": "did not complete in the trace: output length unknown",
                "priority_by": result.workload.priority_by,
                "priority_missing": result.workload.priority_missing,
            },
            "validation": {
                "policy": result.calibration.policy,
                "tolerances": {
                    stat: {"relative": rel, "absolute_ns": absolute}
                    for stat, (rel, absolute) in TOLERANCES.items()
                },
                "metrics": result.validation,
                "missed": list(result.missed),
                "trusted": result.trusted,
                "forced": result.forced,
            },
            "sweep": result.swept,
            "predictions": [
                {"policy": p.policy, "limits": p.limits, "metrics": p.figures}
                for p in result.predictions
            ],
        }
    }


def render_whatif_json(result: WhatIf) -> str:
    return render_json(whatif_dict(result)) + "\n"


def ms(value: float | None) -> str:
    return "n/a" if value is None else short_ms(value / 1e6)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def validation_rows(result: WhatIf) -> list[tuple[str, str, str, str, str, str]]:
    """Each metric and statistic of the validation in words: metric, stat, trace, replay,
    relative error, within tolerance (yes / no / n/a); every view shows these."""
    rows = []
    for metric in METRICS:
        for stat in STATS:
            cell = result.validation[metric]["stats"][stat]  # type: ignore[index]
            agrees = cell["agrees"]
            rows.append(
                (
                    NAMES[metric],
                    stat,
                    ms(cell["real_ns"]),
                    ms(cell["replayed_ns"]),
                    _percent(cell.get("relative_error")),
                    "n/a" if agrees is None else ("yes" if agrees else "no"),
                )
            )
    return rows


def predicted(figure: dict[str, float | None]) -> str:
    """``9331 ms ± 173 ms``: the prediction with its band."""
    band = figure["band_ns"]
    return ms(figure["predicted_ns"]) + ("" if band is None else f" ± {ms(band)}")


def knobs(limits: dict[str, int | None]) -> str:
    return ", ".join(f"{k.replace('_', '-')} {v}" for k, v in limits.items() if v is not None)


def policy_name(policy: str, result: WhatIf) -> str:
    """``priority by tier``: the priority policy says what orders it."""
    by = result.workload.priority_by
    return f"{policy} by {by}" if policy == "priority" and by else policy


def prediction_name(prediction: Prediction, result: WhatIf) -> str:
    return f"{policy_name(prediction.policy, result)} {knobs(prediction.limits)}".strip()


def headline(result: WhatIf) -> list[str]:
    """What the user must know first: was the model trusted, and on what."""
    model = result.calibration
    costs = model.costs
    lines = [
        f"calibrated on {result.trace} ({model.source}, {int(model.fit['steps']):,} steps): "
        f"step = {ms(costs['base_ns'])} + {ms(costs['prefill_token_ns'])}/prompt token "
        f"+ {ms(costs['decode_seq_ns'])}/decoding request "
        f"+ {costs['context_token_ns']:.0f} ns/context token "
        f"(median step error {model.fit['median_relative_error']:.1%})",
        "limits: "
        + "; ".join(
            f"{name.replace('_', '-')} "
            + (f"{limit.value:,}" if limit.value is not None else "none")
            + f" ({limit.how})"
            for name, limit in model.limits.items()
        ),
    ]
    if result.workload.left_out:
        lines.append(
            f"{result.workload.left_out} request(s) left out: they did not complete in the "
            "trace, so their output length is unknown"
        )
    by = result.workload.priority_by
    if by is not None:
        missing = result.workload.priority_missing
        lines.append(
            f"priority order: {by}, lower first, by arrival within a level"
            + (f"; {missing:,} request(s) without a {by} run after every level" if missing else "")
        )
    own = policy_name(model.policy, result)
    if result.trusted:
        lines.append(f"replay under {own}: every statistic within its tolerance")
    else:
        verdict = "predicting anyway (--force)" if result.forced else "no prediction"
        lines.append(f"replay under {own} misses {', '.join(result.missed)}: {verdict}")
    return lines


def _validation_table(result: WhatIf) -> Table:
    table = Table(title=f"replay under {result.calibration.policy} vs the trace", box=None)
    for column in ("metric", "stat", "trace", "replay", "error", "ok", "MAPE", "r"):
        table.add_column(column, justify="left" if column in ("metric", "stat") else "right")
    for i, (name, stat, real, replay, error, agrees) in enumerate(validation_rows(result)):
        first = i % len(STATS) == 0
        row = result.validation[METRICS[i // len(STATS)]]
        table.add_row(
            name if first else "",
            stat,
            real,
            replay,
            error,
            "NO" if agrees == "no" else agrees,
            f"{row['mape']:.1%}" if first and row["mape"] is not None else "",
            f"{row['pearson_r']:.3f}" if first and row["pearson_r"] is not None else "",
        )
    return table


def _prediction_table(result: WhatIf) -> Table:
    table = Table(title="predicted on the same requests (± the replay's error)", box=None)
    table.add_column("metric")
    table.add_column("stat")
    table.add_column("trace", justify="right")
    for p in result.predictions:
        table.add_column(prediction_name(p, result), justify="right")
    for metric in METRICS:
        for i, stat in enumerate(STATS):
            real = result.predictions[0].figures[metric][stat]["real_ns"]
            cells = [predicted(p.figures[metric][stat]) for p in result.predictions]
            table.add_row(NAMES[metric] if i == 0 else "", stat, ms(real), *cells)
    return table


def whatif_table(result: WhatIf) -> Group:
    parts: list[Any] = [Text(line) for line in headline(result)]
    parts += [Text(""), _validation_table(result)]
    if result.predictions:
        parts += [Text(""), _prediction_table(result)]
    return Group(*parts)


def whatif_markdown(result: WhatIf) -> str:
    lines = ["# What-if", ""]
    lines += [f"- {line}" for line in headline(result)]
    lines += ["", f"## Replay under {result.calibration.policy}", ""]
    lines += [
        "| metric | stat | trace | replay | error | within tolerance |",
        "|---|---|--:|--:|--:|---|",
    ]
    lines += [f"| {' | '.join(row)} |" for row in validation_rows(result)]
    for p in result.predictions:
        lines += ["", f"## Predicted: {prediction_name(p, result)}", ""]
        lines += ["| metric | stat | trace | predicted | ± replay error |", "|---|---|--:|--:|--:|"]
        for metric in METRICS:
            for stat in STATS:
                f = p.figures[metric][stat]
                lines.append(
                    f"| {NAMES[metric]} | {stat} | {ms(f['real_ns'])} | "
                    f"{ms(f['predicted_ns'])} | {ms(f['band_ns'])} |"
                )
    return "\n".join(lines) + "\n"
