"""The report's server-metrics sections (``report --server-metrics``): one per family on
the trace's time axis, right after the trace's over-time charts, then the consistency
findings as a table whose cells are the JSON report's ``consistency`` numbers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from servetrace.analysis.server_series import FamilySeries, family_series
from servetrace.render.server_charts import TRACE_WORDS, family_chart, server_word

if TYPE_CHECKING:
    from servetrace.render.report_sections import Section, TraceView

FINDING_STATS = ("compared", "max_abs", "mean_abs", "mean_signed", "server_total", "trace_total")
FINDING_HEADERS = ("compared", "max |s − t|", "mean |s − t|", "mean s − t", "server", "trace")


def _slug(family: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in family).strip("-")


def _num(value: float) -> str:
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _value_words(fs: FamilySeries, value: float) -> str:
    if fs.statistic == "mean_ns":
        return f"{value / 1e6:,.1f} ms"
    if fs.statistic == "rate_per_s":
        return f"{_num(value)}/s"
    return _num(value)


def _finding_words(found: dict[str, Any], name: str | None) -> str:
    if name is None or name not in found:
        return ""
    f = found[name]
    if f["unavailable"]:
        return f" {name}: unavailable ({f['unavailable']})."
    text = (
        f" {name}: max |server − trace| {_num(f['max_abs'])}, mean {_num(f['mean_abs'])} "
        f"over {f['compared']:,}"
    )
    if f["max_abs"]:
        text += f"; worst at {f['worst_at_s']:,.3f} s — likely: {f['cause']}"
    return text + "."


def _sentence(fs: FamilySeries, origin_ns: int, found: dict[str, Any]) -> str:
    values = fs.server.filter(pl.col("value").is_not_nan())
    if values.is_empty():
        return f"{fs.family}: no value to draw (nothing observed between scrapes)."
    top = values.sort("value", "t_ns", descending=[True, False]).row(0, named=True)
    at = (top["t_ns"] - origin_ns) / 1e9
    what = {"value": "It", "rate_per_s": "The rate", "mean_ns": "The mean", "mean": "The mean"}
    text = f"{what[fs.statistic]} peaked at {_value_words(fs, top['value'])} around {at:,.1f} s"
    text += f" (mean {_value_words(fs, float(np.mean(values['value'].to_numpy())))})."
    if fs.trace is not None and fs.trace_quantity is not None:
        where = "at the same scrapes" if fs.kind == "gauge" else "over the same intervals"
        text += f" Dashed: {TRACE_WORDS[fs.trace_quantity]} {where}."
    elif fs.trace_unavailable is not None:
        text += f" The trace side is not drawn: {fs.trace_unavailable}."
    return text + _finding_words(found, fs.finding)


def _note(fs: FamilySeries, k: int) -> str:
    how = {
        "value": "the value at each scrape, held until the next",
        "rate_per_s": "the increase over each scrape interval per second (a reset counts "
        "from zero)",
        "mean_ns": "Δsum ÷ Δcount over each scrape interval",
        "mean": "Δsum ÷ Δcount over each scrape interval",
    }[fs.statistic]
    text = f"{fs.kind.capitalize()}: {how}"
    if fs.series > 1 and fs.kind != "summary":
        text += f", summed over its {fs.series} series"
    if fs.family.endswith("request_success_total"):
        text += ' (finished_reason="abort" left out)'
    if k > 1:
        unit = "scrape" if fs.statistic == "value" else "interval"
        text += f"; every {k}-th {unit} drawn (of {fs.server.height:,})"
    return text + "."


def _family_section(
    fs: FamilySeries, prefix: str, origin_ns: int, span_ns: int, found: dict[str, Any]
) -> Section:
    from servetrace.render.report_sections import Section

    spec, k = family_chart(fs, origin_ns, span_ns)
    slug = _slug(fs.family)
    return Section(
        f"{prefix}server-{slug}",
        server_word(fs).removeprefix("server: "),
        _sentence(fs, origin_ns, found),
        [(f"{prefix}server-chart-{slug}", spec)],
        note=_note(fs, k),
    )


def _cell(value: Any, path: str) -> tuple[str, str | None]:
    if value is None:
        return "n/a", path
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a", None
    if isinstance(value, int) or float(value).is_integer():
        return f"{value:,.0f}", path
    return f"{value:,.3f}", path


def findings_section(view: TraceView, prefix: str) -> Section:
    """Every consistency finding: its numbers (cells read from the JSON), its cause."""
    from servetrace.analysis.server_engines import ENGINES
    from servetrace.render.report_sections import Section

    report = view.json
    clock = report["server_metrics"]["clock"]
    rows: list[list[tuple[str, str | None]]] = []
    for name, f in report["consistency"].items():
        cells: list[tuple[str, str | None]] = [(name, None), (f["family"] or "scrape times", None)]
        if f["unavailable"]:
            cells += [(f"unavailable: {f['unavailable']}", None)]
            cells += [("", None)] * (len(FINDING_STATS) - 1) + [("", None)]
        else:
            cells += [_cell(f[s], f"consistency.{name}.{s}") for s in FINDING_STATS]
            cells.append((f["cause"] or "", None))
        rows.append(cells)
    off = [n for n, f in report["consistency"].items() if f["max_abs"] and n != "clock_offset"]
    engine = report["server_metrics"]["engine"]
    whose = "" if engine == "vllm" else f"{ENGINES[engine].title}'s families. "
    sentence = f"{whose}Clock: {clock['statement']} (offset {clock['offset_ms']:g} ms). " + (
        f"{len(off)} finding(s) disagree: {', '.join(off)}."
        if off
        else "Every available finding agrees: server and trace count the same."
    )
    return Section(
        f"{prefix}server-consistency",
        "Server metrics vs the trace: consistency",
        sentence,
        table={
            "header": ["finding", "server series", *FINDING_HEADERS, "likely cause"],
            "rows": rows,
        },
        note="s − t: server − trace; server, trace: totals; the clock offset in ms; gauges "
        "in requests at each scrape, counters per scrape interval, the latency histograms "
        "per interval and bucket (ITL: gaps, the others: requests).",
    )


def server_sections(view: TraceView, prefix: str) -> list[Section]:
    """The family sections and the findings table (none without ``--server-metrics``)."""
    found = view.analysis.server_metrics
    if found is None:
        return []
    tl = view.analysis.timeline
    origin = tl.trace_start_ns or 0
    span = max((tl.trace_end_ns or origin) - origin, 1)
    consistency = view.json["consistency"]
    # Without send times there is no time axis to draw on: the findings only.
    drawn = (
        family_series(found, view.analysis, view.events)
        if view.analysis.summary.arrival_known
        else []
    )
    sections = [_family_section(fs, prefix, origin, span, consistency) for fs in drawn]
    return [*sections, findings_section(view, prefix)]


def with_server_sections(sections: list[Section], view: TraceView, prefix: str) -> list[Section]:
    """``sections`` with the server's after the over-time charts (else at the end)."""
    extra = server_sections(view, prefix)
    if not extra:
        return sections
    ids = [s.id for s in sections]
    at = ids.index(f"{prefix}over-time") + 1 if f"{prefix}over-time" in ids else len(ids)
    return [*sections[:at], *extra, *sections[at:]]
