"""Censoring-aware latency: Kaplan–Meier estimates of TTFT, e2e and queue wait.

Latency statistics over completed requests miss exactly the slow requests that were
cancelled or still running at the end of the trace. Here they are right-censored
(``servetrace.stats.survival``), per metric:

- ``ttft``: observed for every request with a first token (completed, cancelled after
  its first token, in flight after it); censored at the cancellation for a request
  cancelled before its first token, at the end of the trace for one in flight without.
  A request cancelled in an unknown stage (the source dropped its partial output,
  ``analysis.metrics.partial_output_dropped``) may have had its first token: it is left
  out, and counted as ``left_out_unknown``.
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

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.groups import CODE, Groups
from servetrace.analysis.metrics import UNKNOWN_STAGE
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
    unknown = cancelled & (pl.col("cancelled_in") == UNKNOWN_STAGE)
    if metric == "ttft":
        seen = pl.col("ttft_ns").is_not_null()
        duration = (
            pl.when(seen)
            .then(pl.col("ttft_ns"))
            .when(cancelled & ~unknown)
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
    if metric == "ttft":
        why = pl.when(unknown).then(pl.lit(UNKNOWN_STAGE)).otherwise(why)
    return duration.cast(pl.Int64), seen, why


def estimate_by_group(
    requests: pl.DataFrame,
    groups: Groups,
    completed_only: Sequence[Mapping[str, Mapping[str, Any]]],
    ends: Sequence[int | None],
    admissions: Sequence[bool],
    arrival_known: Sequence[bool],
) -> list[dict[str, dict[str, Any]] | None]:
    """Per group: events, censored (by cause), KM p50/p90/p99 (ns) beside completed-only.

    ``requests`` carry their group (``groups.coded``); ``ends`` is each group's last event
    (its requests in flight are censored there). None for a group without requests or
    end; a metric the group cannot express (queue wait without admissions) is left out,
    and one whose in-flight requests have no send time carries ``unavailable``.
    """
    out: list[dict[str, dict[str, Any]] | None] = [None] * len(groups)
    if requests.height == 0:
        return out
    end = pl.Series("_end", [e if e is not None else 0 for e in ends], dtype=pl.Int64)
    columns = []
    for metric in METRICS:
        duration, seen, why = censoring_columns(metric, pl.col("_end"))
        kind = (
            pl.when(why == "cancelled")
            .then(1)
            .when(why == "in_flight")
            .then(2)
            .when(why == UNKNOWN_STAGE)
            .then(3)
            .otherwise(0)
        )
        columns += [
            duration.is_not_null().alias(f"{metric}:kept"),
            duration.fill_null(0).alias(f"{metric}:d"),
            seen.fill_null(False).alias(f"{metric}:seen"),
            kind.cast(pl.Int8).alias(f"{metric}:why"),
        ]
    frame = requests.with_columns(end.gather(requests[CODE])).select(CODE, *columns)
    frame, offsets = groups.slices(frame)
    arrays = {name: frame[name].to_numpy() for name in frame.columns if name != CODE}
    for g in groups:
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        if ends[g] is None or lo == hi:
            continue
        out[g] = {}
        for metric in METRICS:
            if metric == "queue_wait" and not admissions[g]:
                continue
            kept = arrays[f"{metric}:kept"][lo:hi]
            causes = arrays[f"{metric}:why"][lo:hi]
            out[g][metric] = _estimate(  # type: ignore[index]
                arrays[f"{metric}:d"][lo:hi][kept],
                arrays[f"{metric}:seen"][lo:hi][kept],
                causes[kept],
                completed_only[g][metric],
                arrival_known[g],
                left_out=int((causes == 3).sum()),
            )
    return out


def _estimate(
    durations: np.ndarray,
    observed: np.ndarray,
    why: np.ndarray,
    completed_only: Mapping[str, Any],
    arrival_known: bool,
    left_out: int = 0,
) -> dict[str, Any]:
    """One metric's estimate from each kept request's duration, whether it was observed,
    and why not (1 cancelled, 2 in flight); ``left_out`` requests were cancelled in an
    unknown stage."""
    in_flight = int((why == 2).sum())
    events = int(observed.sum())
    base: dict[str, Any] = {
        "estimator": ESTIMATOR,
        "events": events,
        "censored": int(observed.size - events),
        "censored_cancelled": int((why == 1).sum()),
        "censored_in_flight": in_flight,
        "left_out_unknown": left_out,
        "completed_only": {k: completed_only.get(k) for k in QUANTILES},
    }
    if in_flight and not arrival_known:
        return {**base, **dict.fromkeys(QUANTILES), "unavailable": "arrival_unknown"}
    fit = kaplan_meier(durations, observed)
    values = {name: fit.quantile(q) for name, q in QUANTILES.items()}
    return {
        **base,
        **values,
        "floor": fit.floor,
        "unreached": [name for name, v in values.items() if v is None],
        "unavailable": None,
    }
