"""Censoring-aware latency: Kaplan–Meier estimates of TTFT, e2e and queue wait.

Latency statistics over completed requests miss exactly the slow requests that were
cancelled or still running at the end of the trace. Here they are right-censored
(``servetrace.stats.survival``), per metric:

- ``ttft``: observed for every request with a first token (completed, cancelled after
  its first token, in flight after it); censored at the cancellation for a request
  cancelled before its first token, at the end of the trace for one in flight without.
- ``e2e``: observed for completed requests; censored at the cancellation (time to
  cancel) and, for in-flight requests, at the end of the trace.
- ``queue_wait`` (traces with admissions): observed once admitted; censored at the
  cancellation of a request cancelled while queued, at the end of the trace for one
  still queued. Requests without admission events (client-side) are left out.

The end of the trace is its last event; a request in flight is censored at
``trace_end − arrival``. Numbers are ns; a percentile the estimate cannot reach is None
and ``unreached`` holds the lowest survival, so ``render/`` can say why.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.stats.survival import kaplan_meier

METRICS = ("ttft", "e2e", "queue_wait")
QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
ESTIMATOR = "kaplan-meier"


def censoring_columns(metric: str, trace_end: int | pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """``(duration, observed, why)`` of each request, as expressions: the duration is
    null for a request the metric leaves out; ``why`` (cancelled/in_flight) is null for
    an observed one. ``trace_end`` is the trace's last event, or (``--by``) an
    expression of each row's group end."""
    end = trace_end if isinstance(trace_end, pl.Expr) else pl.lit(trace_end)
    outcome, age = pl.col("outcome"), end - pl.col("arrival_ns")
    cancelled, flying = outcome == "cancelled", outcome == "in_flight"
    if metric == "ttft":
        seen = pl.col("ttft_ns").is_not_null()
        duration = (
            pl.when(seen)
            .then(pl.col("ttft_ns"))
            .when(cancelled)
            .then(pl.col("e2e_ns"))
            .when(flying)
            .then(age)
        )
    elif metric == "e2e":
        seen = outcome == "completed"
        duration = pl.when(seen).then(pl.col("e2e_ns")).when(cancelled).then(pl.col("e2e_ns"))
        duration = duration.when(flying).then(age)
    else:
        queued_cancel = cancelled & (pl.col("cancelled_in") == "queued")
        seen = pl.col("queue_wait_ns").is_not_null() & ~queued_cancel
        duration = (
            pl.when(seen | queued_cancel)
            .then(pl.col("queue_wait_ns"))
            .when(flying & pl.col("queue_wait_ns").is_null() & pl.col("ttft_ns").is_null())
            .then(age)
        )
    why = pl.when(seen).then(pl.lit(None, pl.String)).otherwise(outcome)
    return duration.cast(pl.Int64), seen, why


def _censoring(requests: pl.DataFrame, metric: str, trace_end: int) -> pl.DataFrame:
    """``duration_ns``, ``observed``, ``why`` (cancelled/in_flight/None) per request
    (``censoring_columns``), the requests the metric leaves out dropped."""
    duration, seen, why = censoring_columns(metric, trace_end)
    return requests.select(
        duration.alias("duration_ns"), seen.alias("observed"), why.alias("why")
    ).filter(pl.col("duration_ns").is_not_null())


def estimate(
    requests: pl.DataFrame,
    completed_only: dict[str, dict[str, Any]],
    trace_end: int | None,
    has_admissions: bool,
    arrival_known: bool,
) -> dict[str, dict[str, Any]] | None:
    """Per metric: events, censored (by cause), KM p50/p90/p99 (ns) beside completed-only.

    None when the trace has no request or no end; a metric the trace cannot express
    (queue wait without admissions) is left out, and one whose in-flight requests have
    no send time (``arrival_known`` false) carries ``unavailable``.
    """
    if requests.height == 0 or trace_end is None:
        return None
    out: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        if metric == "queue_wait" and not has_admissions:
            continue
        frame = _censoring(requests, metric, trace_end)
        in_flight = int((frame["why"] == "in_flight").sum())
        base: dict[str, Any] = {
            "estimator": ESTIMATOR,
            "events": int(frame["observed"].sum()),
            "censored": int((~frame["observed"]).sum()),
            "censored_cancelled": int((frame["why"] == "cancelled").sum()),
            "censored_in_flight": in_flight,
            "completed_only": {k: completed_only[metric].get(k) for k in QUANTILES},
        }
        if in_flight and not arrival_known:
            out[metric] = {**base, **dict.fromkeys(QUANTILES), "unavailable": "arrival_unknown"}
            continue
        fit = kaplan_meier(frame["duration_ns"].to_numpy(), frame["observed"].to_numpy())
        values = {name: fit.quantile(q) for name, q in QUANTILES.items()}
        out[metric] = {
            **base,
            **values,
            "floor": fit.floor,
            "unreached": [name for name, v in values.items() if v is None],
            "unavailable": None,
        }
    return out
