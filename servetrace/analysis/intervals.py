"""Distribution-free intervals for every percentile of the report (``stats.order_ci``).

For each latency metric and each reported percentile (p50, p90, p95, p99, p99.9): the
order statistics ``X_(l)``, ``X_(u)`` of the same samples the percentile describes
(completed requests; ``itl``: every pooled gap), in ns. A bound the sample is too small
for is None; ``needed`` is then the sample size that would give both bounds. A streamed
trace keeps ITL as a histogram, not as order statistics: its ITL has no interval
(``unavailable: "streamed"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.metrics import LATENCY_METRICS
from servetrace.stats.order_ci import needed_for_bounds, rank_pair

PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p99_9": 0.999}
CONFIDENCE = 0.95


def order_statistics(values: pl.Series, wanted: dict[str, int]) -> dict[str, float]:
    """``X_(r)`` (1-based) of the non-null values for each named rank.

    One sort of the values (NumPy's vectorised sort: 0.14 s for 9.5 M pooled ITL gaps),
    then every rank is an index; a Polars ``quantile(interpolation="lower")`` per rank
    re-selected the whole column each time (ten passes, 5 s at 1e7 events).
    """
    return _picked(_sorted_sample(values), wanted)


def _sorted_sample(values: pl.Series) -> np.ndarray:
    """The non-null, non-NaN values as one sorted NumPy array. Converted once: each Polars
    Series operation is a query of its own, which ``--by`` paid per group and metric."""
    sorted_already = values.flags["SORTED_ASC"] and values.null_count() == 0
    array = values.drop_nulls().to_numpy()
    if array.dtype.kind == "f":
        array = array[~np.isnan(array)]
    return array if sorted_already else np.sort(array)


def _picked(ordered: np.ndarray, wanted: dict[str, int]) -> dict[str, float]:
    n = ordered.size
    return {name: float(ordered[min(max(rank, 1), n) - 1]) for name, rank in wanted.items()}


def percentile_intervals(values: pl.Series, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """``{pNN: [lo, hi] | None}`` plus ``needed`` (per pNN, when a bound is missing)."""
    ordered = _sorted_sample(values)
    n = int(ordered.size)
    out: dict[str, Any] = {}
    needed: dict[str, int] = {}
    wanted: dict[str, int] = {}
    for name, q in PERCENTILES.items():
        if n == 0:
            out[name] = None
            continue
        lo, hi = rank_pair(n, q, confidence)
        if lo >= 1:
            wanted[f"{name}:lo"] = lo
        if hi <= n:
            wanted[f"{name}:hi"] = hi
        if lo < 1 or hi > n:
            needed[name] = needed_for_bounds(q, confidence)
    picked = _picked(ordered, wanted) if wanted else {}
    for name in PERCENTILES:
        if n == 0:
            continue
        bounds = [picked.get(f"{name}:lo"), picked.get(f"{name}:hi")]
        out[name] = None if bounds == [None, None] else bounds
    return {"confidence": confidence, "n": n, "intervals": out, "needed": needed}


def metric_intervals(
    completed: pl.DataFrame, gaps: pl.DataFrame | dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """The intervals of every latency metric (ns)."""
    out: dict[str, dict[str, Any]] = {}
    for spec in LATENCY_METRICS:
        if spec.per == "gap":
            if isinstance(gaps, dict):
                out[spec.name] = {
                    "confidence": CONFIDENCE,
                    "n": gaps.get("count") or 0,
                    "intervals": dict.fromkeys(PERCENTILES),
                    "needed": {},
                    "unavailable": "streamed",
                }
                continue
            out[spec.name] = percentile_intervals(gaps[spec.column])
        else:
            out[spec.name] = percentile_intervals(completed[spec.column])
    return out
