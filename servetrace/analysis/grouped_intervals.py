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

from servetrace.analysis.intervals import CONFIDENCE, PERCENTILES
from servetrace.analysis.metrics import LATENCY_METRICS
from servetrace.stats.grouped_order import GroupedSample
from servetrace.stats.order_ci import needed_for_bounds, ranks

Ranks = dict[str, tuple[np.ndarray, np.ndarray]]


def _ranks_of(samples: Sequence[GroupedSample], confidence: float) -> list[Ranks]:
    """The interval ranks of every group of every sample: one ``ranks`` call per
    percentile for all of them (the metrics of one group mostly share a size)."""
    sizes = np.concatenate([s.sizes for s in samples]) if samples else np.zeros(0, np.int64)
    cuts = np.cumsum([s.sizes.size for s in samples])[:-1]
    out: list[Ranks] = [{} for _ in samples]
    for name, q in PERCENTILES.items():
        low, high = ranks(sizes, q, confidence)
        for i, (lo, hi) in enumerate(zip(np.split(low, cuts), np.split(high, cuts), strict=True)):
            out[i][name] = (lo, hi)
    return out


def _intervals(
    sample: GroupedSample, found_ranks: Ranks, confidence: float
) -> list[dict[str, Any]]:
    """``percentile_intervals`` of each group's sample, from its ranks."""
    sizes = sample.sizes
    bounds: dict[str, list[list[float | None] | None]] = {}
    short: dict[str, list[bool]] = {}
    for name in PERCENTILES:
        low, high = found_ranks[name]
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
    needed = [needed_for_bounds(q, confidence) for q in PERCENTILES.values()]
    names = list(PERCENTILES)
    return [
        {
            "confidence": confidence,
            "n": n,
            "intervals": dict(zip(names, found, strict=True)),
            "needed": {k: m for k, m, s in zip(names, needed, missing, strict=True) if s and n},
        }
        for n, found, missing in zip(
            sizes.tolist(),
            zip(*bounds.values(), strict=True),
            zip(*short.values(), strict=True),
            strict=True,
        )
    ]


def metric_intervals_by(
    samples: Mapping[str, GroupedSample | None],
    values: Sequence[Any],
    itl: Mapping[Any, Mapping[str, Any]],
    confidence: float = CONFIDENCE,
) -> dict[Any, dict[str, dict[str, Any]]]:
    """Per value: ``intervals.metric_intervals`` of its completed requests and its gaps:
    ``samples`` holds each metric column sorted by group (``grouped_gaps.sample_of``,
    groups numbered as in ``values``); ``itl_ns`` is None when streamed, then ``itl``
    holds each group's ITL distribution and its interval is unavailable."""
    out: dict[Any, dict[str, dict[str, Any]]] = {v: {} for v in values}
    present = [s for spec in LATENCY_METRICS if (s := samples[spec.column]) is not None]
    ranks_in_order = iter(_ranks_of(present, confidence))  # the metrics' order, below
    for spec in LATENCY_METRICS:
        sample = samples[spec.column]
        if sample is None:
            for v in values:
                out[v][spec.name] = {
                    "confidence": confidence,
                    "n": itl.get(v, {}).get("count") or 0,
                    "intervals": dict.fromkeys(PERCENTILES),
                    "needed": {},
                    "unavailable": "streamed",
                }
            continue
        found = _intervals(sample, next(ranks_in_order), confidence)
        for v, entry in zip(values, found, strict=True):
            out[v][spec.name] = entry
    return out
