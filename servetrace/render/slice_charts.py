"""The report's per-slice chart (``report --slice``): the figures of ``analysis.slices``.

One panel per figure family, on the same time axis as the other over-time charts: rates
(req/s, output tok/s, goodput), TTFT and TPOT p50/p99 (ms) and the mean queued/running
levels, each drawn as a step over its slice.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.render.chart_style import WORDS, finish

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


def slices_chart(slices: pl.DataFrame, origin_ns: int, width: int = 640) -> dict[str, Any]:
    import altair as alt

    frame = slices.select(
        ((pl.col("start_ns") - origin_ns) / 1e9).round(3).alias("t_s"),
        "requests_per_s",
        "goodput_requests_per_s",
        "output_tokens_per_s",
        *[
            (pl.col(f"{m}_p{q}_ns") / 1e6).round(3).alias(f"{m}_p{q}_ms")
            for m in ("ttft", "tpot")
            for q in (50, 99)
        ],
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
