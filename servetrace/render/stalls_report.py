"""The report's stalls sections (``report --steps``): each ITL gap's length against the
prefill tokens of the steps that cover it, then the excess over the usual decode step by
cause, for every stalled gap and for the gaps at or above the pooled ITL p99.

The shares, counts and reasons are the JSON report's ``stalls`` numbers (table cells carry
their paths); the chart draws the per-gap frame of `analysis.stalls.Stalls`, thinned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from servetrace.analysis.stall_causes import CAUSES
from servetrace.render.chart_style import COUNT_FORMAT, Spec, finish, log_axis, log_scale
from servetrace.render.format import counted, ms_words

if TYPE_CHECKING:
    from servetrace.analysis.stalls import Stalls
    from servetrace.render.report_sections import Section, TraceView

WIDTH = 640
# A hue per cause (and grey for a gap not longer than the usual step).
CAUSE_COLORS = {
    "prefill": "#b07aa1",
    "skipped": "#e15759",
    "between_steps": "#f28e2b",
    "large_batch": "#4e79a7",
    "other": "#76b7b2",
    "none": "#bab0ac",
    "no baseline": "#4e79a7",
}
NO_BASELINE = "no baseline"
GROUPS = {"overall": "every stalled gap", "tail": "gaps ≥ ITL p99"}


def _words(name: str) -> str:
    return name.replace("_", " ")


def stall_points(stalls: Stalls, limit: int) -> tuple[pl.DataFrame, int]:
    """The joined gaps drawn (``gap_ms``, ``prefill_tokens``, ``cause``, ``tail``) and how
    many could be: every tail gap first, the others thinned evenly to ``limit`` in all."""
    gap = pl.col("gap_end_ns") - pl.col("gap_start_ns")
    frame = stalls.joined.filter(pl.col("prefill_tokens").is_not_null() & (gap > 0)).select(
        (gap.cast(pl.Float64) / 1e6).round(3).alias("gap_ms"),
        "prefill_tokens",
        # Without a baseline no gap has a cause.
        pl.col("cause").cast(pl.String).fill_null(NO_BASELINE),
        (
            gap >= stalls.tail_threshold_ns
            if stalls.tail_threshold_ns is not None
            else pl.lit(False)
        ).alias("tail"),
    )
    total = frame.height
    if total <= limit:
        return frame, total
    tail = frame.filter(pl.col("tail")).head(limit)
    rest = frame.filter(~pl.col("tail"))
    room = limit - tail.height
    k = -(-rest.height // room) if room > 0 else 0
    kept = rest.filter(pl.int_range(pl.len()) % k == 0) if k else rest.clear()
    return pl.concat([tail, kept]), total


def prefill_chart(points: pl.DataFrame, threshold_ms: float | None) -> Spec:
    """Gap length (log) against the covering steps' prefill tokens, coloured by cause, with
    the ITL p99 as a dashed rule."""
    import altair as alt

    causes = [c for c in CAUSE_COLORS if c in set(points["cause"].to_list())]
    values = points["gap_ms"]
    if threshold_ms is not None:
        values = pl.concat([values, pl.Series([threshold_ms])])
    dots = (
        alt.Chart(points)
        .mark_circle(size=18, opacity=0.6)
        .encode(
            x=alt.X(
                "prefill_tokens:Q",
                title="prefill tokens in the gap's covering steps",
                axis=alt.Axis(format=COUNT_FORMAT),
            ),
            y=alt.Y(
                "gap_ms:Q",
                title="ITL gap (ms)",
                scale=log_scale(),
                axis=log_axis(values),
            ),
            color=alt.Color(
                "cause:N",
                title="largest cause",
                scale=alt.Scale(domain=causes, range=[CAUSE_COLORS[c] for c in causes]),
                legend=alt.Legend(labelExpr="replace(datum.label, '_', ' ')"),
            ),
            tooltip=[
                alt.Tooltip("gap_ms:Q", title="gap (ms)", format=",.3f"),
                alt.Tooltip("prefill_tokens:Q", title="prefill tokens", format=COUNT_FORMAT),
                "cause",
            ],
        )
    )
    chart: Any = dots
    if threshold_ms is not None:
        rule = (
            alt.Chart(pl.DataFrame({"p99_ms": [threshold_ms]}))
            .mark_rule(strokeDash=[5, 3], color="#555")
            .encode(y="p99_ms:Q", tooltip=[alt.Tooltip("p99_ms:Q", title="ITL p99 (ms)")])
        )
        chart = alt.layer(dots, rule)
    return finish(chart.properties(width=WIDTH, height=260))


def shares_chart(report: dict[str, Any], groups: list[str]) -> Spec:
    """Each cause's share of the excess, a bar per group (``overall``, ``tail``)."""
    import altair as alt

    frame = pl.DataFrame(
        [
            {"cause": _words(c), "group": GROUPS[g], "share": report[g][f"{c}_share"]}
            for g in groups
            for c in CAUSES
        ],
        schema={"cause": pl.String, "group": pl.String, "share": pl.Float64},
    )
    order = [GROUPS[g] for g in groups]
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("cause:N", title=None, sort=[_words(c) for c in CAUSES]),
            yOffset=alt.YOffset("group:N", sort=order),
            x=alt.X(
                "share:Q",
                title="share of the excess over the usual step",
                axis=alt.Axis(format="%"),
            ),
            color=alt.Color(
                "group:N",
                title=None,
                sort=order,
                scale=alt.Scale(domain=order, range=["#4e79a7", "#e15759"][: len(order)]),
            ),
            tooltip=["cause", "group", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=WIDTH, height=28 * len(CAUSES))
    )
    return finish(chart)


def _joined_words(report: dict[str, Any]) -> str:
    gaps = report["gaps"]
    text = f"{gaps['joined']:,} of {gaps['total']:,} ITL gaps are covered by engine steps"
    if gaps["unjoined"]:
        why = "; ".join(
            f"{counted(n, 'gap')}: {gaps['unjoined_reasons'][r]}"
            for r, n in gaps["unjoined"].items()
        )
        text += f" (not joined — {why})"
    return text + "."


def prefill_section(view: TraceView, prefix: str) -> Section:
    from servetrace.render.report_sections import Section

    stalls = view.analysis.stalls
    assert stalls is not None
    report = view.json["stalls"]
    points, total = stall_points(stalls, view.points)
    threshold = report["tail"]["threshold_ms"]
    sentence = _joined_words(report)
    joined = stalls.joined
    with_prefill = joined.filter(pl.col("steps_with_prefill").fill_null(0) > 0)
    without = joined.filter(pl.col("steps_with_prefill").fill_null(0) == 0)
    gap = pl.col("gap_end_ns") - pl.col("gap_start_ns")
    if with_prefill.height and without.height:
        a = with_prefill.select(gap.median()).item()
        b = without.select(gap.median()).item()
        sentence += (
            f" The median gap is {ms_words(a)} when its steps carry prefill work "
            f"({counted(with_prefill.height, 'gap')}) and {ms_words(b)} when they do not "
            f"({counted(without.height, 'gap')})."
        )
    elif joined.height:
        sentence += (
            " Every joined gap's steps carry prefill work."
            if with_prefill.height
            else " No joined gap's steps carry prefill work."
        )
    tail = report["tail"]
    if threshold is None:
        sentence += " The tail is unavailable: the trace has no ITL p99."
    elif tail["prefill_fraction"] is not None:
        sentence += (
            f" Gaps at or above the ITL p99 ({threshold:,.3g} ms): {tail['tail_gaps']:,}, "
            f"{tail['prefill_fraction']:.0%} of them with prefill work in their steps."
        )
    charts = [(f"{prefix}stalls-prefill-chart", prefill_chart(points, threshold))]
    fit = report["baseline"]["unavailable"]
    note = (
        "Colour: the gap's largest cause of excess (none: not longer than the usual step)."
        if fit is None
        else f"Not coloured by cause: the decode-step baseline is unavailable ({fit})."
    )
    if threshold is not None:
        note += " Dashed: the ITL p99."
    missing = joined.filter(pl.col("prefill_tokens").is_null()).height
    if missing:
        note += f" {missing:,} joined gaps not drawn: their steps do not give prefill tokens."
    if points.height < total:
        note += f" {points.height:,} of {total:,} gaps drawn: every tail gap, the rest thinned."
    return Section(
        f"{prefix}stalls-prefill",
        "Where ITL stalls come from: gap length against prefill",
        sentence,
        charts if points.height else [],
        note=note,
    )


def _share_cell(value: float | None, path: str) -> tuple[str, str | None]:
    return ("unavailable: no gap stalled", None) if value is None else (f"{value:.1%}", path)


def causes_section(view: TraceView, prefix: str) -> Section:
    from servetrace.render.report_sections import Section

    report = view.json["stalls"]
    fit = report["baseline"]
    title = "Where ITL stalls come from: excess by cause"
    if fit["unavailable"] is not None:
        return Section(
            f"{prefix}stalls-causes",
            title,
            f"The excess by cause is unavailable: {fit['unavailable']}.",
        )
    overall, tail = report["overall"], report["tail"]
    groups = ["overall"] + (["tail"] if tail["threshold_ms"] is not None and tail["gaps"] else [])
    rows: list[list[tuple[str, str | None]]] = []
    for cause in CAUSES:
        cells: list[tuple[str, str | None]] = [(_words(cause), None)]
        cells.append(_share_cell(overall[f"{cause}_share"], f"stalls.overall.{cause}_share"))
        if tail["threshold_ms"] is None:
            cells.append(("unavailable: no ITL p99", None))
        else:
            cells.append(_share_cell(tail[f"{cause}_share"], f"stalls.tail.{cause}_share"))
        rows.append(cells)
    if overall["gaps"]:
        top = max(CAUSES, key=lambda c: overall[f"{c}_share"] or 0.0)
        sentence = (
            f"{overall['gaps']:,} gaps are longer than the usual decode step, "
            f"{overall['excess_ms']:,.1f} ms in all; {_words(top)} is the largest cause "
            f"({overall[f'{top}_share']:.0%} of the excess)"
        )
        if "tail" in groups:
            tail_top = max(CAUSES, key=lambda c: tail[f"{c}_share"] or 0.0)
            sentence += (
                f"; of the {tail['gaps']:,} stalled gaps ≥ ITL p99, {_words(tail_top)} "
                f"({tail[f'{tail_top}_share']:.0%} of their {tail['excess_ms']:,.1f} ms)"
            )
        sentence += "."
    else:
        sentence = "No gap is longer than the usual decode step: there is no excess to split."
    usual = fit["intercept_ms"] + fit["per_request_ms"] * fit["usual_batch"]
    if fit["per_kv_token_ms"] is not None:
        usual += fit["per_kv_token_ms"] * fit["usual_kv_tokens"]
    return Section(
        f"{prefix}stalls-causes",
        title,
        sentence,
        [(f"{prefix}stalls-causes-chart", shares_chart(report, groups))] if overall["gaps"] else [],
        table={
            "header": ["cause", GROUPS["overall"], GROUPS["tail"]],
            "rows": rows,
        },
        note=f"Excess: a gap's length beyond its steps at the usual decode step "
        f"({usual:,.3g} ms at batch {fit['usual_batch']:g}, fitted on {fit['steps_fitted']:,} "
        "decode-only steps), split exactly into its causes.",
    )


def stall_sections(view: TraceView, prefix: str) -> list[Section]:
    """The two stalls sections (none without ``--steps``)."""
    if view.analysis.stalls is None:
        return []
    return [prefill_section(view, prefix), causes_section(view, prefix)]


def with_stall_sections(sections: list[Section], view: TraceView, prefix: str) -> list[Section]:
    """``sections`` with the stalls' after the latency-over-time charts (else at the end)."""
    extra = stall_sections(view, prefix)
    if not extra:
        return sections
    ids = [s.id for s in sections]
    after = f"{prefix}latency-time"
    at = ids.index(after) + 1 if after in ids else len(ids)
    return [*sections[:at], *extra, *sections[at:]]
