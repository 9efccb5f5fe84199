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
from servetrace.analysis.survival import ESTIMATOR, METRICS, QUANTILES, censoring_columns
from servetrace.stats.grouped_km import kaplan_meier_codes

_END = "_group_end"


def estimate_by(
    requests: pl.DataFrame,
    values: Sequence[Any],
    metrics: Mapping[Any, Mapping[str, Mapping[str, Any]]],
    ends: Mapping[Any, int | None],
    admissions: Mapping[Any, bool],
    arrival_known: Mapping[Any, bool],
) -> dict[Any, dict[str, dict[str, Any]] | None]:
    """Per value: ``survival.estimate`` of its requests (group codes ``CODE``), with
    ``metrics`` its completed-only distributions and ``ends`` its last event."""
    groups = len(values)
    code = requests[CODE].to_numpy().astype(np.int64, copy=False)
    end_of = [ends.get(v) for v in values]
    # a group with requests and an end; each request's group end by one gather (no join)
    ended = (np.bincount(code, minlength=groups) > 0) & np.array(
        [e is not None for e in end_of], dtype=np.bool_
    )
    out: dict[Any, dict[str, dict[str, Any]] | None] = dict.fromkeys(values)
    if not ended.any():
        return out
    group_end = pl.Series(_END, [e or 0 for e in end_of], dtype=pl.Int64).gather(requests[CODE])
    rows = requests.with_columns(group_end)
    if not ended.all():
        rows = rows.filter(pl.Series(ended[code]))
    for c in np.flatnonzero(ended).tolist():
        out[values[c]] = {}
    admitted = np.array([admissions.get(v, False) for v in values], dtype=np.bool_)
    wanted_by = {m: ended & admitted if m == "queue_wait" else ended for m in METRICS}
    metrics_wanted = [m for m in METRICS if wanted_by[m].any()]
    # every metric's censoring in one query (``survival.censoring_columns``, as
    # ``_censoring`` takes it), with each request's kind: 0 observed, 1 cancelled, 2 in
    # flight, 3 other censored, so the four counts of every group are one bincount
    columns = []
    for metric in metrics_wanted:
        duration, seen, why = censoring_columns(metric, pl.col(_END))
        kind = (
            pl.when(seen)
            .then(0)
            .when(why == "cancelled")
            .then(1)
            .when(why == "in_flight")
            .then(2)
            .otherwise(3)
        )
        columns += [
            duration.is_not_null().alias(f"_{metric}_kept"),
            duration.fill_null(0).alias(f"_{metric}_duration"),
            seen.alias(f"_{metric}_observed"),
            kind.alias(f"_{metric}_kind"),
        ]
    table = rows.select(CODE, *columns) if columns else rows.clear()
    no_fit = {"floor": 1.0, **dict.fromkeys(QUANTILES)}  # a group with no fit
    every_code = table[CODE].to_numpy().astype(np.int64, copy=False)
    for metric in metrics_wanted:
        wanted = wanted_by[metric]
        kept = table[f"_{metric}_kept"].to_numpy()
        of = every_code[kept]
        seen = table[f"_{metric}_observed"].to_numpy()[kept]
        kind = table[f"_{metric}_kind"].to_numpy()[kept]
        tally = np.bincount(of * 4 + kind, minlength=4 * groups).reshape(groups, 4)
        events, cancelled, flying = (tally[:, j].tolist() for j in range(3))
        censored = (tally[:, 1:].sum(axis=1)).tolist()
        durations = table[f"_{metric}_duration"].to_numpy()[kept]
        fits = kaplan_meier_codes(of, durations, seen, groups, QUANTILES)
        for c in np.flatnonzero(wanted).tolist():
            value = values[c]
            only = metrics[value][metric]
            entry: dict[str, Any] = {  # the keys in ``survival.estimate``'s order
                "estimator": ESTIMATOR,
                "events": events[c],
                "censored": censored[c],
                "censored_cancelled": cancelled[c],
                "censored_in_flight": flying[c],
                "completed_only": {k: only.get(k) for k in QUANTILES},
            }
            if flying[c] and not arrival_known.get(value, True):
                entry.update(dict.fromkeys(QUANTILES))
                entry["unavailable"] = "arrival_unknown"
            else:
                fit = fits.get(c, no_fit)
                for name in QUANTILES:
                    entry[name] = fit[name]
                entry["floor"] = fit["floor"]
                entry["unreached"] = [name for name in QUANTILES if fit[name] is None]
                entry["unavailable"] = None
            out[value][metric] = entry  # type: ignore[index]
    return out
