"""The server's series on the trace's time axis, each beside the trace's own value of the
same quantity where the trace has one (design §12, "One time axis").

Per family (``family_series``), on the trace clock (scrape time − the clock offset):

- a **gauge** is its value at each scrape, summed over its series (``series.gauge_at``);
  beside ``vllm:num_requests_waiting`` / ``…_running``, the trace's queued / running level
  at the same instants (``concurrency.levels_at``): what ``waiting_gauge`` /
  ``running_gauge`` compare. A summary's quantiles are gauges kept one per series (a
  quantile is not summed);
- a **counter** is its rate over each scrape interval ``(start, end]``
  (``series.total_deltas`` ÷ the interval); beside the four counters of the findings, the
  trace's own count in that interval per second (``server_metrics.trace_counts``, the
  findings' definitions; successes without ``finished_reason="abort"``);
- a **histogram** is its mean over each interval, Δ``_sum`` ÷ Δ``_count`` (null where
  nothing was observed; a ``*_seconds`` family in ns); beside each family of
  ``server_histograms.HISTOGRAM_CHECKS``, the trace's mean of the same values the
  finding rebins, over those the server observes in the interval
  (``server_buckets.observations``: at the first token, the completion or the tick).

The trace side covers the trace's span only (outside it the trace says nothing, which is
no zero); one the trace cannot give is None with its reason (``trace_unavailable``).
vLLM's names stand for every engine's here: SGLang's and TensorRT-LLM's families of
``server_engines`` are drawn beside the same trace quantities, counted by their rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import levels_at
from servetrace.analysis.result import Analysis
from servetrace.analysis.server_buckets import observations, per_interval, ratio
from servetrace.analysis.server_clock import GAUGES, levels_known
from servetrace.analysis.server_engines import ENGINES, Engine, every, owner
from servetrace.analysis.server_findings import ServerComparison
from servetrace.analysis.server_histograms import ENGINE_CHECKS, HistogramCheck
from servetrace.analysis.server_metrics import finding_deltas, trace_counts
from servetrace.sources.server_metrics.series import counter_deltas, gauge_at, total_deltas

# Every engine's (``server_engines``), vLLM's first. Counter family → its finding:
COUNTER_OF = {
    row.family: name for e in ENGINES.values() for name, row in e.counters.items() if row.family
}
# Histogram family → its check (the trace's metric, when the server observes it).
HISTOGRAMS: dict[str, HistogramCheck] = {
    family: check
    for checks in ENGINE_CHECKS.values()
    for check in checks
    for family in check.families
}
# The KV cache's fill: a trace knows no block size nor cache size to set beside it.
KV_USAGE = tuple(every("kv_usage"))
NO_KV = "a trace does not see the KV cache (its size and block layout are the engine's)"


@dataclass(frozen=True)
class FamilySeries:
    """One family on the trace clock, and the trace's same quantity beside it."""

    family: str
    kind: str  # gauge | counter | histogram | summary
    statistic: str  # value (gauge) | rate_per_s (counter) | mean | mean_ns (histogram)
    series: int  # label sets (summed, except a summary's quantiles)
    server: pl.DataFrame  # t_ns, end_ns (null at an instant), labels ("": summed), value
    trace: pl.DataFrame | None = None  # t_ns, end_ns, value (same instants or intervals)
    trace_quantity: str | None = None  # queued, running, the finding's counter, ttft, ...
    finding: str | None = None  # the consistency finding that compares the two
    trace_unavailable: str | None = None  # why there is no trace side


def _instants(rows: pl.DataFrame) -> np.ndarray:
    return np.unique(rows["ts"].to_numpy()).astype(np.int64)


def _at(start: np.ndarray, values: np.ndarray, end: np.ndarray | None = None) -> pl.DataFrame:
    """One summed line: a value at each instant, or (``end``) over each interval."""
    return pl.DataFrame(
        {"t_ns": start, "end_ns": end, "labels": "", "value": values},
        schema={"t_ns": pl.Int64, "end_ns": pl.Int64, "labels": pl.String, "value": pl.Float64},
    )


def _over(edges: np.ndarray, values: np.ndarray) -> pl.DataFrame:
    return _at(edges[:-1], values, edges[1:])


class _Trace:
    """The trace's side, computed once per set of interval edges."""

    def __init__(self, analysis: Analysis, events: pl.LazyFrame | None) -> None:
        self.analysis = analysis
        self.events = events
        self._counts: dict[tuple[bytes, str], dict[str, np.ndarray]] = {}

    def counts(self, edges: np.ndarray, engine: Engine) -> dict[str, np.ndarray]:
        key = (edges.tobytes(), engine.name)
        if key not in self._counts:
            requests = self.analysis.per_request
            self._counts[key] = trace_counts(requests, self.events, edges, engine)
        return self._counts[key]

    def within(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The instants (intervals) of ``frame`` within (overlapping) the trace: outside
        it the trace says nothing, which is no zero."""
        tl = self.analysis.timeline
        t0, t1 = tl.trace_start_ns or 0, tl.trace_end_ns or 0
        start, end = pl.col("t_ns"), pl.coalesce("end_ns", "t_ns")
        lo = pl.when(pl.col("end_ns").is_null()).then(end >= t0).otherwise(end > t0)
        return frame.filter(lo & (start <= t1))


def _gauge(metrics: pl.DataFrame, family: str, kind: str, off: int, trace: _Trace) -> FamilySeries:
    rows = metrics.filter(pl.col("family") == family, pl.col("le").is_null())
    series = rows["labels"].n_unique()
    if kind == "summary":  # each quantile its own line
        server = rows.sort("labels", "ts").select(
            (pl.col("ts") - off).alias("t_ns"),
            pl.lit(None, pl.Int64).alias("end_ns"),
            "labels",
            "value",
        )
        return FamilySeries(family, kind, "value", series, server)
    instants = _instants(rows)
    total = gauge_at(metrics, family, instants)
    assert total is not None
    server = _at(instants - off, total).filter(pl.col("value").is_not_nan())
    drawn = (family, kind, "value", series, server)
    if family in KV_USAGE:
        return FamilySeries(*drawn, trace_unavailable=NO_KV)
    if family not in GAUGES:
        return FamilySeries(*drawn)
    level, finding, _ = GAUGES[family]
    if not levels_known(trace.analysis):
        return FamilySeries(*drawn, None, level, finding, _no_levels(trace))
    shifted = server["t_ns"].to_numpy()
    level_at = levels_at(trace.analysis.timeline.transitions, shifted)[level]
    mine = _at(shifted, level_at.astype(np.float64))
    return FamilySeries(*drawn, trace.within(mine), level, finding)


def _no_levels(trace: _Trace) -> str:
    from servetrace.analysis.unavailable import unavailable

    why = unavailable(trace.analysis.summary).get("queue_wait")
    return f"the trace has no admissions ({why})" if why else "the trace has no admissions"


def _counter(metrics: pl.DataFrame, family: str, off: int, trace: _Trace) -> FamilySeries:
    rows = metrics.filter(pl.col("family") == family, pl.col("le").is_null())
    finding, engine = COUNTER_OF.get(family), owner(family)
    if finding:
        deltas = finding_deltas(metrics, finding, engine)
    else:
        deltas = counter_deltas(metrics, family)
    instants = _instants(rows)
    edges = instants - off
    seconds = np.diff(edges).astype(np.float64) / 1e9
    server = _over(edges, ratio(total_deltas(deltas, instants), seconds))
    drawn = (family, "counter", "rate_per_s", rows["labels"].n_unique(), server)
    if finding is None:
        return FamilySeries(*drawn)
    counted = trace.counts(edges, engine).get(finding)
    if counted is None:
        return FamilySeries(*drawn, None, finding, finding, "the trace cannot count it")
    mine = trace.within(_over(edges, ratio(counted, seconds)))
    return FamilySeries(*drawn, mine, finding, finding)


def _histogram(metrics: pl.DataFrame, family: str, off: int, trace: _Trace) -> FamilySeries:
    sums, counts = (
        counter_deltas(metrics, f"{family}_sum"),
        counter_deltas(metrics, f"{family}_count"),
    )
    rows = metrics.filter(pl.col("family") == f"{family}_count")
    series = metrics.filter(pl.col("family") == family)["labels"].n_unique()
    instants = _instants(rows)
    edges = instants - off
    scale = 1e9 if family.endswith("_seconds") else 1.0
    statistic = "mean_ns" if scale != 1.0 else "mean"
    mean = ratio(total_deltas(sums, instants) * scale, total_deltas(counts, instants))
    drawn = (family, "histogram", statistic, series, _over(edges, mean))
    if family not in HISTOGRAMS:
        return FamilySeries(*drawn)
    check = HISTOGRAMS[family]
    metric, finding = check.metric, check.name
    seen = observations(check, trace.analysis, trace.events)
    if isinstance(seen, str) or seen[0].size == 0:
        why = seen if isinstance(seen, str) else f"the trace has no {metric}"
        return FamilySeries(*drawn, None, metric, finding, why)
    at, values = seen[0], seen[1].astype(np.float64)
    k = per_interval(edges, at, np.ones(at.size))
    mine = trace.within(_over(edges, ratio(per_interval(edges, at, values), k)))
    return FamilySeries(*drawn, mine, metric, finding)


def _drawn(kinds: dict[str, str]) -> list[str]:
    """The families to draw, in order: those the findings compare, then by kind and name;
    a histogram's (or summary's) ``_sum``/``_count`` and ``_created`` fold into it."""
    folded = {
        f"{f}{s}"
        for f, k in kinds.items()
        if k in ("histogram", "summary")
        for s in ("_sum", "_count")
    }
    names = [f for f in kinds if f not in folded and not f.endswith("_created")]
    first = [*GAUGES, *KV_USAGE, *COUNTER_OF, *HISTOGRAMS]
    order = {"gauge": 0, "counter": 1, "histogram": 2, "summary": 3}
    return sorted(
        names,
        key=lambda f: (first.index(f) if f in first else len(first), order.get(kinds[f], 4), f),
    )


def family_series(
    found: ServerComparison, analysis: Analysis, events: pl.LazyFrame | None
) -> list[FamilySeries]:
    """Every family of ``found``'s series on the trace clock (module docstring)."""
    metrics = found.metrics
    if metrics is None or metrics.is_empty():
        return []
    off = found.alignment.offset_ns
    kinds = dict(found.families.select("family", "kind").iter_rows())
    trace = _Trace(analysis, events)
    out = []
    for family in _drawn(kinds):
        kind = kinds[family]
        if kind == "counter":
            out.append(_counter(metrics, family, off, trace))
        elif kind == "histogram":
            if metrics.filter(pl.col("family") == f"{family}_count").is_empty():
                continue  # buckets without a count: nothing to take a mean of
            out.append(_histogram(metrics, family, off, trace))
        else:
            out.append(_gauge(metrics, family, kind, off, trace))
    return out
