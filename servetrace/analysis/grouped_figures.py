"""Figures of ``summary.py`` for every group at once: one ``group_by`` each.

The building blocks of ``groups.summarize_groups`` (``--by``): ``describe`` per group,
example ids, each group's span and the formula check. Rows carry their group in the
column ``G``; results are dicts keyed by the group's value. The definitions are shared
with the trace summary: the formula's tolerance, worst requests, fleet ITL and notes come
from ``formula``, concurrency from ``concurrency``; only the aggregation is per group.

``describe_groups`` and ``formula`` are also the Polars statement of what the flat-array
paths ``--by`` runs compute (``grouped_outcomes``, ``grouped_formula``): those are tested
against them, figure for figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from servetrace.analysis.formula import (
    FLEET_DECODE,
    FLEET_STEPS,
    MULTI_TOKEN,
    FormulaCheck,
    FormulaReport,
    fleet_error,
    notes,
    within,
    worst,
)
from servetrace.analysis.summary import EXAMPLES_SHOWN, Distribution
from servetrace.stats.describe import STATISTICS, percentile_of
from servetrace.stats.grouped_moments import float_moments_by
from servetrace.stats.moments import integer_moments

G = "_group"
# Every timestamp a timeline row carries: the latest is the request's last event.
EVENT_TIMES = (
    "arrival_ns",
    "admission_ns",
    "terminal_ns",
    "last_control_ns",
    "release_ns",
    "first_tick_ns",
    "last_tick_ns",
)


def rows_by_group(frame: pl.DataFrame) -> dict[Any, dict[str, Any]]:
    return {row[G]: row for row in frame.iter_rows(named=True)}


def empty_distribution() -> Distribution:
    return {name: (0 if name == "count" else None) for name in STATISTICS}


def describe_groups(
    frame: pl.DataFrame, columns: Sequence[str]
) -> dict[str, dict[Any, Distribution]]:
    """``stats.describe`` of each column, per group: one ``group_by`` for all of them.

    The same numbers as ``describe`` of the group alone: percentiles by Polars' linear
    interpolation, mean and std by ``stats.describe.moments`` (order-independent: exact
    integer sums for integer columns, here as Int128 sums of deviations from the group's
    minimum in the ``group_by``; float columns by ``stats.grouped_moments``).
    """
    exprs = []
    for c in columns:
        v = pl.col(c).drop_nulls()
        if frame.schema[c].is_float():
            v = v.drop_nans()
        parts = {"count": v.count(), "min": v.min(), "max": v.max()}
        for name in STATISTICS:
            q = percentile_of(name)
            if q is not None and name not in parts and name not in ("mean", "std"):
                parts[name] = v.quantile(q / 100, interpolation="linear")
        exprs += [e.cast(pl.Float64).alias(f"{c}\x00{n}") for n, e in parts.items()]
        if frame.schema[c].is_integer():
            d = v.cast(pl.Int128) - v.min().cast(pl.Int128)
            exprs += [
                v.min().cast(pl.Int64).alias(f"{c}\x00pivot"),
                d.sum().alias(f"{c}\x00s1"),
                (d * d).sum().alias(f"{c}\x00s2"),
            ]
    rows = rows_by_group(frame.group_by(G).agg(exprs)) if exprs else {}
    out: dict[str, dict[Any, Distribution]] = {}
    for c in columns:
        out[c] = {}
        integer = frame.schema[c].is_integer()
        floats = {} if integer else float_moments_by(frame, G, c)
        for value, row in rows.items():
            count = int(row[f"{c}\x00count"] or 0)
            if not count:
                out[c][value] = empty_distribution()
                continue
            if integer:
                pivot, s1, s2 = (row[f"{c}\x00{k}"] for k in ("pivot", "s1", "s2"))
                mean, std = integer_moments(count, int(pivot), int(s1), int(s2))
            else:
                mean, std = floats[value]
            out[c][value] = {
                n: count
                if n == "count"
                else mean
                if n == "mean"
                else std
                if n == "std"
                else row[f"{c}\x00{n}"]
                for n in STATISTICS
            }
    return out


def examples(frame: pl.DataFrame) -> dict[Any, list[Any]]:
    """The first few request ids of each group, earliest arrival first (as ``_ids``)."""
    ordered = frame.sort("arrival_ns", "request_id", nulls_last=True, maintain_order=True)
    heads = ordered.group_by(G, maintain_order=True).head(EXAMPLES_SHOWN)
    out: dict[Any, list[Any]] = {}
    for value, rid in heads.select(G, "request_id").iter_rows():
        out.setdefault(value, []).append(rid)
    return out


def spans(rows: pl.DataFrame) -> dict[Any, dict[str, Any]]:
    times = [c for c in EVENT_TIMES if c in rows.columns]
    return rows_by_group(
        rows.group_by(G).agg(
            pl.col("arrival_ns").min().alias("start"),
            pl.max_horizontal(pl.col(c).max() for c in times).alias("end"),
            pl.col("admission_ns").is_not_null().any().alias("admissions"),
            (pl.col("n_release").fill_null(0) > 0).any().alias("releases"),
            pl.len().alias("requests"),
            pl.col("rows").sum().alias("rows"),
        )
    )


def _formula_checks(
    frame: pl.DataFrame, residual: str, abs_tol_ns: int, rel_tol: float
) -> dict[Any, FormulaCheck]:
    """``formula._check`` per group (its ``within`` and ``worst``, one ``group_by``)."""
    checked = frame.filter(pl.col(residual).is_not_null())
    counts = rows_by_group(
        checked.group_by(G).agg(
            pl.len().alias("n"), within(pl.col(residual), abs_tol_ns, rel_tol).sum().alias("in")
        )
    )
    residuals = describe_groups(checked, [residual])[residual]
    worst_of: dict[Any, list[dict[str, object]]] = {}
    for row in worst(checked, residual, by=G).iter_rows(named=True):
        worst_of.setdefault(row.pop(G), []).append(row)
    return {
        value: FormulaCheck(
            checked=int(row["n"]),
            within_tolerance=int(row["in"]),
            residual_ns=residuals[value],
            worst=tuple(worst_of.get(value, [])),
        )
        for value, row in counts.items()
    }


def formula(
    completed: pl.DataFrame, values: Sequence[Any], abs_tol_ns: int, rel_tol: float
) -> dict[Any, FormulaReport]:
    """``formula.check_formula`` per group, from the same definitions."""
    checkable = completed.filter(pl.col("response_ns").is_not_null())
    per_request = _formula_checks(checkable, "formula_residual_ns", abs_tol_ns, rel_tol)
    fleet_itl = rows_by_group(
        checkable.filter(MULTI_TOKEN)
        .group_by(G)
        .agg(FLEET_DECODE, FLEET_STEPS)
        .filter(pl.col("steps") > 0)
        .with_columns((pl.col("decode") / pl.col("steps")).alias("fleet_itl"))
    )
    itl = pl.DataFrame(
        {G: list(fleet_itl), "_fleet_itl": [r["fleet_itl"] for r in fleet_itl.values()]},
        schema={G: completed.schema[G], "_fleet_itl": pl.Float64},
    )
    errors = checkable.join(itl, on=G, how="inner", nulls_equal=True).with_columns(
        fleet_error(pl.col("_fleet_itl"))
    )
    fleet = _formula_checks(errors, "fleet_error_ns", abs_tol_ns, rel_tol)
    tallies = checkable.group_by(G).agg(pl.len(), pl.col("output_tokens").null_count())
    counts = {g: n for g, n, _ in tallies.iter_rows()}
    uncounted = {g: u for g, _, u in tallies.iter_rows()}
    empty = FormulaCheck(0, 0, empty_distribution(), ())
    out: dict[Any, FormulaReport] = {}
    for value in values:
        itl_value = fleet_itl[value]["fleet_itl"] if value in fleet_itl else None
        check = per_request.get(value, empty)
        out[value] = FormulaReport(
            abs_tol_ns=abs_tol_ns,
            rel_tol=rel_tol,
            per_request=check,
            fleet=fleet.get(value, empty) if itl_value is not None else empty,
            fleet_itl_ns=float(itl_value) if itl_value is not None else None,
            notes=notes(
                itl_value,
                counts.get(value, 0) - check.checked - uncounted.get(value, 0),
                uncounted.get(value, 0),
                counts.get(value, 0),
            ),
        )
    return out
