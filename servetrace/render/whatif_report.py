"""``whatif --report``: the what-if as an HTML page. First the validation (the replay
against the trace per request, and its errors), a sweep's curves (each metric against
the swept knob's value, the band shaded around it, the trace's own value as a dashed
rule, beside the table of the same numbers) and each prediction with its band; then the
report's own pages of the trace, the replay and each prediction, and their comparisons
with the trace, whose CDFs put real, replayed and predicted side by side."""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.render.chart_style import finish, log_axis, log_scale
from servetrace.render.report_sections import Section, TraceView
from servetrace.render.whatif import (
    NAMES,
    headline,
    ms,
    policy_name,
    predicted,
    prediction_name,
    validation_rows,
)
from servetrace.whatif.model import WhatIf
from servetrace.whatif.replay import METRICS

SCATTER = ("ttft", "e2e")  # the per-request metrics the validation scatter draws
CURVE_STATS = ("p50", "p99")  # the curves drawn; the per-value sections hold the rest
STAT_COLORS = {"p50": "#4e79a7", "p99": "#e15759"}


def _scatter(real: pl.DataFrame, replayed: pl.DataFrame) -> Any:
    """Each request's replayed value against its real one (log-log, y = x drawn)."""
    import altair as alt

    columns = [f"{m}_ns" for m in SCATTER]
    paired = real.select("request_id", *columns).join(
        replayed.select("request_id", *columns), on="request_id", suffix="_replayed"
    )
    long = pl.concat(
        [
            paired.select(
                "request_id",
                pl.lit(NAMES[m]).alias("metric"),
                (pl.col(f"{m}_ns") / 1e6).round(3).alias("trace_ms"),
                (pl.col(f"{m}_ns_replayed") / 1e6).round(3).alias("replay_ms"),
            )
            for m in SCATTER
        ]
    ).filter((pl.col("trace_ms") > 0) & (pl.col("replay_ms") > 0))
    values = pl.concat([long["trace_ms"], long["replay_ms"]])
    low, high = float(values.min() or 1), float(values.max() or 1)  # type: ignore[arg-type]
    diagonal = pl.DataFrame({"trace_ms": [low, high], "replay_ms": [low, high]})
    points = (
        alt.Chart(long)
        .mark_circle(size=12, opacity=0.5)
        .encode(
            x=alt.X(
                "trace_ms:Q", scale=log_scale(), axis=log_axis(values), title="trace (ms, log)"
            ),
            y=alt.Y(
                "replay_ms:Q", scale=log_scale(), axis=log_axis(values), title="replay (ms, log)"
            ),
            color=alt.Color("metric:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=[
                "request_id",
                "metric",
                alt.Tooltip("trace_ms:Q", format=",.1f"),
                alt.Tooltip("replay_ms:Q", format=",.1f"),
            ],
        )
    )
    line = (
        alt.Chart(diagonal)
        .mark_line(color="#999", strokeDash=[4, 3])
        .encode(x="trace_ms:Q", y="replay_ms:Q")
    )
    return finish((line + points).properties(width=420, height=420))


def _bands(figures: dict[str, dict[str, dict[str, float | None]]]) -> Any:
    """Each statistic in the trace and as predicted, the prediction with its band."""
    import altair as alt

    rows = [
        {
            "statistic": f"{NAMES[m]} {s}",
            "trace": f["real_ns"],
            "predicted": f["predicted_ns"],
            "band": f["band_ns"] or 0.0,
        }
        for m, stats in figures.items()
        for s, f in stats.items()
    ]
    ms = 1e6
    frame = (
        pl.DataFrame(rows, schema_overrides={"trace": pl.Float64, "predicted": pl.Float64})
        .select(
            "statistic",
            trace_ms=pl.col("trace") / ms,
            predicted_ms=pl.col("predicted") / ms,
            low_ms=(pl.col("predicted") - pl.col("band")) / ms,
            high_ms=(pl.col("predicted") + pl.col("band")) / ms,
        )
        .filter((pl.col("trace_ms") > 0) & (pl.col("predicted_ms") > 0))
    )
    values = pl.concat([frame["trace_ms"], frame["predicted_ms"]]).drop_nulls()
    x = alt.X("trace_ms:Q", scale=log_scale(), axis=log_axis(values), title="ms (log)")
    y = alt.Y("statistic:N", sort=None, title=None)
    trace = alt.Chart(frame).mark_point(shape="diamond", color="#888", size=60).encode(x=x, y=y)
    band = alt.Chart(frame).mark_rule(color="#4e79a7").encode(x="low_ms:Q", x2="high_ms:Q", y=y)
    predicted = (
        alt.Chart(frame)
        .mark_circle(color="#4e79a7", size=50)
        .encode(
            x="predicted_ms:Q",
            y=y,
            tooltip=[
                "statistic",
                alt.Tooltip("trace_ms:Q", format=",.1f"),
                alt.Tooltip("predicted_ms:Q", format=",.1f"),
            ],
        )
    )
    return finish((trace + band + predicted).properties(width=520))


def whatif_sections(result: WhatIf) -> list[Section]:
    lines = headline(result)
    charts = []
    if result.real is not None and result.replayed is not None:
        charts.append(
            ("whatif-scatter", _scatter(result.real.per_request, result.replayed.per_request))
        )
    sections = [
        Section(
            id="whatif-validation",
            title=f"Validation: the replay under {result.calibration.policy} against the trace",
            sentence=lines[-1],
            charts=charts,
            table={
                "header": ["metric", "stat", "trace", "replay", "error", "within tolerance"],
                "rows": validation_rows(result),
            },
            note="; ".join(lines[:-1]),
        )
    ]
    if (sweep := sweep_section(result)) is not None:
        sections.append(sweep)
    for i, prediction in enumerate(result.predictions):
        cells = [
            [NAMES[m], s, ms(f["real_ns"]), predicted(f)]
            for m in METRICS
            for s, f in prediction.figures[m].items()
        ]
        p99 = prediction.figures["ttft"]["p99"]
        sections.append(
            Section(
                id=f"whatif-prediction-{i}",
                title=f"Predicted: {prediction_name(prediction, result)}",
                sentence=f"TTFT p99 {ms(p99['real_ns'])} → {ms(p99['predicted_ns'])} "
                f"± {ms(p99['band_ns'])} (the replay's error)",
                charts=[(f"whatif-bands-{i}", _bands(prediction.figures))],
                table={"header": ["metric", "stat", "trace", "predicted"], "rows": cells},
                note="grey diamond: the trace; blue: predicted, ± the replay's error",
            )
        )
    return sections


def whatif_html(result: WhatIf, seed: int = 0) -> str:
    """The page: the what-if first, then the trace, the replay and each prediction, and
    the comparison of each with the trace."""
    from servetrace.render.report import render_html
    from servetrace.render.report_build import with_the_first
    from servetrace.render.series import MAX_POINTS

    if result.real is None or result.replayed is None:
        raise ValueError("a what-if made without its trace has nothing to draw")
    analyses = [
        ("trace", result.real),
        (f"replay under {result.calibration.policy}", result.replayed),
        *((f"predicted: {prediction_name(p, result)}", p.analysis) for p in result.predictions),
    ]
    share = MAX_POINTS // len(analyses)
    views = [TraceView(label, analysis, points=share) for label, analysis in analyses]
    comparisons = with_the_first(views, seed)
    return render_html(views, comparisons, extra=[("What-if", whatif_sections(result))])


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
