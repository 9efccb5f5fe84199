"""``formula.check_formula`` of every ``--by`` group at once, over flat arrays.

The same definitions as ``formula`` (its ``within`` tolerance, ``fleet_error``, ``worst``
order and likely cause, ``notes``) and the same figures as ``grouped_figures.formula``,
the Polars reference it replaces (~20 queries: group-bys with quantiles, a sort of every
completed request, joins). Here the counts are ``bincount``s of group codes, each
residual's ``describe`` comes from one sort by (group, value) (``grouped_gaps``), the
worst requests of every group from one ``arg_sort_by`` with the group first (then only
those ≤ 5 × groups rows are gathered and their cause computed), and each group's fleet
ITL from exact int64 sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.formula import (
    WORST_SHOWN,
    FormulaCheck,
    FormulaReport,
    _likely_cause,
    notes,
)
from servetrace.analysis.grouped_figures import empty_distribution
from servetrace.analysis.grouped_gaps import CODE, describe_sample
from servetrace.stats.grouped_moments import float_moments_of
from servetrace.stats.grouped_order import first_of_each_group, group_sums, sort_by_group

Ints = npt.NDArray[np.int64]
_ROW = ("request_id", "residual_ns", "response_ns", "output_tokens", "ticks", "preemptions")
# the columns of a worst request's row and of its likely cause (``formula._likely_cause``)
_CAUSE_READS = (
    "request_id",
    "response_ns",
    "output_tokens",
    "ticks",
    "preemptions",
    "itl_mean_ns",
    "itl_max_ns",
)


def _worst(
    frame: pl.DataFrame, code: Ints, residual: pl.Series, groups: int
) -> dict[int, list[dict[str, object]]]:
    """``formula.worst`` of each group (by code): |residual| descending, then arrival and
    id, nulls last — one ``arg_sort_by`` with the group as its first key, the first
    ``WORST_SHOWN`` of each group taken by index."""
    # the columns a worst row shows or its cause reads, with the residual beside them
    work = frame.select(*_CAUSE_READS, "arrival_ns", CODE).with_columns(
        residual.alias("residual_ns")
    )
    order = work.select(
        pl.arg_sort_by(
            CODE,
            pl.col("residual_ns").abs(),
            "arrival_ns",
            "request_id",
            descending=[False, True, False, False],
            nulls_last=True,
        )
    ).to_series()
    taken = pl.Series(first_of_each_group(order.to_numpy(), code, groups, WORST_SHOWN))
    rows = work[taken].select(*_ROW, _likely_cause().alias("cause"))  # ≤ 5 × groups rows
    names = rows.columns
    # every row's dict in one pass (map over the columns' lists: no per-row zip object to
    # check, ~2x the speed of a loop), then each group's rows as one slice: ``taken`` is
    # ordered by group
    columns = [rows[name].to_list() for name in names]
    listed = list(map(dict, map(zip, repeat(names), zip(*columns, strict=True))))
    if not listed:
        return {}
    of = code[taken.to_numpy()]
    heads = np.flatnonzero(np.concatenate(([True], of[1:] != of[:-1]))).tolist()
    ends = [*heads[1:], len(listed)]
    return {
        c: listed[head:end] for c, head, end in zip(of[heads].tolist(), heads, ends, strict=True)
    }


def _checks(
    frame: pl.DataFrame,
    code: Ints,
    residual: pl.Series,
    values: Sequence[Any],
    abs_tol_ns: int,
    rel_tol: float,
) -> dict[int, FormulaCheck]:
    """``formula._check`` of each group (by code) that has a known residual: the rows
    whose residual is not null are checked, NaNs included (never within tolerance, left
    out of the description), as in ``grouped_figures._formula_checks``."""
    known = residual.is_not_null()
    if not known.all():
        keep = known.to_numpy()
        frame, code, residual = frame.filter(known), code[keep], residual.filter(known)
    groups = len(values)
    if code.size == 0:
        return {}
    checked = np.bincount(code, minlength=groups)
    tolerance = np.maximum(float(abs_tol_ns), frame["response_ns"].to_numpy() * rel_tol)
    r = residual.to_numpy()
    inside = np.bincount(code, weights=np.abs(r) <= tolerance, minlength=groups)
    number = ~np.isnan(r) if r.dtype.kind == "f" else np.ones(r.size, dtype=np.bool_)
    sample = sort_by_group(code[number], r[number], groups)
    moments = float_moments_of(sample) if r.dtype.kind == "f" else None
    described = describe_sample(sample, range(groups), moments)
    worst = _worst(frame, code, residual, groups)
    return {
        c: FormulaCheck(
            checked=int(checked[c]),
            within_tolerance=int(inside[c]),
            residual_ns=described[c],
            worst=tuple(worst.get(c, [])),
        )
        for c in np.flatnonzero(checked).tolist()
    }


def formula_of_groups(
    completed: pl.DataFrame, values: Sequence[Any], abs_tol_ns: int, rel_tol: float
) -> dict[Any, FormulaReport]:
    """``formula.check_formula`` per group (``completed`` carries the group codes
    ``CODE``, numbered as in ``values``)."""
    tokens = pl.col("output_tokens")
    checkable = (  # one query: the rows, and what the fleet check reads of each
        completed.lazy()
        .filter(pl.col("response_ns").is_not_null())
        .with_columns(
            tokens.is_not_null().alias("_counted"),
            tokens.fill_null(0).alias("_tokens"),
            pl.col("decode_ns").fill_null(0).alias("_decode"),
            (tokens - 1).fill_null(0).alias("_steps"),
            (tokens - 1).clip(lower_bound=0).cast(pl.Float64).alias("_predicted"),
            (pl.col("response_ns") - pl.col("ttft_ns")).cast(pl.Float64).alias("_elapsed"),
        )
        .collect()
    )
    groups = len(values)
    code = checkable[CODE].to_numpy().astype(np.int64, copy=False)
    per_request = _checks(
        checkable, code, checkable["formula_residual_ns"], values, abs_tol_ns, rel_tol
    )
    counted = checkable["_counted"].to_numpy()
    multi = counted & (checkable["_tokens"].to_numpy() >= 2)
    decode = group_sums(code, checkable["_decode"].to_numpy(), multi, groups)
    steps = group_sums(code, checkable["_steps"].to_numpy(), multi, groups)
    has_itl = steps > 0
    # as Polars divides Int64 sums: each as Float64
    fleet_itl = np.where(has_itl, decode.astype(np.float64) / np.maximum(steps, 1), np.nan)
    in_fleet = has_itl[code]
    fleet: dict[int, FormulaCheck] = {}
    if in_fleet.any():
        rows = checkable.filter(pl.Series(in_fleet)) if not in_fleet.all() else checkable
        of = code[in_fleet]
        error = rows["_elapsed"] - rows["_predicted"] * pl.Series(fleet_itl[of])
        fleet = _checks(rows, of, error.alias("fleet_error_ns"), values, abs_tol_ns, rel_tol)
    counts = np.bincount(code, minlength=groups).tolist()
    uncounted = np.bincount(code, weights=~counted, minlength=groups).astype(np.int64).tolist()
    empty = FormulaCheck(0, 0, empty_distribution(), ())
    out: dict[Any, FormulaReport] = {}
    for c, value in enumerate(values):
        itl_value = float(fleet_itl[c]) if has_itl[c] else None
        check = per_request.get(c, empty)
        unchecked = counts[c] - check.checked - uncounted[c]
        out[value] = FormulaReport(
            abs_tol_ns=abs_tol_ns,
            rel_tol=rel_tol,
            per_request=check,
            fleet=fleet.get(c, empty) if itl_value is not None else empty,
            fleet_itl_ns=itl_value,
            notes=notes(itl_value, unchecked, uncounted[c], counts[c]),
        )
    return out
