"""Kaplan–Meier estimates and percentile intervals of every ``--by`` group.

Each group gets what analysing its requests alone would give: its own requests, its own
end of trace (its last event) for in-flight censoring, its own samples for the
intervals. This is one pass per group (a partition, not a scan per group); beyond
``MAX_GROUPS`` values the per-group estimates are left out (empty), as a report of
that many groups is a table for a machine, not a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import polars as pl

from servetrace.analysis import intervals, survival
from servetrace.analysis.summary import Summary

MAX_GROUPS = 1000


def attach(
    summaries: dict[Any, Summary],
    requests: pl.DataFrame,
    gaps: pl.DataFrame | Mapping[Any, Any],
    group: str,
    key: str,
    ends: Mapping[Any, int | None],
    admissions: Mapping[Any, bool],
) -> dict[Any, Summary]:
    """The summaries with ``survival`` and ``intervals`` filled in per group."""
    if len(summaries) > MAX_GROUPS:
        return summaries
    parts = {k[0]: v for k, v in requests.partition_by(group, as_dict=True).items()}
    gap_parts: dict[Any, pl.DataFrame] = {}
    if isinstance(gaps, pl.DataFrame):
        joined = gaps.join(requests.select(key, group), on=key, how="inner")
        gap_parts = {k[0]: v for k, v in joined.partition_by(group, as_dict=True).items()}
    out: dict[Any, Summary] = {}
    for value, summary in summaries.items():
        part = parts.get(value, requests.clear())
        completed = part.filter(pl.col("outcome") == "completed")
        group_gaps: pl.DataFrame | dict[str, Any] = (
            gap_parts.get(value, gaps.clear())
            if isinstance(gaps, pl.DataFrame)
            else dict(summary.metrics["itl"])
        )
        out[value] = replace(
            summary,
            survival=survival.estimate(
                part,
                summary.metrics,
                ends.get(value),
                admissions.get(value, False),
                summary.arrival_known,
            ),
            intervals=intervals.metric_intervals(completed, group_gaps),
        )
    return out
