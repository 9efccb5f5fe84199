"""Render a sweep's capacity report (``analysis/capacity.py``): table, JSON, Markdown, CSV.

Times arrive in ns and leave in ms; rates are req/s and tok/s.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from servetrace.analysis.capacity import CURVE_METRICS, Capacity, CapacityReport, CurvePoint
from servetrace.render._csv import rows_writer
from servetrace.render._json import VERSIONS, clean
from servetrace.render.fit import boxed_frame, fit_columns, left_out_line
from servetrace.render.format import fixed, ns_to_ms
from servetrace.render.markdown_text import md_table, md_text

DENOMINATOR = "completed + errored requests (client cancellations and in-flight left out)"


def _rate(value: float | None) -> str:
    if value is None:
        return "–"
    if value == float("inf"):
        return "inf"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def run_dict(point: CurvePoint, frontier: tuple[str, ...] | None) -> dict[str, Any]:
    return {
        "label": point.label,
        "offered_rate": "inf" if point.offered_rate == float("inf") else clean(point.offered_rate),
        "requests_per_s": clean(point.requests_per_s),
        "output_tokens_per_s": clean(point.output_tokens_per_s),
        "latency_ms": {k: clean(ns_to_ms(v)) for k, v in point.latency_ns.items()},
        "completed": point.completed,
        "errored": point.errored,
        "answered": point.answered,
        "met": point.met,
        "attainment": clean(point.attainment),
        "attainment_by_target": {k: clean(v) for k, v in point.attainment_by_target.items()},
        "gpus": point.gpus,
        "output_tokens_per_s_per_gpu": clean(point.tokens_per_s_per_gpu),
        "output_tokens_per_s_per_user": clean(point.tokens_per_s_per_user),
        "pareto": None if frontier is None else point.label in frontier,
        "throughput_window": "declared" if point.throughput_declared else "trace",
    }


def capacity_dict(cap: Capacity | None) -> dict[str, Any] | None:
    if cap is None:
        return None
    return {
        "definition": "highest offered rate whose SLO attainment >= required (DistServe)",
        "required": cap.required,
        "requests_per_s": clean(cap.rate),
        "bound": cap.bound,
        "bracket": list(cap.bracket) if cap.bracket else None,
        "limited_by": cap.limited_by,
        "unavailable": cap.reason,
        "notes": list(cap.notes),
    }


def report_dict(report: CapacityReport) -> dict[str, Any]:
    return {
        **VERSIONS,
        "targets": list(report.targets),
        "attainment_denominator": DENOMINATOR,
        "unit": {
            "offered_rate": "req/s",
            "requests_per_s": "req/s",
            "output_tokens_per_s": "tok/s",
            "latency_ms": "ms",
            "output_tokens_per_s_per_user": "tok/s (1 / median TPOT)",
        },
        "runs": [
            {**run_dict(p, report.frontier), "sweep": report.sweep_of.get(p.label)}
            for p in report.curve
        ],
        "capacity": capacity_dict(report.capacity),
        "pareto_frontier": list(report.frontier) if report.frontier is not None else None,
        "pareto_unavailable": report.frontier_unavailable,
        "notes": list(report.notes),
        "capacity_by_sweep": [
            {"sweep": name, **(capacity_dict(cap) or {})} for name, cap in report.by_sweep
        ],
    }


def capacity_lines(report: CapacityReport) -> list[str]:
    """The capacity sentence: one, or one per sweep when several sweeps are side by side."""
    if report.by_sweep:
        return [
            line
            for name, cap in report.by_sweep
            if (line := capacity_line(report, cap, name)) is not None
        ]
    line = capacity_line(report)
    return [line] if line else []


def capacity_line(
    report: CapacityReport, cap: Capacity | None = None, name: str | None = None
) -> str | None:
    cap = cap if cap is not None else report.capacity
    if cap is None:
        return None
    slo = " and ".join(report.targets)
    where = f"{name}: " if name else ""
    head = f"{where}capacity at {cap.required:.0%} SLO attainment ({slo}): "
    if cap.rate is None:
        return head + f"unavailable: {cap.reason}"
    by = {p.label: p for p in report.curve}
    if cap.bound == "interpolated" and cap.bracket:
        low, high = (by[name] for name in cap.bracket)
        return head + (
            f"{cap.rate:,.2f} req/s, linearly interpolated between {low.label} "
            f"({_rate(low.offered_rate)} req/s, {_share(low.attainment)}) and {high.label} "
            f"({_rate(high.offered_rate)} req/s, {_share(high.attainment)})"
        )
    if cap.bound == "lower":
        return head + (
            f"at least {cap.rate:,.2f} req/s (even the highest offered rate meets the SLO; "
            "sweep higher to find the limit)"
        )
    if cap.bound == "achieved" and cap.limited_by is not None:
        run = by[cap.limited_by]
        return head + (
            f"at most {cap.rate:,.2f} req/s, what {run.label} achieved: its offered "
            f"{_rate(run.offered_rate)} req/s was not reached, so the SLO is shown to hold "
            "only up to the rate served"
        )
    return head + f"{cap.rate:,.2f} req/s (a run sits exactly at the threshold)"


def _lines(report: CapacityReport) -> list[str]:
    lines = capacity_lines(report)
    if report.targets:
        lines.append(f"attainment = requests meeting every target / ({DENOMINATOR})")
    if report.frontier is not None:
        lines.append(
            "Pareto frontier (output tok/s per GPU vs per user): " + ", ".join(report.frontier)
        )
    elif report.frontier_unavailable:
        lines.append(f"Pareto frontier unavailable: {report.frontier_unavailable}")
    if report.capacity:
        lines.extend(report.capacity.notes)
    for name, cap in report.by_sweep:
        lines.extend(f"{name}: {note}" for note in cap.notes)
    lines.extend(report.notes)
    return lines


def _header(report: CapacityReport) -> list[str]:
    head = ["run", "offered req/s", "req/s", "out tok/s"]
    head += [f"{m} {s}" for m, s in CURVE_METRICS]
    head += ["errored", "attainment"]
    if report.frontier is not None:
        head += ["tok/s/GPU", "tok/s/user", "pareto"]
    return head


def _rows(report: CapacityReport) -> list[list[str]]:
    rows = []
    for p in report.curve:
        row = [
            p.label,
            _rate(p.offered_rate),
            _rate(p.requests_per_s),
            fixed(p.output_tokens_per_s, 0),
            *(fixed(ns_to_ms(p.latency_ns[f"{m}_{s}"]), 2) for m, s in CURVE_METRICS),
            f"{p.errored:,}",
            _share(p.attainment),
        ]
        if report.frontier is not None:
            row += [
                fixed(p.tokens_per_s_per_gpu, 0),
                fixed(p.tokens_per_s_per_user, 1),
                "★" if p.label in report.frontier else "",
            ]
        rows.append(row)
    return rows


# Columns a narrow terminal loses first (the run, rates, TTFT p99 and attainment stay).
_DROP_ORDER = (
    "errored",
    "tpot p50",
    "ttft p50",
    "e2e p99",
    "itl p99",
    "pareto",
    "tok/s/user",
    "tok/s/GPU",
    "out tok/s",
    "tpot p99",
)


def render_table(report: CapacityReport, width: int | None = None) -> Group:
    """The curve as a boxed table, within ``width`` columns when given (a terminal's)."""
    heads, rows = _header(report), _rows(report)
    kept, cut = list(range(len(heads))), list[str]()
    if width is not None:
        kept, cut = fit_columns(heads, rows, width, _DROP_ORDER, boxed_frame)
    table = Table(
        title="throughput–latency curve by offered load",
        caption="latencies in ms over completed requests; attainment over completed + errored",
        title_justify="left",
        caption_justify="left",
    )
    for i in kept:
        table.add_column(heads[i], justify="left" if i == 0 else "right", style="" if i else "bold")
    for row in rows:
        table.add_row(*(Text(row[i]) for i in kept))  # labels are the user's: never markup
    lines = ([left_out_line(cut, width)] if cut and width else []) + _lines(report)
    return Group(table, Text("\n".join(lines)))


def render_markdown(report: CapacityReport) -> str:
    out = io.StringIO()
    out.write("### servetrace: capacity\n\n")
    head = _header(report)
    rows = [list(map(md_text, row)) for row in _rows(report)]
    out.write("\n".join(md_table(head, rows, "l" + "r" * (len(head) - 1))) + "\n\n")
    for line in _lines(report):
        out.write(f"- {md_text(line, cell=False)}\n")
    return out.getvalue()


# The CSV's columns: keys of ``run_dict``, its latencies flattened (``ttft_p50_ms``).
CSV_KEYS = (
    "label",
    "offered_rate",
    "requests_per_s",
    "output_tokens_per_s",
    *(f"{m}_{s}_ms" for m, s in CURVE_METRICS),
    "completed",
    "errored",
    "attainment",
    "gpus",
    "output_tokens_per_s_per_gpu",
    "output_tokens_per_s_per_user",
)


def render_csv(report: CapacityReport) -> str:
    out = io.StringIO()
    writer = rows_writer(out)
    writer.writerow(CSV_KEYS)
    for p in report.curve:
        run = run_dict(p, None)
        run.update({f"{key}_ms": value for key, value in run.pop("latency_ms").items()})
        run["offered_rate"] = clean(p.offered_rate)  # a number or empty, never "inf"
        writer.writerow([run[key] for key in CSV_KEYS])
    return out.getvalue()
