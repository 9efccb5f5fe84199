"""``intervals.metric_intervals`` of every ``--by`` group at once.

Per metric, one sort of (group, value) puts each group's sample in order in one column;
the binomial ranks of every group's size come from one ``order_ci.ranks`` call per
percentile; each bound is then an index into the sorted column (the group's offset plus
its rank). Each group gets the intervals of its own samples, as analysed alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.intervals import CONFIDENCE, PERCENTILES
from servetrace.analysis.metrics import LATENCY_METRICS
from servetrace.stats.order_ci import needed_for_bounds, ranks


def _sorted_by_group(
    frame: pl.DataFrame, group: str, column: str, values: Sequence[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ordered, offsets, sizes)``: the column's non-null, non-NaN values sorted by
    (group, value), and where each of ``values`` starts in it and how many it has."""
    value = pl.col(column)
    keep = value.is_not_null() & (~value.is_nan() if frame.schema[column].is_float() else True)
    ordered = frame.select(group, column).filter(keep).sort(group, column, nulls_last=True)
    counts = dict(ordered.group_by(group, maintain_order=True).len().iter_rows())
    found = list(counts)  # in sorted order, so their samples follow one another
    sizes_found = np.array([counts[v] for v in found], dtype=np.int64)
    starts = dict(zip(found, (np.cumsum(sizes_found) - sizes_found).tolist(), strict=True))
    offsets = np.array([starts.get(v, 0) for v in values], dtype=np.int64)
    sizes = np.array([counts.get(v, 0) for v in values], dtype=np.int64)
    return ordered[column].to_numpy(), offsets, sizes


def _intervals(
    ordered: np.ndarray, offsets: np.ndarray, sizes: np.ndarray, confidence: float
) -> list[dict[str, Any]]:
    """``percentile_intervals`` of each group's slice of ``ordered``."""
    picked: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for name, q in PERCENTILES.items():
        low, high = ranks(sizes, q, confidence)
        # X_(r) of a group: its offset + r − 1 (ranks clipped into 1..n where unused)
        last = np.maximum(sizes, 1)
        at_low = offsets + np.clip(low, 1, last) - 1
        at_high = offsets + np.clip(high, 1, last) - 1
        if ordered.size:
            lo_values, hi_values = ordered[at_low], ordered[at_high]
        else:
            lo_values = hi_values = np.zeros(sizes.size)
        picked[name] = (low >= 1, high <= sizes, lo_values, hi_values)
    needed = {name: needed_for_bounds(q, confidence) for name, q in PERCENTILES.items()}
    out: list[dict[str, Any]] = []
    for i, n in enumerate(sizes.tolist()):
        found: dict[str, Any] = {}
        missing: dict[str, int] = {}
        for name, (has_low, has_high, lo_values, hi_values) in picked.items():
            if n == 0:
                found[name] = None
                continue
            bounds = [
                float(lo_values[i]) if has_low[i] else None,
                float(hi_values[i]) if has_high[i] else None,
            ]
            found[name] = None if bounds == [None, None] else bounds
            if not (has_low[i] and has_high[i]):
                missing[name] = needed[name]
        out.append({"confidence": confidence, "n": n, "intervals": found, "needed": missing})
    return out


def metric_intervals_by(
    completed: pl.DataFrame,
    gaps: pl.DataFrame | None,
    group: str,
    values: Sequence[Any],
    itl: Mapping[Any, Mapping[str, Any]],
    confidence: float = CONFIDENCE,
) -> dict[Any, dict[str, dict[str, Any]]]:
    """Per value: ``intervals.metric_intervals`` of its completed requests and gaps
    (``gaps`` with the group column; None when streamed, then ``itl`` holds each group's
    ITL distribution and its interval is unavailable)."""
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
        frame = gaps if spec.per == "gap" and gaps is not None else completed
        found = _intervals(*_sorted_by_group(frame, group, spec.column, values), confidence)
        for v, entry in zip(values, found, strict=True):
            out[v][spec.name] = entry
    return out
