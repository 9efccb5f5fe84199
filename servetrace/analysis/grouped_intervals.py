"""``intervals.metric_intervals`` of every ``--by`` group at once.

Per metric, one sort of (group, value) puts each group's sample in order in one array
(``stats.grouped_order``; the pooled gaps are sorted once, in ``grouped_gaps``);
the binomial ranks of every group's size come from one ``order_ci.ranks`` call per
percentile; each bound is then an index into the sorted column (the group's offset plus
its rank). Each group gets the intervals of its own samples, as analysed alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.grouped_gaps import sample_of
from servetrace.analysis.intervals import CONFIDENCE, PERCENTILES
from servetrace.analysis.metrics import LATENCY_METRICS
from servetrace.stats.grouped_order import GroupedSample
from servetrace.stats.order_ci import needed_for_bounds, ranks


def _pair(low: float, high: float) -> list[float | None] | None:
    """``[low, high]``, NaN for a bound the sample cannot give (samples are never NaN)."""
    if low != low and high != high:
        return None
    return [None if low != low else low, None if high != high else high]


def _intervals(sample: GroupedSample, confidence: float) -> list[dict[str, Any]]:
    """``percentile_intervals`` of each group's sample."""
    sizes = sample.sizes
    bounds: dict[str, list[list[float | None] | None]] = {}
    short: dict[str, list[bool]] = {}
    for name, q in PERCENTILES.items():
        low, high = ranks(sizes, q, confidence)
        has_low, has_high = low >= 1, high <= sizes
        lows = np.where(has_low, sample.at(low), np.nan).tolist()
        highs = np.where(has_high, sample.at(high), np.nan).tolist()
        bounds[name] = [
            None
            if n == 0 or (a != a and b != b)
            else [None if a != a else a, None if b != b else b]
            for n, a, b in zip(sizes.tolist(), lows, highs, strict=True)
        ]  # NaN (a != a) stands for a missing bound: the values are never NaN
        short[name] = (~(has_low & has_high)).tolist()
    needed = {name: needed_for_bounds(q, confidence) for name, q in PERCENTILES.items()}
    names = list(PERCENTILES)
    return [
        {
            "confidence": confidence,
            "n": n,
            "intervals": {name: bounds[name][i] for name in names},
            "needed": {name: needed[name] for name in names if n and short[name][i]},
        }
        for i, n in enumerate(sizes.tolist())
    ]


def metric_intervals_by(
    completed: pl.DataFrame,
    gaps: GroupedSample | None,
    values: Sequence[Any],
    itl: Mapping[Any, Mapping[str, Any]],
    confidence: float = CONFIDENCE,
) -> dict[Any, dict[str, dict[str, Any]]]:
    """Per value: ``intervals.metric_intervals`` of its completed requests (column
    ``grouped_gaps.CODE`` numbers their group in ``values``) and its gaps (None when
    streamed: ``itl`` then holds each group's ITL distribution, and its interval is
    unavailable)."""
    out: dict[Any, dict[str, dict[str, Any]]] = {v: {} for v in values}
    for spec in LATENCY_METRICS:
        if spec.per == "gap" and gaps is None:
            for v in values:
                out[v][spec.name] = {
                    "confidence": confidence,
                    "n": itl.get(v, {}).get("count") or 0,
                    "intervals": dict.fromkeys(PERCENTILES),
                    "needed": {},
                    "unavailable": "streamed",
                }
            continue
        sample = gaps if spec.per == "gap" else sample_of(completed, spec.column, len(values))
        assert sample is not None
        found = _intervals(sample, confidence)
        for v, entry in zip(values, found, strict=True):
            out[v][spec.name] = entry
    return out
