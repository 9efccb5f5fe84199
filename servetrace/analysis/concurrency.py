"""Time-weighted mean and peak of requests queued, running and in the system (design §6).

One definition for the trace summary and for ``--by``: the levels are the running sums
of the lifecycle's transitions (``lifecycle_rules.transitions``), held from each change
to the next, over the window [start, end] of the trace or of each group (a group's own
span, so a group gets the figures of analysing it alone). The mean is
Σ level · time held / (end − start); the peak the highest level reached by ``end``.
Queued and running are reported only for a trace (group) with admissions: a client-side
trace cannot see them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

CONCURRENCY = ("queued", "running", "in_system")


def no_concurrency() -> dict[str, float | int | None]:
    return {f"{n}_{s}": None for n in CONCURRENCY for s in ("mean", "peak")}


def concurrency_by(
    transitions: pl.DataFrame,
    group: str,
    spans: Mapping[Any, Mapping[str, Any]],
    admissions: Mapping[Any, bool],
) -> dict[Any, dict[str, float | int | None]]:
    """Per value of the ``group`` column: concurrency over its span ``{"start", "end"}``.

    One ``group_by`` over all groups. A group missing from the result (no transitions, or
    a span without length) has no concurrency.
    """
    if transitions.height == 0:
        return {}
    bounds = pl.DataFrame(
        {
            group: list(spans),
            "start": [s["start"] for s in spans.values()],
            "end": [s["end"] for s in spans.values()],
        },
        schema={group: transitions.schema[group], "start": pl.Int64, "end": pl.Int64},
    )
    levels = (
        transitions.group_by(group, "ts")
        .agg(pl.col(f"d_{n}").sum() for n in CONCURRENCY)
        .sort(group, "ts")
        .with_columns(pl.col(f"d_{n}").cum_sum().over(group).alias(n) for n in CONCURRENCY)
        .join(bounds, on=group, how="inner", nulls_equal=True)
        .filter((pl.col("ts") <= pl.col("end")) & (pl.col("end") > pl.col("start")))
        .with_columns(pl.col("ts").clip(pl.col("start"), pl.col("end")).alias("at"))
        .with_columns(
            (pl.col("at").shift(-1).over(group).fill_null(pl.col("end")) - pl.col("at"))
            .cast(pl.Float64)
            .alias("held")
        )
    )
    width = (pl.col("end") - pl.col("start")).first().cast(pl.Float64)
    aggregated = levels.group_by(group).agg(
        *[
            ((pl.col(n).cast(pl.Float64) * pl.col("held")).sum() / width).alias(f"{n}_mean")
            for n in CONCURRENCY
        ],
        *[pl.col(n).max().alias(f"{n}_peak") for n in CONCURRENCY],
    )
    out: dict[Any, dict[str, float | int | None]] = {}
    for row in aggregated.iter_rows(named=True):
        value = row[group]
        out[value] = {}
        for n in CONCURRENCY:
            known = n == "in_system" or admissions.get(value, False)
            out[value][f"{n}_mean"] = float(row[f"{n}_mean"]) if known else None
            out[value][f"{n}_peak"] = int(row[f"{n}_peak"]) if known else None
    return out


def concurrency(
    transitions: pl.DataFrame, start: int | None, end: int | None, has_admissions: bool
) -> dict[str, float | int | None]:
    """The whole trace's concurrency over [start, end]: ``concurrency_by``'s definition
    for one group, computed over flat arrays (``concurrency_trace``: a trace of 1e9
    events has 16 M transitions)."""
    if start is None or end is None:
        return no_concurrency()
    from servetrace.analysis.concurrency_trace import trace_levels

    levels = trace_levels(transitions, start, end)
    if levels is None:
        return no_concurrency()
    out: dict[str, float | int | None] = {}
    for n in CONCURRENCY:
        known = n == "in_system" or has_admissions
        out[f"{n}_mean"] = levels[n][0] if known else None
        out[f"{n}_peak"] = levels[n][1] if known else None
    return out
