"""The comparison's charts: the forest of candidate/baseline ratios, the decomposition delta.

A ratio of 0 (a count that fell to zero) or of infinity (one that rose from zero) has no
place on a log axis; drawn as is, it drags the axis to nothing and every marker piles at
its edge. Such values are drawn *at* the edge of an axis that ends near the finite ones,
with their own marker shape (◀ at 0, ▶ at ∞) and their true value in the tooltip.
"""

from __future__ import annotations

import math

import polars as pl

from servetrace.render.chart_style import Spec, finish, log_scale, log_ticks

WIDTH = 640
ZERO, INFINITE = "ratio 0: drawn at the left edge", "ratio ∞: drawn at the right edge"
SHAPES = {
    "faster": "circle",
    "slower": "triangle-up",
    "no significant change": "square",
    "unavailable": "cross",
    ZERO: "triangle-left",
    INFINITE: "triangle-right",
}


def ratio_bounds(frame: pl.DataFrame) -> tuple[float, float]:
    """An axis around 1 and every finite positive ratio and interval end, a little wider."""
    values = pl.concat([frame["ratio"], frame["ci_low"], frame["ci_high"]]).cast(pl.Float64)
    finite = values.filter(values.is_finite() & (values > 0))
    low = min(float(finite.min()), 1.0) if finite.len() else 1.0  # type: ignore[arg-type]
    high = max(float(finite.max()), 1.0) if finite.len() else 1.0  # type: ignore[arg-type]
    return _round(low / 1.25), _round(high * 1.25)


def _clip(column: str, low: float, high: float) -> pl.Expr:
    c = pl.col(column).cast(pl.Float64)
    return (
        pl.when(c.is_null() | c.is_nan())
        .then(None)
        .when(c <= low)
        .then(pl.lit(low))
        .when(c >= high)
        .then(pl.lit(high))
        .otherwise(c)
        .alias(f"{column}_drawn")
    )


def ratio_frame(rows: pl.DataFrame) -> tuple[pl.DataFrame, tuple[float, float]]:
    """The rows to draw, with ``*_drawn`` positions inside the axis and a ``reading``."""
    frame = rows.filter(pl.col("ratio").is_not_null()).with_columns(
        (pl.col("metric") + "." + pl.col("stat")).alias("statistic"),
        pl.col("ratio", "ci_low", "ci_high").cast(pl.Float64),
    )
    low, high = ratio_bounds(frame)
    frame = frame.with_columns(
        _clip("ratio", low, high),
        _clip("ci_low", low, high),
        _clip("ci_high", low, high),
        pl.when(pl.col("ratio") <= 0)
        .then(pl.lit(ZERO))
        .when(pl.col("ratio").is_infinite())
        .then(pl.lit(INFINITE))
        .when(pl.col("significant"))
        .then(pl.col("verdict"))
        .otherwise(pl.lit("no significant change"))
        .alias("reading"),
        # The tooltip says the true values: 0, ∞ or the number.
        *[_text(c) for c in ("ratio", "ci_low", "ci_high")],
    )
    return frame, (low, high)


def _text(column: str) -> pl.Expr:
    c = pl.col(column)
    return (
        pl.when(c.is_infinite())
        .then(pl.lit("∞"))
        .otherwise(c.round(3).cast(pl.String))
        .fill_null("n/a")
        .alias(f"{column}_text")
    )


def ratio_chart(rows: pl.DataFrame) -> Spec:
    """Candidate/baseline ratio per metric and statistic with its bootstrap interval."""
    import altair as alt

    frame, (low, high) = ratio_frame(rows)
    # JSON has no infinity: the chart's data are the clipped positions and the texts.
    drawn = frame.select(
        "candidate",
        "statistic",
        "reading",
        *[f"{c}_{kind}" for c in ("ratio", "ci_low", "ci_high") for kind in ("drawn", "text")],
    )
    y = alt.Y(
        "statistic:N", sort=frame["statistic"].unique(maintain_order=True).to_list(), title=None
    )
    x_scale = log_scale(domain=[low, high])
    readings = [r for r in SHAPES if r in set(frame["reading"].to_list())]
    whiskers = (
        alt.Chart(drawn)
        .mark_rule()
        .encode(
            y=y,
            x=alt.X(
                "ci_low_drawn:Q",
                scale=x_scale,
                axis=alt.Axis(values=log_ticks(low, high)),
                title="candidate / baseline (log)",
            ),
            x2="ci_high_drawn:Q",
            color=alt.Color("candidate:N"),
        )
    )
    dots = (
        alt.Chart(drawn)
        .mark_point(filled=True, size=60)
        .encode(
            y=y,
            x="ratio_drawn:Q",
            color=alt.Color("candidate:N"),
            shape=alt.Shape(
                "reading:N",
                scale=alt.Scale(domain=readings, range=[SHAPES[r] for r in readings]),
            ),
            tooltip=[
                "candidate",
                "statistic",
                alt.Tooltip("ratio_text:N", title="ratio"),
                alt.Tooltip("ci_low_text:N", title="interval from"),
                alt.Tooltip("ci_high_text:N", title="interval to"),
                "reading",
            ],
        )
    )
    one = (
        alt.Chart(pl.DataFrame({"x": [1.0]}))
        .mark_rule(strokeDash=[3, 3], color="#666")
        .encode(x="x:Q")
    )
    return finish(
        (whiskers + dots + one).properties(width=WIDTH, height=max(120, 16 * frame.height))
    )


def _round(value: float) -> float:
    """Three significant digits: the axis ends need no more."""
    if value <= 0 or not math.isfinite(value):
        return value
    digits = 2 - math.floor(math.log10(value))
    return round(value, digits)


def decomposition_delta(parts: pl.DataFrame) -> Spec:
    """Mean per-component delta (candidate − baseline): candidate, component, delta_mean_ms."""
    import altair as alt

    chart = (
        alt.Chart(parts)
        .mark_bar()
        .encode(
            y=alt.Y(
                "component:N",
                sort=parts["component"].unique(maintain_order=True).to_list(),
                title=None,
            ),
            x=alt.X("delta_mean_ms:Q", title="mean delta, candidate − baseline (ms)"),
            color=alt.Color("candidate:N"),
            yOffset="candidate:N",
            tooltip=["candidate", "component", alt.Tooltip("delta_mean_ms:Q", format="+,.1f")],
        )
        .properties(width=WIDTH, height=40 * parts["component"].n_unique())
    )
    return finish(chart)
