"""``whatif --sweep`` on the page: each metric against the swept knob's value, the
prediction's band shaded around it and the trace's own value as a dashed rule, beside
the table of the same numbers (one row per value)."""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.render.chart_style import finish, log_axis, log_scale
from servetrace.render.report_sections import Section
from servetrace.render.whatif import NAMES, ms, policy_name, predicted
from servetrace.whatif.model import WhatIf
from servetrace.whatif.replay import METRICS

CURVE_STATS = ("p50", "p99")  # the curves drawn; the per-value sections hold the rest
STAT_COLORS = {"p50": "#4e79a7", "p99": "#e15759"}


def sweep_frame(result: WhatIf, knob: str) -> pl.DataFrame:
    """One row per swept value, metric and drawn statistic: predicted, band, trace (ns)."""
    rows = [
        {
            "value": p.limits[knob],
            "metric": metric,
            "stat": stat,
            "predicted_ns": figure["predicted_ns"],
            "band_ns": figure["band_ns"],
            "trace_ns": figure["real_ns"],
        }
        for p in result.predictions
        for metric in METRICS
        for stat in CURVE_STATS
        for figure in (p.figures[metric][stat],)
    ]
    return pl.DataFrame(
        rows,
        schema={
            "value": pl.Int64,
            "metric": pl.String,
            "stat": pl.String,
            "predicted_ns": pl.Float64,
            "band_ns": pl.Float64,
            "trace_ns": pl.Float64,
        },
    )


def _curve(frame: pl.DataFrame, metric: str, knob: str) -> Any:
    """One metric's p50 and p99 against the knob, ± band, and the trace's values."""
    import altair as alt

    data = frame.filter(pl.col("metric") == metric, pl.col("predicted_ns").is_not_null()).select(
        "value",
        "stat",
        predicted_ms=(pl.col("predicted_ns") / 1e6).round(3),
        low_ms=((pl.col("predicted_ns") - pl.col("band_ns").fill_null(0)) / 1e6).round(3),
        high_ms=((pl.col("predicted_ns") + pl.col("band_ns").fill_null(0)) / 1e6).round(3),
        trace_ms=(pl.col("trace_ns") / 1e6).round(3),
    )
    values = sorted(set(data["value"].to_list()))
    spread = len(values) > 1 and values[0] > 0 and values[-1] >= 4 * values[0]
    scale = alt.Scale(type="log", base=2, nice=False) if spread else alt.Scale(zero=False)
    x = alt.X("value:Q", scale=scale, axis=alt.Axis(values=values), title=knob.replace("_", "-"))
    color = alt.Color(
        "stat:N",
        title=None,
        scale=alt.Scale(domain=list(CURVE_STATS), range=list(STAT_COLORS.values())),
        legend=alt.Legend(orient="bottom", symbolType="stroke", symbolOpacity=1),
    )
    # p50 and p99 can be orders of magnitude apart: a log axis then, if nothing is 0.
    ys = pl.concat([data["low_ms"], data["high_ms"], data["trace_ms"]]).drop_nulls()
    logged = ys.len() > 0 and ys.min() > 0 and ys.max() >= 10 * ys.min()  # type: ignore[operator]
    y = alt.Y(
        "low_ms:Q",
        title=f"{NAMES[metric]} (ms{', log' if logged else ''})",
        scale=log_scale() if logged else alt.Scale(),
        axis=log_axis(ys) if logged else alt.Axis(),
    )
    base = alt.Chart(data)
    band = base.mark_area(opacity=0.18).encode(x=x, y=y, y2="high_ms:Q", color=color)
    line = base.mark_line(point=True).encode(
        x=x,
        y="predicted_ms:Q",
        color=color,
        tooltip=[
            alt.Tooltip("value:Q", title=knob.replace("_", "-")),
            "stat",
            alt.Tooltip("predicted_ms:Q", format=",.1f"),
            alt.Tooltip("low_ms:Q", format=",.1f"),
            alt.Tooltip("high_ms:Q", format=",.1f"),
        ],
    )
    trace = (
        alt.Chart(data.unique("stat", maintain_order=True))
        .mark_rule(strokeDash=[4, 3], opacity=0.7)
        .encode(y="trace_ms:Q", color=color, tooltip=["stat", alt.Tooltip("trace_ms:Q")])
    )
    return finish((band + trace + line).properties(width=300, height=200, title=NAMES[metric]))


def sweep_section(result: WhatIf) -> Section | None:
    """The sweep's curves and table, or None when the predictions are not a sweep."""
    knob = result.swept
    if knob is None:
        return None
    frame = sweep_frame(result, knob)
    flag = knob.replace("_", "-")
    header = [flag] + [f"{NAMES[m]} {s}" for m in METRICS for s in CURVE_STATS]
    ends = sorted(result.predictions, key=lambda p: p.limits[knob] or 0)
    trace_row = ["trace (its own policy)"] + [
        ms(result.predictions[0].figures[m][s]["real_ns"]) for m in METRICS for s in CURVE_STATS
    ]
    rows = [trace_row] + [
        [f"{p.limits[knob]:,}"] + [predicted(p.figures[m][s]) for m in METRICS for s in CURVE_STATS]
        for p in ends
    ]
    first, last = (p.figures["ttft"]["p99"] for p in (ends[0], ends[-1]))
    sentence = (
        f"TTFT p99 {ms(first['predicted_ns'])} ± {ms(first['band_ns'])} at {flag} "
        f"{ends[0].limits[knob]:,}, {ms(last['predicted_ns'])} ± {ms(last['band_ns'])} at "
        f"{ends[-1].limits[knob]:,} (the trace: {ms(first['real_ns'])})"
    )
    policy = policy_name(result.predictions[0].policy, result)
    charts = [
        (f"whatif-sweep-{metric}", _curve(frame, metric, knob))
        for metric in METRICS
        if frame.filter(pl.col("metric") == metric)["predicted_ns"].is_not_null().any()
    ]
    return Section(
        id="whatif-sweep",
        title=f"Sweep: {policy} over {flag}",
        sentence=sentence,
        charts=charts,
        table={"header": header, "rows": rows},
        note="lines: predicted; shade: ± the replay's error; dashed: the trace under its "
        "own policy",
    )
