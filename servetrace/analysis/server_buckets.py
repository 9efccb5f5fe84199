"""A server latency histogram against the trace's own values (design §12): one code for
every row of ``server_histograms.ENGINE_CHECKS`` (vLLM's, SGLang's, TensorRT-LLM's).

Per scrape interval and bucket, the server's cumulative bucket delta against the trace's
values the server would have counted in the interval (``observations``: each at the
instant its engine observes it, once per request, gap or token), rebinned into the
server's ``le`` bounds; exact when both cover the same requests on one clock. Over the
whole span, p50/p90/p99 as ``histogram_quantile`` interpolates them from the buckets
against the trace's exact percentile, with the bucket that bounds the error.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.result import Analysis, events_of
from servetrace.analysis.server_findings import Finding, differences
from servetrace.analysis.server_histograms import HistogramCheck
from servetrace.analysis.tick_order import tick_tokens
from servetrace.analysis.unavailable import unavailable
from servetrace.schema import TICK_EVENTS
from servetrace.sources.server_metrics.series import histogram_deltas, total_deltas

QUANTILES = (0.5, 0.9, 0.99)
NO_EVENTS = "the analysis keeps no events to take the gaps from (merged partials, Ray)"


def per_interval(edges: np.ndarray, times: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Σ weight of the times in each interval (edges[k-1], edges[k]]."""
    out = np.zeros(max(edges.size - 1, 0), dtype=np.float64)
    k = np.searchsorted(edges, times, side="left") - 1
    keep = (k >= 0) & (k < out.size)
    np.add.at(out, k[keep], weight[keep])
    return out


def ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` elementwise, NaN where the denominator is not > 0."""
    out = np.full(denominator.size, np.nan)
    return np.divide(numerator, denominator, out=out, where=denominator > 0)


def observations(
    check: HistogramCheck, analysis: Analysis, events: pl.LazyFrame | None
) -> tuple[np.ndarray, np.ndarray] | str:
    """``(instant_ns, value_ns)`` of every value of the trace the server would have
    counted (trace clock), or why the trace has none (never an empty stand-in)."""
    why = unavailable(analysis.summary).get(check.metric)
    if why is not None:
        return f"the trace has no {check.metric.replace('_', ' ')} ({why})"
    requests = analysis.per_request
    if check.observed_at == "tick":
        return _gaps(requests, events, per_token=check.per == "token")
    # A metric the trace can express but no request has (no first token came) is a count
    # of zero to compare, not an unknown: the server counting such values is a finding.
    column = f"{check.metric}_ns"
    got = requests.filter(pl.col(column).is_not_null())
    if check.observed_at == "completion":
        got = got.filter(pl.col("outcome") == "completed")
        at = got["arrival_ns"] + got["e2e_ns"]
    elif check.observed_at == "admission":
        # Admitted once at least: a request cancelled in its first queue never was.
        queued = (pl.col("cancelled_in") == "queued") & (pl.col("preemptions") == 0)
        got = got.filter(~queued.fill_null(False))
        at = got["arrival_ns"] + got["queue_wait_ns"]
    else:  # the first token
        at = got["arrival_ns"] + got["ttft_ns"]
    return at.to_numpy(), got[column].to_numpy()


def _gaps(
    requests: pl.DataFrame, events: pl.LazyFrame | None, per_token: bool = False
) -> tuple[np.ndarray, np.ndarray] | str:
    """Every gap between consecutive output events of each request with real ticks, at
    the later one: the server observes each step while a request runs, whatever its end.
    ``per_token`` (SGLang): a gap ``g`` before a tick of ``k`` tokens is ``k`` values
    ``g / k``."""
    if events is None:
        return NO_EVENTS
    kept = [tick_tokens(events.collect_schema().names()).alias("k")] if per_token else []
    ticks = events.filter(pl.col("event").is_in(TICK_EVENTS)).select("request_id", "ts", *kept)
    got = (
        events_of(ticks, requests.filter(pl.col("itl_mean_ns").is_not_null()))
        .sort("request_id", "ts")
        .with_columns(pl.col("ts").diff().over("request_id").alias("gap_ns"))
        .drop_nulls("gap_ns")
        .collect()
    )
    if not per_token:
        return got["ts"].to_numpy(), got["gap_ns"].to_numpy()
    k = got["k"].to_numpy().astype(np.int64)
    per = got["gap_ns"].to_numpy() / np.maximum(k, 1)
    return np.repeat(got["ts"].to_numpy(), k), np.repeat(per, k)


def histogram_quantile(q: float, les: np.ndarray, cum: np.ndarray) -> tuple[float, int] | None:
    """Prometheus' ``histogram_quantile`` (linear within the bucket, 0 as the lowest
    bound, the highest finite bound in ``+Inf``) and the bucket holding the rank."""
    total = cum[-1] if cum.size else 0
    if total <= 0:
        return None
    rank = q * total
    b = int(np.searchsorted(cum, rank, side="left"))
    if b >= les.size - 1 and np.isinf(les[-1]):
        return (float(les[-2]), les.size - 1) if les.size > 1 else None
    lo = 0.0 if b == 0 else float(les[b - 1])
    below = 0.0 if b == 0 else float(cum[b - 1])
    inside = float(cum[b]) - below
    return lo + (float(les[b]) - lo) * ((rank - below) / inside if inside else 0.0), b


def _ns(seconds: float) -> int | None:
    return None if not np.isfinite(seconds) else round(seconds * 1e9)


def _quantiles(les: np.ndarray, totals: np.ndarray, exact_values: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in QUANTILES:
        found = histogram_quantile(q, les, totals)
        exact = float(np.quantile(exact_values, q)) if exact_values.size else None
        estimate = None if found is None else found[0]
        # The bucket holding the rank bounds the error (no bound above the highest one).
        bucket = None
        if found is not None:
            b = found[1]
            bucket = [0 if b == 0 else round(float(les[b - 1]) * 1e9), _ns(float(les[b]))]
        trace_ns = None if exact is None else round(exact * 1e9)
        histogram_ns = None if estimate is None else round(estimate * 1e9)
        out[f"p{round(q * 100)}"] = {
            "trace_ns": trace_ns,
            "histogram_ns": histogram_ns,
            "error_ns": None
            if trace_ns is None or histogram_ns is None
            else histogram_ns - trace_ns,
            "bucket_ns": bucket,
        }
    return out


def _cause(check: HistogramCheck, server_total: float, trace_total: float) -> str:
    if server_total > trace_total:
        return f"the server counts {check.counts} the trace does not have"
    if server_total < trace_total:
        return (
            f"the server did not count all the trace's {check.counts} "
            "(a replica not scraped, lost observations)"
        )
    return check.definition


def histogram_finding(
    check: HistogramCheck,
    metrics: pl.DataFrame,
    edges: np.ndarray,
    offset_ns: int,
    observed: tuple[np.ndarray, np.ndarray] | str,
    where: str,
) -> Finding:
    """``check``'s finding over the scrape intervals ``edges`` (trace clock)."""
    if check.absent is not None:
        return Finding(check.name, None, unavailable=check.absent)
    extra: dict[str, Any] = {"definition": check.definition, "per": check.per}
    deltas, family = None, check.families[0]
    for name in check.families:
        got = histogram_deltas(metrics, name, where)
        if not got.is_empty():
            deltas, family = got, name
            break
    if deltas is None:
        names = " or ".join(check.families)
        return Finding(check.name, family, unavailable=f"no {names} histogram", extra=extra)
    if isinstance(observed, str):
        return Finding(check.name, family, unavailable=observed, extra=extra)
    at, values_ns = observed
    les = np.sort(deltas["le"].unique().to_numpy())
    server = np.stack(
        [total_deltas(deltas.filter(pl.col("le") == le), edges + offset_ns) for le in les],
        axis=1,
    )
    values_s = values_ns / 1e9
    trace = np.stack([per_interval(edges, at, (values_s <= le) * 1.0) for le in les], axis=1)
    diff = server - trace
    if diff.size == 0:
        return Finding(
            check.name, family, unavailable="no scrape interval in the trace", extra=extra
        )
    flat = int(np.argmax(np.abs(diff)))
    inside = (at > edges[0]) & (at <= edges[-1])
    totals_s, cum_t = server.sum(axis=0), trace.sum(axis=0)
    extra["worst_le_s"] = float(les[flat % les.size]) if diff.flat[flat] else None
    extra["quantiles"] = _quantiles(les, totals_s, np.sort(values_s[inside]))
    # Per interval (row) and bucket: a cell's instant is its interval's end.
    f = differences(
        check.name,
        family,
        diff.ravel(),
        np.repeat(edges[1:], les.size),
        compared=int(diff.shape[0]),
        server_total=float(totals_s[-1]),
        trace_total=float(cum_t[-1]),
        extra=extra,
    )
    if f.max_abs:
        f = replace(f, cause=_cause(check, float(totals_s[-1]), float(cum_t[-1])))
    return f
