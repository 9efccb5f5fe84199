"""Server metrics against the trace: one time axis, then named consistency findings
(design §12).

**Clock**: ``server_clock.align`` (the offset applied to every scrape time).

**Findings** (each ``max_abs``, ``mean_abs``, compared points, totals, where it is worst,
and a likely cause when it is not zero):

- ``waiting_gauge`` / ``running_gauge``: ``vllm:num_requests_waiting`` /
  ``…_running`` at each scrape instant against the trace's queued / running count there
  (``concurrency.levels_at``, the level after every transition at or before the instant);
- ``success_counter``, ``preemption_counter``, ``prompt_tokens_counter``,
  ``generation_tokens_counter``: the counter's delta over each scrape interval ``(t₀, t₁]``
  (resets handled, ``series.counter_deltas``) against the trace's completions, preemption
  events, prompt tokens of requests whose first token is in it, and output tokens of the
  ticks in it; ``abort`` finishes are not successes;
- ``ttft_histogram``, ``e2e_histogram``, ``queue_histogram``, ``prefill_histogram``,
  ``decode_histogram``, ``itl_histogram``: each latency histogram's bucket deltas per
  interval against the trace's own values observed in it, rebinned into the server's
  ``le`` bounds, and the percentile error the buckets imply (``server_buckets``, one
  code for the families of ``server_histograms.HISTOGRAM_CHECKS``);
- ``clock_offset``: the offset applied (0 when the clocks agree).

The families are the engine's (``server_engines.detect`` from the names present: vLLM,
SGLang or TensorRT-LLM), each counted by the trace when that engine counts it (SGLang and
TensorRT-LLM count tokens at completion); a family the engine does not expose is
unavailable with the reason, and a gauge the engine refreshes only now and then names
its staleness as the likely cause of a disagreement.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import levels_at
from servetrace.analysis.result import Analysis, events_of
from servetrace.analysis.server_buckets import histogram_finding, observations, per_interval
from servetrace.analysis.server_clock import align, interval_of, levels_known
from servetrace.analysis.server_engines import VLLM, Engine, detect
from servetrace.analysis.server_findings import Finding, ServerComparison, differences
from servetrace.analysis.server_histograms import HISTOGRAM_CHECKS
from servetrace.analysis.tick_order import tick_tokens
from servetrace.errors import InputError
from servetrace.schema import TICK_EVENTS
from servetrace.sources.server_metrics.series import (
    counter_deltas,
    families,
    gauge_at,
    total_deltas,
)

# Finding → vLLM's counter (every engine's: ``server_engines.ENGINES[…].counters``).
COUNTERS = {name: str(row.family) for name, row in VLLM.counters.items()}
FINDINGS = (
    "clock_offset",
    "waiting_gauge",
    "running_gauge",
    *COUNTERS,
    *(check.name for check in HISTOGRAM_CHECKS),
)


def _gauge_cause(f: Finding, what: str, stale: str | None = None) -> str | None:
    if not f.max_abs:
        return None
    if f.mean_signed is not None and f.mean_signed > 0 and f.mean_abs == f.mean_signed:
        cause = f"the server counts {what} the trace does not hold (other clients or replicas)"
    elif f.mean_signed is not None and -f.mean_signed == f.mean_abs:
        cause = f"the trace holds {what} the server does not count (queueing before the server)"
    else:
        cause = "the scrape instants and the events disagree in time (clock skew, late scrapes)"
    if stale is None:
        return cause
    return f"a stale gauge ({stale}, so between refreshes it holds an old value); else {cause}"


def _counter_cause(f: Finding, resets: int) -> str | None:
    if not f.max_abs and not resets:
        return None
    if resets:
        return f"the counter reset {resets} time(s) (a server restart between scrapes)"
    if (f.server_total or 0) > (f.trace_total or 0):
        return "the server counted work the trace does not have (other clients, retries)"
    if (f.server_total or 0) < (f.trace_total or 0):
        return (
            "the server did not count all the trace's work (lost increments, a replica not scraped)"
        )
    return "the totals agree but not per interval: the clocks or scrape times are off"


def compare(
    metrics: pl.DataFrame,
    analysis: Analysis,
    events: pl.LazyFrame | None,
    where: str,
    clock_offset_ns: int | None = None,
) -> ServerComparison:
    """Every finding of ``metrics`` against ``analysis`` (module docstring)."""
    if metrics.is_empty():
        raise InputError(f"{where}: no samples", hint="give a file with at least one scrape")
    broken = metrics.filter(
        pl.col("kind").is_in(["counter", "histogram"]) & ~pl.col("value").is_finite()
    )
    if not broken.is_empty():
        raise InputError(
            f"{where}: {broken['family'][0]} has a non-finite sample at ts {broken['ts'][0]}",
            hint="a counter or histogram count is a finite number",
        )
    engine = detect(metrics["family"].unique().to_list())
    alignment = align(metrics, analysis, where, clock_offset_ns, engine.running)
    off = alignment.offset_ns
    tl = analysis.timeline
    t0, t1 = tl.trace_start_ns or 0, tl.trace_end_ns or 0
    all_instants = np.unique(metrics["ts"].to_numpy())
    findings: dict[str, Finding] = {
        "clock_offset": Finding(
            "clock_offset",
            None,
            compared=int(all_instants.size),
            max_abs=float(abs(off)),
            mean_signed=float(off),
            cause=None if off == 0 else alignment.statement,
        )
    }
    shifted = all_instants - off
    inside = (shifted >= t0) & (shifted <= t1)
    levels = levels_at(tl.transitions, shifted[inside]) if levels_known(analysis) else None
    for family, (level, name, what) in engine.gauges.items():
        gauge = gauge_at(metrics, family, all_instants[inside])
        if gauge is None:
            findings[name] = Finding(name, family, unavailable=f"no {family} series")
        elif levels is None:
            findings[name] = Finding(name, family, unavailable="the trace has no admissions")
        else:
            ok = ~np.isnan(gauge)
            f = differences(name, family, gauge[ok] - levels[level][ok], shifted[inside][ok])
            findings[name] = replace(f, cause=_gauge_cause(f, what, engine.stale))
    # Intervals between consecutive scrapes, on the trace clock.
    edges = shifted
    requests = analysis.per_request
    counted = trace_counts(requests, events, edges, engine)
    for name, row in engine.counters.items():
        if row.family is None:
            findings[name] = Finding(name, None, unavailable=row.absent)
            continue
        family = row.family
        deltas = finding_deltas(metrics, name, engine)
        if deltas.is_empty() and not metrics.filter(pl.col("family") == family).height:
            findings[name] = Finding(name, family, unavailable=f"no {family} series")
            continue
        trace = counted.get(name)
        if trace is None:
            findings[name] = Finding(name, family, unavailable="the trace cannot count it")
            continue
        server = total_deltas(deltas, all_instants)
        resets = int(deltas["reset"].sum()) if deltas.height else 0
        f = differences(
            name,
            family,
            server - trace,
            edges[1:],
            server_total=float(server.sum()),
            trace_total=float(trace.sum()),
            extra={"resets": resets},
        )
        findings[name] = replace(f, cause=_counter_cause(f, resets))
    for check in engine.histograms:
        seen = observations(check, analysis, events)
        findings[check.name] = histogram_finding(check, metrics, edges, off, seen, where)
    return ServerComparison(
        path=where,
        families=families(metrics),
        scrapes=int(all_instants.size),
        interval_ns=interval_of(all_instants) if all_instants.size > 1 else None,
        alignment=alignment,
        findings=findings,
        metrics=metrics,
        engine=engine.name,
    )


def finding_deltas(metrics: pl.DataFrame, name: str, engine: Engine = VLLM) -> pl.DataFrame:
    """The deltas of the engine's counter of finding ``name`` (``series.counter_deltas``);
    a finish with a ``finished_reason`` the engine counts apart (vLLM's ``abort``) is no
    success."""
    row = engine.counters[name]
    deltas = counter_deltas(metrics, str(row.family))
    for reason in row.not_success:
        label = f'"finished_reason":"{reason}"'
        deltas = deltas.filter(~pl.col("labels").str.contains(label, literal=True))
    return deltas


def trace_counts(
    requests: pl.DataFrame,
    events: pl.LazyFrame | None,
    edges: np.ndarray,
    engine: Engine = VLLM,
) -> dict[str, np.ndarray]:
    """The trace's count of each counter's work per interval (those it can count), when
    ``engine`` counts it: prompts at the first token or the completion, output tokens at
    each tick or (a request's all) at its completion."""
    out: dict[str, np.ndarray] = {}
    done = requests.filter(pl.col("outcome") == "completed")
    end = (done["arrival_ns"] + done["e2e_ns"]).to_numpy()
    out["success_counter"] = per_interval(edges, end, np.ones(end.size))
    firsts = requests.filter(pl.col("ttft_ns").is_not_null())
    first = (firsts["arrival_ns"] + firsts["ttft_ns"]).to_numpy()
    rows = engine.counters
    prompts, at = firsts, first
    if rows["prompt_tokens_counter"].observed_at == "completion":
        prompts, at = done, end
    if prompts["prompt_tokens"].null_count() == 0:
        prompt = prompts["prompt_tokens"].to_numpy().astype(np.float64)
        out["prompt_tokens_counter"] = per_interval(edges, at, prompt)
    at_end = rows["generation_tokens_counter"].observed_at == "completion"
    if at_end and done["output_tokens"].null_count() == 0:
        output = done["output_tokens"].to_numpy().astype(np.float64)
        out["generation_tokens_counter"] = per_interval(edges, end, output)
    if events is None:
        return out
    lazy = events_of(events, requests)
    tokens = tick_tokens(lazy.collect_schema().names())
    # One read of the trace for both counters.
    got = (
        lazy.filter(pl.col("event").is_in([*TICK_EVENTS, "preemption"]))
        .select("event", "ts", tokens.alias("w"))
        .collect()
    )
    tick = got["event"].is_in(TICK_EVENTS).to_numpy()
    ts, w = got["ts"].to_numpy(), got["w"].to_numpy().astype(np.float64)
    if not at_end:
        out["generation_tokens_counter"] = per_interval(edges, ts[tick], w[tick])
    pre = ts[~tick]
    out["preemption_counter"] = per_interval(edges, pre, np.ones(pre.size))
    return out
