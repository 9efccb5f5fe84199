"""Altair chart builders: frames of ns numbers in, Vega-Lite specs (dicts) out.

This is where ns become ms (or s on time axes). Altair is imported inside each builder's
module-level helper only when a chart is built: ``servetrace --help`` and ``analyze``
never load it (the ``report`` extra).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.render.chart_style import (
    COUNT_FORMAT,
    LEVEL_COLORS,
    LEVEL_DASHES,
    WORDS,
    Spec,
    finish,
    log_axis,
    log_scale,
)
from servetrace.render.series import OverTime, RequestPoints

WIDTH = 640
PHASE_COLORS = {
    "queued": "#f28e2b",
    "ttft": "#76b7b2",
    "prefill": "#b07aa1",
    "decode": "#4e79a7",
    "delivery_tail": "#9c9c9c",
    "awaiting_token": "#ff9d9a",
    "unknown_state": "#bab0ac",
    "requeued": "#e15759",
}
MS = 1e6
# Phase names in the legend as words: "delivery tail", "awaiting token" (each has one "_").
PHASE_LEGEND = {"labelExpr": "replace(datum.label, '_', ' ')"}


def _alt() -> Any:
    import altair as alt

    return alt


def _ms(column: str, alias: str | None = None) -> pl.Expr:
    # µs precision is plenty on a chart and keeps the embedded data small.
    return (
        (pl.col(column).cast(pl.Float64) / MS).round(3).alias(alias or column.replace("_ns", "_ms"))
    )


def _seconds(column: str, origin_ns: int, alias: str) -> pl.Expr:
    return ((pl.col(column) - origin_ns) / 1e9).round(3).alias(alias)


def decomposition_bar(parts: pl.DataFrame) -> Spec:
    """Mean response split into phases: ``phase``, ``mean_ns`` (in lifecycle order)."""
    alt = _alt()
    frame = parts.with_columns(
        _ms("mean_ns", "mean_ms"),
        (pl.col("mean_ns") / pl.col("mean_ns").sum()).alias("share"),
        pl.int_range(pl.len()).alias("order"),
    )
    order = frame["phase"].to_list()
    chart = (
        alt.Chart(frame)
        .mark_bar(height=36)
        .encode(
            x=alt.X("mean_ms:Q", stack="zero", title="mean response (ms)"),
            color=alt.Color(
                "phase:N",
                sort=order,
                scale=alt.Scale(domain=order, range=[PHASE_COLORS[p] for p in order]),
                legend=PHASE_LEGEND,
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                "phase",
                alt.Tooltip("mean_ms:Q", format=",.1f"),
                alt.Tooltip("share:Q", format=".1%"),
            ],
        )
        .properties(width=WIDTH, height=60)
    )
    return finish(chart)


def cdf_chart(curves: pl.DataFrame, marks: pl.DataFrame, title: str, by: str = "metric") -> Spec:
    """Empirical CDFs on a log x axis (ending at the data) with labelled percentile rules.

    ``curves``: ``by``, value_ns, fraction; ``marks``: ``by``, label (p50…), value_ns.
    """
    alt = _alt()
    lines = curves.select(by, _ms("value_ns", "value_ms"), pl.col("fraction").round(5))
    # Each rule's label sits where it crosses its curve: p50 at 50 %, p99 at 99 %.
    rules = marks.select(
        by,
        "label",
        _ms("value_ns", "value_ms"),
        (pl.col("label").str.slice(1).cast(pl.Float64) / 100).alias("fraction"),
    )
    x = alt.X(
        "value_ms:Q",
        scale=log_scale(),
        axis=log_axis(lines["value_ms"]),
        title=f"{WORDS.get(title, title)} (ms, log)",
    )
    # Legend and colours in the order given (the baseline first), not alphabetical.
    order = lines[by].unique(maintain_order=True).to_list()
    color = alt.Color(
        f"{by}:N",
        title=None,
        scale=alt.Scale(domain=order),  # a domain, not a sort: no Vega expression of names
        # One curve needs no legend: the chart's title names it.
        legend=alt.Legend(orient="bottom", direction="vertical") if len(order) > 1 else None,
    )
    base = (
        alt.Chart(lines)
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("fraction:Q", title="fraction ≤ x", axis=alt.Axis(format="%")),
            color=color,
            tooltip=[
                by,
                alt.Tooltip("value_ms:Q", format=",.2f"),
                alt.Tooltip("fraction:Q", format=".1%"),
            ],
        )
    )
    tooltip = [by, "label", alt.Tooltip("value_ms:Q", format=",.2f")]
    ticks = (
        alt.Chart(rules)
        .mark_rule(strokeDash=[4, 3])
        .encode(x="value_ms:Q", color=color, tooltip=tooltip)
    )
    names = (
        alt.Chart(rules)
        .mark_text(align="left", dx=3, dy=-5, fontSize=10)
        .encode(
            x="value_ms:Q",
            y="fraction:Q",
            text="label:N",
            color=color,
            tooltip=tooltip,
        )
    )
    return finish((base + ticks + names).properties(width=WIDTH // 2 - 20, height=200, title=title))


def rates_chart(over: OverTime) -> Spec:
    alt = _alt()
    frame = over.rates.with_columns(_seconds("t_ns", over.origin_ns, "t_s")).unpivot(
        index="t_s", on=["arrivals_per_s", "output_tokens_per_s"], variable_name="series"
    )
    frame = frame.drop_nulls("value").with_columns(pl.col("series").replace(WORDS))
    chart = (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("t_s:Q", title="time since trace start (s)"),
            y=alt.Y("value:Q", title="per second"),
            row=alt.Row("series:N", title=None, header=alt.Header(labelFontWeight="bold")),
            tooltip=[
                "series",
                alt.Tooltip("t_s:Q", format=",.1f"),
                alt.Tooltip("value:Q", format=",.1f"),
            ],
        )
        .properties(width=WIDTH, height=110)
        .resolve_scale(y="independent")
    )
    return finish(chart)


def levels_chart(over: OverTime) -> Spec:
    alt = _alt()
    frame = over.levels.select(
        pl.col("series").replace(WORDS), "peak", _seconds("t_ns", over.origin_ns, "t_s")
    )
    present = set(frame["series"].to_list())
    shown = [name for name in LEVEL_COLORS if name in present]
    chart = (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("t_s:Q", title="time since trace start (s)"),
            y=alt.Y(
                "peak:Q",
                title=f"requests (peak per {over.bin_ns / 1e9:g} s bin)",
                axis=alt.Axis(format=COUNT_FORMAT, tickMinStep=1),
            ),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(domain=shown, range=[LEVEL_COLORS[n] for n in shown]),
            ),
            strokeDash=alt.StrokeDash(
                "series:N",
                title=None,
                scale=alt.Scale(domain=shown, range=[LEVEL_DASHES[n] for n in shown]),
            ),
            tooltip=[
                "series",
                alt.Tooltip("t_s:Q", format=",.1f"),
                alt.Tooltip("peak:Q", format=COUNT_FORMAT),
            ],
        )
        .properties(width=WIDTH, height=180)
    )
    return finish(chart)


def latency_over_time(points: RequestPoints, origin_ns: int) -> Spec:
    alt = _alt()

    def since(frame: pl.DataFrame) -> pl.DataFrame:
        keep = [c for c in ("request_id", "metric", "quantile") if c in frame.columns]
        return frame.select(
            *keep, _seconds("arrival_ns", origin_ns, "arrival_s"), _ms("value_ns", "value_ms")
        )

    dots_frame = since(points.points)
    dots = (
        alt.Chart(dots_frame)
        .mark_circle(size=9, opacity=0.35)
        .encode(
            x=alt.X("arrival_s:Q", title="arrival (s since trace start)"),
            y=alt.Y(
                "value_ms:Q",
                scale=log_scale(),
                axis=log_axis(dots_frame["value_ms"]),
                title="latency (ms, log)",
            ),
            color=alt.Color("metric:N"),
            tooltip=["request_id", "metric", alt.Tooltip("value_ms:Q", format=",.1f")],
        )
    )
    lines = (
        alt.Chart(since(points.rolling))
        .mark_line(strokeWidth=2)
        .encode(
            x="arrival_s:Q",
            y="value_ms:Q",
            color=alt.Color("metric:N"),
            strokeDash=alt.StrokeDash("quantile:N", title=f"rolling ({points.window} requests)"),
        )
    )
    return finish((dots + lines).properties(width=WIDTH, height=240))


def waterfall_chart(slices: pl.DataFrame) -> Spec:
    """Slowest requests as rows of phase bars from arrival; ``requeued`` drawn over them."""
    alt = _alt()
    frame = slices.select(
        "request_id",
        "phase",
        _ms("from_ns", "from_ms"),
        _ms("to_ns", "to_ms"),
        _ms("e2e_ns", "e2e_ms"),
    ).with_columns((pl.col("to_ms") - pl.col("from_ms")).alias("duration_ms"))
    # Rows sorted by a rank field, not by a list of ids: Vega-Lite turns a sort list into a
    # Vega expression, whose parser rejects ids holding U+2028 or control characters.
    order = frame.sort("e2e_ms", descending=True)["request_id"].unique(maintain_order=True)
    frame = frame.join(
        pl.DataFrame({"request_id": order, "row": range(order.len())}), on="request_id"
    )
    phases = [p for p in PHASE_COLORS if p in set(frame["phase"].to_list())]
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("request_id:N", sort=alt.EncodingSortField("row", op="min"), title=None),
            x=alt.X("from_ms:Q", title="ms since arrival"),
            x2="to_ms:Q",
            color=alt.Color(
                "phase:N",
                scale=alt.Scale(domain=phases, range=[PHASE_COLORS[p] for p in phases]),
                legend=PHASE_LEGEND,
            ),
            order=alt.Order("from_ms:Q"),
            tooltip=["request_id", "phase", alt.Tooltip("duration_ms:Q", format=",.1f")],
        )
        .properties(width=WIDTH, height=max(120, 14 * order.len()))
    )
    return finish(chart)


def residual_chart(points: pl.DataFrame) -> Spec:
    alt = _alt()
    frame = points.select(
        "request_id",
        _ms("response_ns", "response_ms"),
        _ms("formula_residual_ns", "residual_ms"),
        pl.when(pl.col("within"))
        .then(pl.lit("within tolerance"))
        .otherwise(pl.lit("breaks it"))
        .alias("check"),
    )
    chart = (
        alt.Chart(frame)
        .mark_circle(size=14, opacity=0.6)
        .encode(
            x=alt.X(
                "response_ms:Q",
                scale=log_scale(),
                axis=log_axis(frame["response_ms"]),
                title="response (ms, log)",
            ),
            y=alt.Y("residual_ms:Q", title="residual: response − (ttft + (N−1)·itl_mean) (ms)"),
            color=alt.Color(
                "check:N",
                scale=alt.Scale(
                    domain=["within tolerance", "breaks it"], range=["#4e79a7", "#e15759"]
                ),
            ),
            tooltip=[
                "request_id",
                alt.Tooltip("residual_ms:Q", format=",.2f"),
                alt.Tooltip("response_ms:Q", format=",.1f"),
            ],
        )
        .properties(width=WIDTH, height=220)
    )
    return finish(chart)


# The per-slice chart (``report --slice``): one panel per figure family of
# ``analysis.slices``, on the same time axis as the other over-time charts, each figure
# drawn as a step over its slice.
PANELS = {
    "requests_per_s": "rates (per s)",
    "goodput_requests_per_s": "rates (per s)",
    "output_tokens_per_s": "output tok/s",
    "ttft_p50_ms": "TTFT (ms)",
    "ttft_p99_ms": "TTFT (ms)",
    "tpot_p50_ms": "TPOT (ms)",
    "tpot_p99_ms": "TPOT (ms)",
    "queued_mean": "requests (mean)",
    "running_mean": "requests (mean)",
}


def slices_chart(slices: pl.DataFrame, origin_ns: int, width: int = WIDTH) -> Spec:
    alt = _alt()
    frame = slices.select(
        _seconds("start_ns", origin_ns, "t_s"),
        "requests_per_s",
        "goodput_requests_per_s",
        "output_tokens_per_s",
        *[_ms(f"{m}_p{q}_ns") for m in ("ttft", "tpot") for q in (50, 99)],
        "queued_mean",
        "running_mean",
    )
    long = (
        frame.unpivot(index="t_s", variable_name="series")
        .drop_nulls("value")
        .with_columns(pl.col("series").replace_strict(PANELS).alias("panel"))
        .with_columns(pl.col("series").replace(WORDS))
    )
    chart = (
        alt.Chart(long)
        .mark_line(interpolate="step-after", point=True)
        .encode(
            x=alt.X("t_s:Q", title="slice start, s since trace start"),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("series:N", title=None),
            row=alt.Row("panel:N", title=None, sort=list(dict.fromkeys(PANELS.values()))),
            tooltip=[
                "series",
                alt.Tooltip("t_s:Q", format=",.1f"),
                alt.Tooltip("value:Q", format=",.2f"),
            ],
        )
        .properties(width=width, height=110)
        .resolve_scale(y="independent")
    )
    return finish(chart)
