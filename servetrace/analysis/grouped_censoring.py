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

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from servetrace.analysis.grouped_intervals import metric_intervals_by
from servetrace.analysis.grouped_survival import estimate_by
from servetrace.stats.grouped_order import GroupedSample

MAX_GROUPS = 1000


def estimates(
    values: Sequence[Any],
    metrics: Mapping[Any, Mapping[str, Mapping[str, Any]]],
    arrival_known: Mapping[Any, bool],
    requests: pl.DataFrame,
    samples: Mapping[str, GroupedSample | None],
    ends: Mapping[Any, int | None],
    admissions: Mapping[Any, bool],
) -> tuple[Mapping[Any, Any], Mapping[Any, Any]] | None:
    """``(survival, intervals)`` of each group (``values``, with its completed-only
    ``metrics``), for the ``Summary`` to be built with; None beyond ``MAX_GROUPS``.

    ``requests`` carry the group codes (``grouped_gaps.CODE``); ``samples`` hold each
    metric column's values sorted by group (``grouped_gaps.sample_of``; ``itl_ns`` None
    when streamed)."""
    if len(values) > MAX_GROUPS:
        return None
    survival = estimate_by(requests, values, metrics, ends, admissions, arrival_known)
    itl = {v: m["itl"] for v, m in metrics.items()}
    return survival, metric_intervals_by(samples, values, itl)
