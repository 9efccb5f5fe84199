"""``survival.estimate`` of every ``--by`` group at once.

The censoring of ``analysis.survival`` (same rules, same columns), with each request
censored at its **own group's** end of trace, then one grouped Kaplan–Meier per metric
(``stats.grouped_km.kaplan_meier_codes``, over flat arrays; the counts are
``bincount``s of the group codes) instead of a fit per group: each group gets the dict
``survival.estimate`` gives for its requests alone. ``requests`` carry the group codes
(``CODE``), numbered by position in ``values``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.grouped_gaps import CODE
from servetrace.analysis.survival import ESTIMATOR, METRICS, QUANTILES, _censoring
from servetrace.stats.grouped_km import kaplan_meier_codes

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
    groups = len(values)
    index = {value: i for i, value in enumerate(values)}  # the codes of ``CODE``
    for metric in METRICS:
        wanted = [v for v in ended if metric != "queue_wait" or admissions.get(v, False)]
        if not wanted:
            continue
        samples = _censoring(rows, metric, pl.col(_END), keep=(CODE,))
        code = samples[CODE].to_numpy().astype(np.int64, copy=False)
        seen = samples["observed"].to_numpy()
        why = samples["why"]
        tally = {
            "events": np.bincount(code[seen], minlength=groups),
            "censored": np.bincount(code[~seen], minlength=groups),
            "censored_cancelled": np.bincount(
                code[(why == "cancelled").fill_null(False).to_numpy()], minlength=groups
            ),
            "censored_in_flight": np.bincount(
                code[(why == "in_flight").fill_null(False).to_numpy()], minlength=groups
            ),
        }
        counted = {name: column.tolist() for name, column in tally.items()}
        fits = kaplan_meier_codes(code, samples["duration_ns"].to_numpy(), seen, groups, QUANTILES)
        for value in wanted:
            c = index[value]
            in_flight = int(counted["censored_in_flight"][c])
            base: dict[str, Any] = {
                "estimator": ESTIMATOR,
                "events": int(counted["events"][c]),
                "censored": int(counted["censored"][c]),
                "censored_cancelled": int(counted["censored_cancelled"][c]),
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
            fit = fits.get(c, {"floor": 1.0, **dict.fromkeys(QUANTILES)})
            found = {name: fit[name] for name in QUANTILES}
            entry[metric] = {
                **base,
                **found,
                "floor": fit["floor"],
                "unreached": [name for name, v in found.items() if v is None],
                "unavailable": None,
            }
    return out
