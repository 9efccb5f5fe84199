"""The report's sections for one trace: title, one sentence read from the numbers, charts.

Every sentence is computed from the same summary the JSON report holds, so the page
never says something the numbers do not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import polars as pl

from servetrace.analysis.result import Analysis
from servetrace.analysis.unavailable import phrase, unavailable
from servetrace.render import charts, series
from servetrace.render.format import ms_words
from servetrace.render.headline import value_at
from servetrace.render.outcomes import accounting_line, errored_lines
from servetrace.render.results_json import analysis_dict

TABLE_METRICS = ("queue_wait", "prefill", "ttft", "decode", "e2e", "itl", "tpot", "requeued")
TABLE_STATS = ("count", "mean", "p50", "p90", "p99", "max")


@dataclass
class Section:
    id: str
    title: str
    sentence: str
    charts: list[tuple[str, charts.Spec]] = field(default_factory=list)
    # {"header": [...], "rows": [[cell, ...]]}: a cell is its text, or (text, its JSON path)
    table: dict[str, Any] | None = None
    note: str | None = None


@dataclass(frozen=True)
class TraceView:
    """One trace as the report shows it: its analysis and the label it goes by."""

    label: str
    analysis: Analysis
    points: int = series.MAX_POINTS  # most points per scatter (several traces share a page)
    name: str | None = None  # what legends call it (a run label), else ``label``

    @property
    def short(self) -> str:
        return self.name or self.label

    @cached_property
    def events(self) -> pl.LazyFrame | None:
        """The trace's canonical events (for ticks and preemptions), when it keeps them."""
        reader = self.analysis.events_reader
        return reader() if reader is not None else None

    @property
    def slices(self) -> pl.DataFrame | None:
        return self.analysis.slices

    @cached_property
    def json(self) -> dict[str, Any]:
        """The run's report as ``servetrace analyze --format json`` prints it."""
        return analysis_dict(self.analysis)


def summary_section(view: TraceView, prefix: str) -> Section:
    summary = view.analysis.summary
    doc = view.json
    m = summary.metrics
    phases = (
        ["queue_wait", "prefill", "decode"]
        if view.analysis.timeline.has_admissions
        else ["ttft", "decode"]
    )
    means: dict[str, float] = {
        p: float(m[p]["mean"] or 0) for p in phases if m[p]["mean"] is not None
    }
    tail = m["delivery_tail"]["mean"]
    if tail:
        means["delivery_tail"] = float(tail)
    total = sum(means.values())
    if total > 0:
        ranked = sorted(means.items(), key=lambda kv: -kv[1])
        top, value = ranked[0]
        rest = ", ".join(f"{p.replace('_', ' ')} {v / total:.0%}" for p, v in ranked[1:])
        sentence = (
            f"{top.replace('_', ' ').capitalize()} dominates: {value / total:.0%} of the mean "
            f"response ({ms_words(value)} of {ms_words(total)}); {rest}."
        )
    else:
        sentence = "No completed request: there is no response time to decompose."
    rows: list[list[str | tuple[str, str]]] = []
    gone = unavailable(summary)
    for metric in TABLE_METRICS:
        cells: list[str | tuple[str, str]] = [metric]
        if metric in gone:  # never a number the JSON calls unavailable
            rows.append([*cells, f"unavailable: {gone[metric]}"] + [""] * (len(TABLE_STATS) - 1))
            continue
        for stat in TABLE_STATS:
            path = f"metrics.{metric}.{stat}"
            value = value_at(doc, path)
            if value is None:
                text = "n/a"
            elif stat == "count":
                text = f"{value:,}"
            else:
                text = f"{value:,.3f}"
            cells.append((text, path))
        rows.append(cells)
    names = {"queue_wait": "queued", "ttft": "ttft"}
    parts = pl.DataFrame(
        {"phase": [names.get(p, p) for p in means], "mean_ns": [float(v) for v in means.values()]}
    )
    return Section(
        id=f"{prefix}summary",
        title="Summary and decomposition",
        sentence=sentence,
        charts=[(f"{prefix}decomposition", charts.decomposition_bar(parts))] if total > 0 else [],
        table={"header": ["metric (ms)", *TABLE_STATS], "rows": rows},
        note=(
            accounting_line(summary, quarantined=False)
            + ". Latencies describe completed requests."
            + "".join(f" {line[0].upper()}{line[1:]}." for line in errored_lines(summary))
            + (f" Unavailable: {phrase(gone)}." if gone else "")
        ),
    )


def cdf_section(view: TraceView, prefix: str) -> Section:
    m = view.analysis.summary.metrics
    specs = []
    tails = {}
    for metric in series.CDF_METRICS:
        parts = series.cdf_parts(view.analysis, metric, "metric", metric, ("p50", "p90", "p99"))
        if parts is None:
            continue
        curve, marks = parts[0], parts[1].filter(pl.col("value_ns") > 0)
        specs.append((f"{prefix}cdf-{metric}", charts.cdf_chart(curve, marks, metric)))
        p50, p99 = m[metric]["p50"], m[metric]["p99"]
        if p50:
            tails[metric] = float(p99 or 0) / float(p50)
    if tails:
        worst = max(tails, key=lambda k: tails[k])
        ttft = m["ttft"]
        sentence = (
            f"TTFT p50 is {ms_words(ttft['p50'])} and p99 {ms_words(ttft['p99'])}; "
            "the heaviest tail is "
            f"{worst} (p99 = {tails[worst]:.1f}× p50). Dashed lines mark p50, p90, p99."
        )
    else:
        sentence = "No latency values to plot."
    streamed = view.analysis.gaps.height == 0 and (m["itl"]["count"] or 0) > 0
    note = (
        "ITL: a streamed trace keeps no individual gaps, so its CDF is not drawn."
        if streamed
        else None
    )
    return Section(f"{prefix}cdfs", "Latency distributions (CDF)", sentence, specs, note=note)


def _no_time_axis(view: TraceView, section_id: str, title: str) -> Section | None:
    """Without send times nothing can be placed on a time axis: say so, draw nothing."""
    if view.analysis.summary.arrival_known:
        return None
    return Section(
        section_id,
        title,
        "Send times are unknown in this trace (each request's latencies are measured from "
        "its own send), so nothing can be placed on a time axis.",
    )


def over_time_section(view: TraceView, prefix: str) -> Section:
    title = "Over time: load, queue and throughput"
    unknown = _no_time_axis(view, f"{prefix}over-time", title)
    if unknown:
        return unknown
    over = series.over_time(view.analysis, view.events)
    c = view.analysis.summary.concurrency
    queued = over.levels.filter(pl.col("series") == "queued").sort(
        "peak", "t_ns", descending=[True, False]
    )
    when = (queued["t_ns"][0] - over.origin_ns) / 1e9 if queued.height else 0.0
    tput = view.analysis.summary.throughput
    in_system = f"peak {c.get('in_system_peak') or 0}, mean {c.get('in_system_mean') or 0:.1f}"
    if c.get("queued_peak") is not None:
        load = f"The queue peaked at {c['queued_peak']} requests around {when:,.0f} s (in system: "
        load += f"{in_system})"
    else:  # a client sees no queue: only the requests in the system
        why = unavailable(view.analysis.summary).get("queue_wait", "not in this trace")
        load = f"Requests in the system: {in_system} (queue and running set unavailable: {why})"
    rate = tput.get("requests_per_s")
    sentence = load + (
        f"; requests completed at {rate:.2f} req/s on average." if rate is not None else "."
    )
    note = None if view.events is not None else "Output tokens/s needs the trace's ticks."
    drawn = [
        (f"{prefix}rates", charts.rates_chart(over)),
        (f"{prefix}levels", charts.levels_chart(over)),
    ]
    if view.slices is not None:  # --slice: the per-slice figures, on the same time axis
        drawn.append((f"{prefix}slices", charts.slices_chart(view.slices, over.origin_ns)))
    return Section(
        f"{prefix}over-time",
        title,
        sentence,
        drawn,
        note=(note or "") + f" Bins of {over.bin_ns / 1e9:g} s; levels are the peak in each bin.",
    )


def latency_time_section(view: TraceView, prefix: str) -> Section:
    unknown = _no_time_axis(view, f"{prefix}latency-time", "Per-request TTFT and e2e by arrival")
    if unknown:
        return unknown
    points = series.request_points(view.analysis, view.points)
    origin = view.analysis.timeline.trace_start_ns or 0
    p99 = points.rolling.filter((pl.col("metric") == "ttft") & (pl.col("quantile") == "p99"))
    if p99.height:
        top = p99.sort("value_ns", descending=True).row(0, named=True)
        sentence = (
            f"TTFT's rolling p99 was worst ({ms_words(top['value_ns'])}) for requests arriving "
            f"around {(top['arrival_ns'] - origin) / 1e9:,.0f} s and best at "
            f"{ms_words(p99.select(pl.col('value_ns').min()).item())}: warm-up, bursts and drain "
            "show as its swings."
        )
    else:
        sentence = f"Too few completed requests ({points.total}) for a rolling percentile."
    note = (
        f"Showing every {-(-points.total // points.shown)}-th of {points.total:,} completed "
        f"requests ({points.shown:,} shown); the rolling lines use all of them."
        if points.shown < points.total
        else f"All {points.total:,} completed requests shown."
    )
    return Section(
        f"{prefix}latency-time",
        "Per-request TTFT and e2e by arrival",
        sentence,
        [(f"{prefix}latency-scatter", charts.latency_over_time(points, origin))],
        note=note,
    )


def waterfall_section(view: TraceView, prefix: str) -> Section:
    chosen, slices = series.slowest_requests(view.analysis, view.events)
    if chosen.height == 0:
        return Section(f"{prefix}waterfall", "Slowest requests", "No finished request.", [])
    top = chosen.row(0, named=True)
    mine = slices.filter(pl.col("request_id") == top["request_id"])
    spent = (
        mine.filter(pl.col("phase") != "requeued")
        .with_columns((pl.col("to_ns") - pl.col("from_ns")).alias("d"))
        .sort("d", descending=True)
    )
    big = spent.row(0, named=True) if spent.height else {"phase": "?", "d": 0}
    cancelled = chosen.filter(pl.col("outcome") == "cancelled").height
    if "preemptions" in unavailable(view.analysis.summary):
        tally = f"{cancelled} cancelled (preemptions are not in this trace)"
    else:
        preempted = chosen.filter(pl.col("preemptions") > 0).height
        tally = f"{preempted} preempted (requeued) and {cancelled} cancelled"
    sentence = (
        f"The slowest request, {top['request_id']}, took {ms_words(top['e2e_ns'])}, "
        f"{big['d'] / top['e2e_ns']:.0%} of it in {big['phase']}; of the {chosen.height} slowest, "
        f"{tally}."
    )
    return Section(
        f"{prefix}waterfall",
        f"Waterfall of the {chosen.height} slowest requests",
        sentence,
        [(f"{prefix}waterfall-chart", charts.waterfall_chart(slices))],
        note="Requeued (red) is time queued again after a preemption, drawn over the phase "
        "it interrupted.",
    )


def formula_section(view: TraceView, prefix: str) -> Section:
    f = view.analysis.summary.formula
    points, total = series.formula_points(view.analysis, view.points)
    check = f.per_request
    worst: dict[str, Any] | None = dict(check.worst[0]) if check.worst else None
    share = check.within_tolerance / check.checked if check.checked else 0.0
    if check.checked == 0:
        return Section(
            f"{prefix}formula",
            "The formula check: residuals",
            "The formula check needs per-token times (a mean ITL per request); this trace has "
            "none, so no request could be checked.",
        )
    sentence = (
        f"{check.within_tolerance:,} of {check.checked:,} requests ({share:.1%}) satisfy "
        f"T ≈ TTFT + (N−1)·ITL within max({f.abs_tol_ns / 1e6:g} ms, {f.rel_tol:.0%})"
        + (
            f"; the worst is {worst['request_id']} "
            f"({ms_words(worst['residual_ns'])}, {worst['cause']})."
            if worst and abs(worst["residual_ns"]) > f.abs_tol_ns
            else "."
        )
    )
    broken: list[dict[str, Any]] = [
        w
        for w in check.worst
        if abs(float(w["residual_ns"])) > f.abs_tol_ns  # type: ignore[arg-type]
    ]
    rows = [
        [str(w["request_id"]), f"{w['residual_ns'] / 1e6:,.3f}", str(w["cause"])] for w in broken
    ]
    return Section(
        f"{prefix}formula",
        "The formula check: residuals",
        sentence,
        [(f"{prefix}residuals", charts.residual_chart(points))] if points.height else [],
        table={"header": ["request", "residual (ms)", "evidence"], "rows": rows} if rows else None,
        note=f"{points.height:,} of {total:,} requests drawn: every one that breaks the "
        "formula, the rest thinned."
        if points.height < total
        else None,
    )


TRACE_SECTIONS = (
    summary_section,
    cdf_section,
    over_time_section,
    latency_time_section,
    waterfall_section,
    formula_section,
)
