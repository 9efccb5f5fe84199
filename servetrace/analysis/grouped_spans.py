"""Every ``--by`` group's span and throughput window, over flat arrays.

The span (first arrival, last event, whether there are admissions and releases, requests
and rows) is ``grouped_figures.spans`` of the timeline rows joined to their groups; the
window is ``figures.window_aggregates`` in a ``group_by`` of the requests. Those Polars
statements (the references the tests hold these to) took a join and two hash group-bys,
~3 ms of a 300-group summary at 10^6 events. Here each timeline row's group comes from
its request key (``grouped_gaps.lookup_codes``; rows of requests in no group are left
out, as by the inner join), the columns come from one query each, and every figure is a
``bincount``, an exact int64 sum or a ``minimum``/``maximum.at`` over the group codes:
integers throughout, so the very values the references give.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.grouped_figures import EVENT_TIMES, G
from servetrace.analysis.grouped_gaps import CODE, lookup_codes
from servetrace.analysis.lifecycle import KEY
from servetrace.stats.grouped_order import group_sums

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


def _extreme(
    ufunc: np.ufunc, code: Ints, value: Ints, known: Mask, groups: int
) -> list[int | None]:
    """``ufunc`` (minimum or maximum) of each group's known values; None without any."""
    start = np.iinfo(np.int64).max if ufunc is np.minimum else np.iinfo(np.int64).min
    out = np.full(groups, start, dtype=np.int64)
    ufunc.at(out, code[known], value[known])
    seen = np.bincount(code[known], minlength=groups) > 0
    return [v if s else None for v, s in zip(out.tolist(), seen.tolist(), strict=True)]


def _any(code: Ints, flags: Mask, groups: int) -> list[bool]:
    return (np.bincount(code[flags], minlength=groups) > 0).tolist()


def spans_of(
    timeline_rows: pl.DataFrame, requests: pl.DataFrame, values: Sequence[Any]
) -> dict[Any, dict[str, Any]]:
    """``grouped_figures.spans`` of ``timeline_rows`` in the groups of ``requests``
    (``KEY`` and ``CODE``, codes numbered as in ``values``): per value with requests,
    ``start``, ``end``, ``admissions``, ``releases``, ``requests`` and ``rows``."""
    groups = len(values)
    if requests.height == 0 or timeline_rows.height == 0:
        return {}  # no request in any group (every one invalid, say): no span
    code = lookup_codes(
        requests[KEY].to_numpy(), requests[CODE].to_numpy(), timeline_rows[KEY].to_numpy()
    )
    times = [c for c in EVENT_TIMES if c in timeline_rows.columns]
    last = pl.max_horizontal(pl.col(c) for c in times)  # each row's last event
    arrival = pl.col("arrival_ns")
    part = timeline_rows.select(
        arrival.is_not_null().alias("has_start"),
        arrival.fill_null(0).cast(pl.Int64).alias("start"),
        last.is_not_null().alias("has_end"),
        last.fill_null(0).cast(pl.Int64).alias("end"),
        pl.col("admission_ns").is_not_null().alias("admissions"),
        (pl.col("n_release").fill_null(0) > 0).alias("releases"),
        pl.col("rows").fill_null(0).cast(pl.Int64).alias("rows"),
    )
    mine = code >= 0
    column = {name: part[name].to_numpy()[mine] for name in part.columns}
    code = code[mine]
    counts = np.bincount(code, minlength=groups)
    figures = {
        "start": _extreme(np.minimum, code, column["start"], column["has_start"], groups),
        "end": _extreme(np.maximum, code, column["end"], column["has_end"], groups),
        "admissions": _any(code, column["admissions"], groups),
        "releases": _any(code, column["releases"], groups),
        "requests": counts.tolist(),
        "rows": group_sums(code, column["rows"], np.ones(code.size, np.bool_), groups).tolist(),
    }
    return {
        values[g]: {G: values[g], **{name: found[g] for name, found in figures.items()}}
        for g in np.flatnonzero(counts).tolist()
    }


def windows_of(requests: pl.DataFrame, values: Sequence[Any]) -> dict[Any, dict[str, Any]]:
    """``figures.window_aggregates`` of each group's ``requests`` (``CODE``, numbered as in
    ``values``): per value with requests, ``start``, ``end``, ``completed``, ``output``,
    ``output_missing``, ``prompt``, ``prompt_missing``."""
    groups = len(values)
    done = (pl.col("outcome") == "completed").fill_null(False)
    ended = pl.col("arrival_ns") + pl.col("e2e_ns")
    part = requests.select(
        pl.col(CODE),
        pl.col("arrival_ns").is_not_null().alias("has_start"),
        pl.col("arrival_ns").fill_null(0).cast(pl.Int64).alias("start"),
        ended.is_not_null().alias("has_end"),
        ended.fill_null(0).cast(pl.Int64).alias("end"),
        done.alias("done"),
        *[
            expr
            for name, column in (("output", "output_tokens"), ("prompt", "prompt_tokens"))
            for expr in (
                (done & pl.col(column).is_not_null()).alias(f"{name}_known"),
                (done & pl.col(column).is_null()).alias(f"{name}_missing"),
                pl.col(column).fill_null(0).cast(pl.Int64).alias(name),
            )
        ],
    )
    column = {name: part[name].to_numpy() for name in part.columns}
    code = column[CODE].astype(np.int64, copy=False)
    counts = np.bincount(code, minlength=groups)
    figures = {
        "start": _extreme(np.minimum, code, column["start"], column["has_start"], groups),
        "end": _extreme(np.maximum, code, column["end"], column["has_end"], groups),
        "completed": np.bincount(code[column["done"]], minlength=groups).tolist(),
    }
    for name in ("output", "prompt"):
        known = column[f"{name}_known"]
        figures[name] = group_sums(code, column[name], known, groups).tolist()
        missing = column[f"{name}_missing"]
        figures[f"{name}_missing"] = np.bincount(code[missing], minlength=groups).tolist()
    order = ("start", "end", "completed", "output", "output_missing", "prompt", "prompt_missing")
    return {
        values[g]: {G: values[g], **{name: figures[name][g] for name in order}}
        for g in np.flatnonzero(counts).tolist()
    }
