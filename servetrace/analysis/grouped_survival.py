"""``survival.estimate`` of every ``--by`` group at once.

The censoring of ``analysis.survival`` (same rules, same columns), with each request
censored at its **own group's** end of trace, then one grouped Kaplan–Meier per metric
(``stats.grouped_km``) instead of a fit per group: each group gets the dict
``survival.estimate`` gives for its requests alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from servetrace.analysis.survival import ESTIMATOR, METRICS, QUANTILES, _censoring
from servetrace.stats.grouped_km import kaplan_meier_by

_END = "_group_end"


def estimate_by(
    requests: pl.DataFrame,
    group: str,
    values: Sequence[Any],
    metrics: Mapping[Any, Mapping[str, Mapping[str, Any]]],
    ends: Mapping[Any, int | None],
    admissions: Mapping[Any, bool],
    arrival_known: Mapping[Any, bool],
) -> dict[Any, dict[str, dict[str, Any]] | None]:
    """Per value: ``survival.estimate`` of its requests (column ``group``), with
    ``metrics`` its completed-only distributions and ``ends`` its last event."""
    present = set(requests[group].unique().to_list())
    ended = [v for v in values if v in present and ends.get(v) is not None]
    out: dict[Any, dict[str, dict[str, Any]] | None] = dict.fromkeys(values)
    if not ended:
        return out
    bounds = pl.DataFrame(
        {group: ended, _END: [ends[v] for v in ended]},
        schema={group: requests.schema[group], _END: pl.Int64},
    )
    rows = requests.join(bounds, on=group, how="inner", nulls_equal=True)
    for value in ended:
        out[value] = {}
    for metric in METRICS:
        wanted = [v for v in ended if metric != "queue_wait" or admissions.get(v, False)]
        if not wanted:
            continue
        samples = _censoring(rows, metric, pl.col(_END), keep=(group,))
        why = pl.col("why")
        counts = {
            row[group]: row
            for row in samples.group_by(group)
            .agg(
                pl.col("observed").sum().alias("events"),
                (~pl.col("observed")).sum().alias("censored"),
                (why == "cancelled").sum().alias("censored_cancelled"),
                (why == "in_flight").sum().alias("censored_in_flight"),
            )
            .iter_rows(named=True)
        }
        fits = kaplan_meier_by(samples, group, QUANTILES)
        for value in wanted:
            count = counts.get(value, {})
            in_flight = int(count.get("censored_in_flight") or 0)
            base: dict[str, Any] = {
                "estimator": ESTIMATOR,
                "events": int(count.get("events") or 0),
                "censored": int(count.get("censored") or 0),
                "censored_cancelled": int(count.get("censored_cancelled") or 0),
                "censored_in_flight": in_flight,
                "completed_only": {k: metrics[value][metric].get(k) for k in QUANTILES},
            }
            entry = out[value]
            assert entry is not None
            if in_flight and not arrival_known.get(value, True):
                entry[metric] = {
                    **base,
                    **dict.fromkeys(QUANTILES),
                    "unavailable": "arrival_unknown",
                }
                continue
            fit = fits.get(value, {"floor": 1.0, **dict.fromkeys(QUANTILES)})
            found = {name: fit[name] for name in QUANTILES}
            entry[metric] = {
                **base,
                **found,
                "floor": fit["floor"],
                "unreached": [name for name, v in found.items() if v is None],
                "unavailable": None,
            }
    return out
