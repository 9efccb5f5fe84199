"""Kaplan–Meier estimates and percentile intervals of every ``--by`` group.

Each group gets what analysing its requests alone would give: its own requests, its own
end of trace (its last event) for in-flight censoring, its own samples for the
intervals. All groups at once: one grouped Kaplan–Meier per metric
(``grouped_survival``) and one sort per metric for the intervals
(``grouped_intervals``), no pass per group. Beyond ``MAX_GROUPS`` values the per-group
estimates are left out (empty), as a report of that many groups is a table for a
machine, not a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import polars as pl

from servetrace.analysis.grouped_intervals import metric_intervals_by
from servetrace.analysis.grouped_survival import estimate_by
from servetrace.analysis.summary import Summary
from servetrace.stats.grouped_order import GroupedSample

MAX_GROUPS = 1000


def attach(
    summaries: dict[Any, Summary],
    requests: pl.DataFrame,
    samples: Mapping[str, GroupedSample | None],
    group: str,
    ends: Mapping[Any, int | None],
    admissions: Mapping[Any, bool],
) -> dict[Any, Summary]:
    """The summaries with ``survival`` and ``intervals`` filled in per group.

    ``requests`` carry the group (``group``); ``samples`` hold each metric column's values
    sorted by group (``grouped_gaps.sample_of``; ``itl_ns`` None when streamed)."""
    if len(summaries) > MAX_GROUPS:
        return summaries
    values = list(summaries)
    metrics = {v: s.metrics for v, s in summaries.items()}
    survival = estimate_by(
        requests,
        group,
        values,
        metrics,
        ends,
        admissions,
        {v: s.arrival_known for v, s in summaries.items()},
    )
    itl = {v: m["itl"] for v, m in metrics.items()}
    intervals = metric_intervals_by(samples, values, itl)
    return {
        value: replace(summary, survival=survival[value], intervals=intervals[value])
        for value, summary in summaries.items()
    }
