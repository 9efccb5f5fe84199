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
    """``percentile_intervals`` of each group's sample, from its ranks, built in bulk:
    every bound is gathered at once (percentile × group) into one object array (group ×
    percentile × end) that becomes the nested lists in one ``tolist``; Python touches only
    the entries with no bound at all (set to None) and each group's final dict."""
    sizes = sample.sizes
    names = list(PERCENTILES)
    low = np.stack([found_ranks[name][0] for name in names])  # percentile × group
    high = np.stack([found_ranks[name][1] for name in names])
    has_low, has_high = low >= 1, high <= sizes
    cells = np.empty((sizes.size, len(names), 2), dtype=object)
    cells[:, :, 0] = sample.at(low).T  # Python floats, as ``float(X_(l))``
    cells[:, :, 1] = sample.at(high).T
    cells[:, :, 0][~has_low.T] = None
    cells[:, :, 1][~has_high.T] = None
    listed = cells.tolist()
    neither = np.nonzero(~(has_low | has_high).T)
    for g, k in zip(*(index.tolist() for index in neither), strict=True):
        listed[g][k] = None  # no bound at all (or an empty group): the entry is None
    needed = [needed_for_bounds(q, confidence) for q in PERCENTILES.values()]
    # which percentiles lack a bound, as bits: the ``needed`` dict of each pattern once
    short = ~(has_low & has_high)
    pattern = np.where(sizes > 0, (1 << np.arange(len(names))) @ short, 0).tolist()
    needs = {
        bits: {n: m for j, (n, m) in enumerate(zip(names, needed, strict=True)) if bits >> j & 1}
        for bits in set(pattern)
    }
    return [
        {
            "confidence": confidence,
            "n": n,
            "intervals": dict(zip(names, row, strict=False)),  # five by construction
            "needed": dict(needs[bits]),
        }
        for n, row, bits in zip(sizes.tolist(), listed, pattern, strict=True)
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
