"""The report's chart of one server family on the trace's time axis (``server_series``).

The x axis is the over-time charts' own: seconds since the trace start, its domain the
trace's span, so a scrape sits above the requests it counted. The server's line is solid,
the trace's own value of the same quantity dashed beside it; both are steps (a gauge holds
its value until the next scrape, a rate or mean its interval's value over the interval).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from servetrace.analysis.server_series import FamilySeries
from servetrace.render.chart_style import Spec, finish

WIDTH = 640
SERVER_COLOR, TRACE_COLOR = "#4e79a7", "#f28e2b"
POINTS = 1_000  # per line: more than a 640-pixel chart can show apart

# The trace's quantity beside each server family, in words.
TRACE_WORDS = {
    "queued": "trace: queued",
    "running": "trace: running",
    "success_counter": "trace: completions/s",
    "preemption_counter": "trace: preemptions/s",
    "prompt_tokens_counter": "trace: prompt tokens/s (at the first token)",
    "generation_tokens_counter": "trace: output tokens/s",
    "ttft": "trace: mean TTFT",
    "e2e": "trace: mean e2e",
    "queue_wait": "trace: mean queue wait",
    "prefill": "trace: mean prefill",
    "decode": "trace: mean decode",
    "itl": "trace: mean gap between output events",
}
Y_TITLES = {
    "value": "value at each scrape",
    "rate_per_s": "per second (each scrape interval)",
    "mean_ns": "mean per scrape interval (ms)",
    "mean": "mean per scrape interval",
}


def thinning(fs: FamilySeries, limit: int = POINTS) -> int:
    """Draw every k-th scrape (interval) so that a line has at most ``limit`` points."""
    counts = fs.server.group_by("labels").len()["len"].to_list()
    return max(1, -(-max(counts, default=0) // limit))


def server_word(fs: FamilySeries) -> str:
    return f"server: {fs.family}" + (f" (Σ {fs.series} series)" if fs.series > 1 else "")


def _frame(fs: FamilySeries, origin_ns: int, k: int) -> pl.DataFrame:
    """The points drawn: ``t_s``, ``line`` (``server``, ``trace`` or a summary's labels),
    ``value``; thinned alike on both sides (the trace keeps the server's instants)."""
    scale = 1e6 if fs.statistic == "mean_ns" else 1.0
    server = fs.server.filter(pl.int_range(pl.len()).over("labels") % k == 0)

    def side(frame: pl.DataFrame, line: pl.Expr) -> pl.DataFrame:
        return frame.select(
            ((pl.col("t_ns") - origin_ns) / 1e9).round(3).alias("t_s"),
            line.alias("line"),
            (pl.col("value") / scale).alias("value"),
        )

    many = fs.kind == "summary"
    parts = [side(server, pl.col("labels") if many else pl.lit("server"))]
    if fs.trace is not None:
        kept = fs.trace.filter(pl.col("t_ns").is_in(server["t_ns"].implode()))
        parts.append(side(kept, pl.lit("trace")))
    return pl.concat(parts).filter(pl.col("value").is_not_nan())


def family_chart(fs: FamilySeries, origin_ns: int, span_ns: int) -> tuple[Spec, int]:
    """The family's chart, and every how many points it keeps (1: all)."""
    import altair as alt

    k = thinning(fs)
    frame = _frame(fs, origin_ns, k)
    if fs.kind == "summary":
        color = alt.Color("line:N", title=None, scale=alt.Scale(scheme="tableau10"))
        dash: Any = alt.value([1, 0])
    else:
        # Short keys in the data (the page stays light), the words in the legend.
        words = {"server": server_word(fs)}
        if fs.trace_quantity is not None:
            words["trace"] = TRACE_WORDS.get(fs.trace_quantity, "trace")
        lines = [key for key in ("server", "trace") if key in set(frame["line"].to_list())]
        label = " : ".join(
            f"datum.label === {json.dumps(k)} ? {json.dumps(words[k])}" for k in lines
        )
        legend = alt.Legend(labelExpr=f"{label} : datum.label") if lines else None
        colors = {"server": SERVER_COLOR, "trace": TRACE_COLOR}
        color = alt.Color(
            "line:N",
            title=None,
            scale=alt.Scale(domain=lines, range=[colors[k] for k in lines]),
            legend=legend,
        )
        # The colour's field and title: one legend shows both.
        dash = alt.StrokeDash(
            "line:N",
            title=None,
            scale=alt.Scale(domain=lines, range=[[[1, 0], [5, 3]][i] for i in range(len(lines))]),
            legend=legend,
        )
    chart = (
        alt.Chart(frame)
        .mark_line(interpolate="step-after", clip=True)
        .encode(
            x=alt.X(
                "t_s:Q",
                title="time since trace start (s)",
                # Rounded out as the over-time charts' axis is, so the two line up.
                scale=alt.Scale(domain=[0, round(span_ns / 1e9, 3)], nice=True),
            ),
            y=alt.Y("value:Q", title=Y_TITLES[fs.statistic]),
            color=color,
            strokeDash=dash,
            tooltip=[
                "line",
                alt.Tooltip("t_s:Q", format=",.3f"),
                alt.Tooltip("value:Q", format=",.4~f"),
            ],
        )
        .properties(width=WIDTH, height=150)
    )
    return finish(chart), k
