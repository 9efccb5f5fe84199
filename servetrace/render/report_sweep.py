"""The report's sweep sections (``servetrace report SWEEP``): the throughput–latency
curve and SLO attainment against offered load, from ``analysis.capacity``'s report.

- **Throughput–latency curve**: per run, achieved output tok/s (x) against TTFT and TPOT
  p50/p99 (y, ms, log), runs joined in offered-rate order, one line per sweep and
  statistic; the curve bends up where the server saturates.
- **Attainment vs offered rate**: per run with a finite offered rate, the share of its
  answered requests (completed + errored) meeting every ``--goodput`` target, a rule at
  the required attainment and one at each capacity found (interpolated, said so).
- **Runs**: the capacity table (``render.capacity``), every cell from its JSON.

Numbers come from the same ``CapacityReport`` ``servetrace capacity`` prints, so the
page and the command never disagree.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from servetrace.analysis.capacity import CapacityReport, CurvePoint
from servetrace.render import capacity as words
from servetrace.render.report_sections import Section
from servetrace.units import NS_PER_MS

CURVE = (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99"))


def _sweep(report: CapacityReport, point: CurvePoint) -> str:
    return report.sweep_of.get(point.label, "sweep")


def _series(report: CapacityReport, point: CurvePoint, stat: str) -> str:
    return f"{_sweep(report, point)} {stat}" if report.sweep_of else stat


def _point_name(report: CapacityReport, point: CurvePoint) -> str:
    """The run's label without its sweep's (the colour says the sweep): ``qps_04``."""
    sweep = report.sweep_of.get(point.label)
    return point.label.removeprefix(f"{sweep}/") if sweep else point.label


def curve_frame(report: CapacityReport) -> pl.DataFrame:
    """One row per run and curve statistic with a known throughput and latency."""
    rows = []
    for order, point in enumerate(report.curve):
        for metric, stat in CURVE:
            value = point.latency_ns.get(f"{metric}_{stat}")
            if value is None or point.output_tokens_per_s is None:
                continue
            rows.append(
                {
                    "run": point.label,
                    "point": _point_name(report, point),
                    "order": order,
                    "panel": f"{metric.upper()} (ms, log)",
                    "series": _series(report, point, stat),
                    "output_tokens_per_s": round(point.output_tokens_per_s, 3),
                    "requests_per_s": round(point.requests_per_s or 0.0, 4),
                    "offered": words._rate(point.offered_rate),
                    "value_ms": round(value / NS_PER_MS, 3),
                }
            )
    return pl.DataFrame(rows)


def curve_chart(frame: pl.DataFrame) -> dict[str, Any]:
    """The curve, each run's points named once per panel (above its highest point)."""
    import altair as alt

    from servetrace.render.chart_style import finish, log_scale

    panels = sorted(frame["panel"].unique().to_list(), key=lambda p: not p.startswith("TTFT"))
    top = pl.col("value_ms").rank("ordinal", descending=True).over("panel", "run") == 1
    frame = frame.with_columns(pl.when(top).then(pl.col("point")).alias("name"))
    line = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X("output_tokens_per_s:Q", title="achieved output tokens (tok/s)"),
            y=alt.Y(
                "value_ms:Q",
                scale=log_scale(),
                axis=alt.Axis(values=_panel_ticks(frame)),
                title=None,
            ),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom")),
            order=alt.Order("order:Q"),
            tooltip=[
                "run",
                "series",
                alt.Tooltip("offered:N", title="offered req/s"),
                alt.Tooltip("requests_per_s:Q", format=",.2f", title="req/s"),
                alt.Tooltip("output_tokens_per_s:Q", format=",.0f", title="out tok/s"),
                alt.Tooltip("value_ms:Q", format=",.1f", title="ms"),
            ],
        )
    )
    labels = (
        alt.Chart()
        .transform_filter("datum.name != null")
        .mark_text(dy=-9, fontSize=9, color="#444")
        .encode(x="output_tokens_per_s:Q", y="value_ms:Q", text="name:N", tooltip=["run"])
    )
    chart = (
        alt.layer(line, labels)
        .properties(width=560, height=170)
        .facet(row=alt.Row("panel:N", title=None, sort=panels), data=frame)
        .resolve_scale(y="independent")
    )
    return finish(chart)


def _panel_ticks(frame: pl.DataFrame) -> list[float]:
    """Round log ticks for every panel's own range (the panels share one axis spec)."""
    from servetrace.render.chart_style import log_ticks

    ranges = frame.group_by("panel").agg(
        pl.col("value_ms").filter(pl.col("value_ms") > 0).min().alias("low"),
        pl.col("value_ms").max().alias("high"),
    )
    return sorted(
        {t for low, high in ranges.select("low", "high").rows() for t in log_ticks(low, high)}
    )


def attainment_frame(report: CapacityReport) -> pl.DataFrame:
    rows = [
        {
            "run": p.label,
            "sweep": _sweep(report, p),
            "offered_rate": p.offered_rate,
            "attainment": p.attainment,
            "met": p.met,
            "answered": p.answered,
        }
        for p in report.curve
        if p.offered_rate is not None and math.isfinite(p.offered_rate) and p.attainment is not None
    ]
    return pl.DataFrame(rows)


def _capacities(report: CapacityReport) -> list[tuple[str, float, str]]:
    pairs = list(report.by_sweep) or ([("sweep", report.capacity)] if report.capacity else [])
    return [
        (name, cap.rate, cap.bound or "")
        for name, cap in pairs
        if cap is not None and cap.rate is not None
    ]


def attainment_chart(report: CapacityReport, frame: pl.DataFrame) -> dict[str, Any]:
    import altair as alt

    required = next(
        (c.required for c in [report.capacity, *(c for _, c in report.by_sweep)] if c), None
    )
    layers = [
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("offered_rate:Q", title="offered request rate (req/s)"),
            y=alt.Y(
                "attainment:Q",
                title="SLO attainment",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("sweep:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=[
                "run",
                alt.Tooltip("offered_rate:Q", format=",.2f", title="offered req/s"),
                alt.Tooltip("attainment:Q", format=".1%"),
                "met",
                "answered",
            ],
        )
    ]
    if required is not None:
        layers.append(
            alt.Chart(pl.DataFrame({"required": [required]}))
            .mark_rule(strokeDash=[4, 4], color="#888")
            .encode(y="required:Q", tooltip=[alt.Tooltip("required:Q", format=".0%")])
        )
    found = _capacities(report)
    if found:
        caps = pl.DataFrame(
            {
                "sweep": [n for n, _, _ in found],
                "capacity": [round(r, 4) for _, r, _ in found],
                "bound": [b for _, _, b in found],
            }
        )
        layers.append(
            alt.Chart(caps)
            .mark_rule(strokeDash=[2, 2])
            .encode(
                x="capacity:Q",
                color=alt.Color("sweep:N"),
                tooltip=["sweep", alt.Tooltip("capacity:Q", format=",.2f"), "bound"],
            )
        )
    spec: dict[str, Any] = alt.layer(*layers).properties(width=560, height=240).to_dict()
    return spec


def _curve_sentence(report: CapacityReport) -> str:
    parts = []
    for name in dict.fromkeys(_sweep(report, p) for p in report.curve):
        mine = [
            p
            for p in report.curve
            if _sweep(report, p) == name
            and p.output_tokens_per_s is not None
            and p.latency_ns.get("ttft_p99") is not None
        ]
        if len(mine) < 2:
            continue
        low, high = mine[0], mine[-1]
        where = f"{name}: " if report.sweep_of else ""
        first, last = low.latency_ns["ttft_p99"] or 0.0, high.latency_ns["ttft_p99"] or 0.0
        parts.append(
            f"{where}output rises from {low.output_tokens_per_s or 0.0:,.0f} to "
            f"{high.output_tokens_per_s or 0.0:,.0f} tok/s while TTFT p99 goes from "
            f"{first / NS_PER_MS:,.0f} to {last / NS_PER_MS:,.0f} ms"
        )
    if not parts:
        return "Too few runs with a throughput and a latency to draw a curve."
    return "; ".join(parts) + " (runs in offered-rate order)."


def sweep_sections(report: CapacityReport) -> list[Section]:
    sections = []
    curve = curve_frame(report)
    sections.append(
        Section(
            "sweep-curve",
            "Throughput–latency curve",
            _curve_sentence(report),
            [("sweep-curve-chart", curve_chart(curve))] if curve.height else [],
            table={"header": words._header(report), "rows": words._rows(report)},
            note="latencies over completed requests; "
            + "; ".join(n for n in report.notes if "declared duration" in n or "saturated" in n),
        )
    )
    attained = attainment_frame(report)
    if report.targets and attained.height:
        lines = words.capacity_lines(report)
        sections.append(
            Section(
                "sweep-attainment",
                "SLO attainment against offered load",
                " ".join(f"{line[0].upper()}{line[1:]}." for line in lines)
                or "No capacity: see the notes.",
                [("sweep-attainment-chart", attainment_chart(report, attained))],
                note=f"attainment = requests meeting every target ({' and '.join(report.targets)})"
                f" / ({words.DENOMINATOR}); capacity is DistServe's: the highest offered rate "
                "at or above the required attainment, linearly interpolated between runs",
            )
        )
    return sections
