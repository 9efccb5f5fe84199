"""Distribution-free intervals for every percentile of the report (``stats.order_ci``).

For each latency metric and each reported percentile (p50, p90, p95, p99, p99.9): the
order statistics ``X_(l)``, ``X_(u)`` of the same samples the percentile describes
(completed requests; ``itl``: every pooled gap), in ns. A bound the sample is too small
for is None; ``needed`` is then the sample size that would give both bounds. A streamed
trace keeps ITL as a histogram, not as order statistics: its ITL has no interval
(``unavailable: "streamed"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.groups import Sample
from servetrace.analysis.metric_names import LATENCY_METRICS, PERCENTILES
from servetrace.stats.describe import sorted_values
from servetrace.stats.order_ci import needed_for_bounds, ranks

CONFIDENCE = 0.95


def _ranks_by_size(
    sizes: Sequence[int], confidence: float
) -> dict[str, dict[int, tuple[int, int]]]:
    """Per percentile, ``size → (l, u)``: the ranks of every size at once (``--by`` asks
    for one size per metric and group)."""
    distinct = np.unique(np.asarray([n for n in sizes if n > 0], dtype=np.int64))
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for name, q in PERCENTILES.items():
        out[name] = {}
        if distinct.size:
            low, high = ranks(distinct, q, confidence)
            for n, lo, hi in zip(distinct.tolist(), low.tolist(), high.tolist(), strict=True):
                out[name][int(n)] = (int(lo), int(hi))
    return out


def _intervals(
    ordered: np.ndarray, by_size: dict[str, dict[int, tuple[int, int]]], confidence: float
) -> dict[str, Any]:
    """``{pNN: [lo, hi] | None}`` plus ``needed`` (per pNN, when a bound is missing)."""
    n = int(ordered.size)
    out: dict[str, Any] = {}
    needed: dict[str, int] = {}
    for name, q in PERCENTILES.items():
        if n == 0:
            out[name] = None
            continue
        lo, hi = by_size[name][n]
        bounds = [
            float(ordered[lo - 1]) if lo >= 1 else None,
            float(ordered[hi - 1]) if hi <= n else None,
        ]
        if lo < 1 or hi > n:
            needed[name] = needed_for_bounds(q, confidence)
        out[name] = None if bounds == [None, None] else bounds
    return {"confidence": confidence, "n": n, "intervals": out, "needed": needed}


def percentile_intervals(values: pl.Series, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """``{pNN: [lo, hi] | None}`` plus ``needed`` (per pNN, when a bound is missing)."""
    ordered = sorted_values(values)
    return _intervals(ordered, _ranks_by_size([ordered.size], confidence), confidence)


def _streamed(count: int | None) -> dict[str, Any]:
    """A streamed trace keeps its gaps as a histogram: no order statistics."""
    return {
        "confidence": CONFIDENCE,
        "n": count or 0,
        "intervals": dict.fromkeys(PERCENTILES),
        "needed": {},
        "unavailable": "streamed",
    }


def intervals_by_group(
    samples: dict[str, Sample | None], itl_counts: Sequence[int | None], groups: int
) -> list[dict[str, dict[str, Any]]]:
    """Each group's intervals of every latency metric (ns), from the samples sorted by
    group (``itl_ns`` None when the gaps were streamed: ``itl_counts`` then count them)."""
    sizes = [int(n) for sample in samples.values() if sample is not None for n in sample.sizes]
    by_size = _ranks_by_size(sizes, CONFIDENCE)
    out: list[dict[str, dict[str, Any]]] = [{} for _ in range(groups)]
    for spec in LATENCY_METRICS:
        sample = samples.get(spec.column)
        for g in range(groups):
            out[g][spec.name] = (
                _streamed(itl_counts[g])
                if sample is None
                else _intervals(sample.of(g), by_size, CONFIDENCE)
            )
    return out
