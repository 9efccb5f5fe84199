"""Kaplan–Meier of every group at once: ``stats.survival.kaplan_meier`` per group, in Polars.

The same estimator, in one sort of (group, duration) and window expressions, for
``--by`` (hundreds of groups): at each distinct event time ``t_i`` of a group, with
``d_i`` events and ``n_i`` of the group's samples at risk (duration ≥ t_i),
``S(t) = Π_{t_i ≤ t} (1 − d_i / n_i)``, a running product in time order within the
group — the very operations, in the same order, as ``kaplan_meier`` of the group alone,
so each group gets the same bits. The q-quantile is the smallest event time with
``S ≤ 1 − q`` (tolerance ``TOLERANCE``), None when S never gets there; ``floor`` is the
lowest S (1.0 without an event).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from servetrace.stats.survival import TOLERANCE


def kaplan_meier_by(
    samples: pl.DataFrame, group: str, quantiles: Mapping[str, float]
) -> dict[Any, dict[str, Any]]:
    """Per value of ``group`` in ``samples`` (columns ``group``, ``duration_ns``,
    ``observed``): ``{"floor": S_min, name: quantile or None, ...}``."""
    for q in quantiles.values():
        if not 0.0 < q < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {q}")
    duration, observed = pl.col("duration_ns"), pl.col("observed")
    sizes = samples.group_by(group).agg(pl.len().alias("_size"))
    steps = (
        samples.group_by(group, "duration_ns")
        .agg(observed.sum().cast(pl.Int64).alias("_deaths"), pl.len().alias("_tied"))
        .sort(group, "duration_ns", nulls_last=True)
        .join(sizes, on=group, how="left", nulls_equal=True)
        .with_columns(
            # samples at risk at t: the group's size less those that ended before t
            (pl.col("_size") - pl.col("_tied").cum_sum().over(group) + pl.col("_tied"))
            .cast(pl.Int64)
            .alias("_at_risk")
        )
        .filter(pl.col("_deaths") > 0)
        .with_columns(
            (1.0 - pl.col("_deaths") / pl.col("_at_risk")).cum_prod().over(group).alias("_s")
        )
    )
    survival = pl.col("_s")
    fitted = steps.group_by(group).agg(
        survival.last().alias("floor"),
        *[
            duration.filter(survival <= (1.0 - q) + TOLERANCE).min().alias(name)
            for name, q in quantiles.items()
        ],
    )
    out: dict[Any, dict[str, Any]] = {
        value: {"floor": 1.0, **dict.fromkeys(quantiles)} for value in sizes[group].to_list()
    }
    for row in fitted.iter_rows(named=True):
        value = row.pop(group)
        out[value] = {
            "floor": float(row["floor"]),
            **{k: (None if row[k] is None else float(row[k])) for k in quantiles},
        }
    return out
