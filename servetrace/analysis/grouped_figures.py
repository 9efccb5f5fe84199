"""Figures of ``summary.py`` for every group at once: one ``group_by`` each.

The building blocks of ``groups.summarize_groups`` (``--by``): ``describe`` per group,
example ids, each group's span, concurrency over that span, and the formula check. Rows
carry their group in the column ``G``; results are dicts keyed by the group's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from servetrace.analysis.formula import WORST_SHOWN, FormulaCheck, FormulaReport, _likely_cause
from servetrace.analysis.summary import EXAMPLES_SHOWN, Distribution
from servetrace.stats.describe import STATISTICS, percentile_of

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
    """``stats.describe`` of each column, per group: one ``group_by`` for all of them."""
    exprs = []
    for c in columns:
        v = pl.col(c).drop_nulls()
        if frame.schema[c].is_float():
            v = v.drop_nans()
        parts = {"count": v.count(), "mean": v.mean(), "std": v.std(ddof=0)}
        parts |= {"min": v.min(), "max": v.max()}
        for name in STATISTICS:
            q = percentile_of(name)
            if q is not None and name not in parts:
                parts[name] = v.quantile(q / 100, interpolation="linear")
        exprs += [e.cast(pl.Float64).alias(f"{c}\x00{n}") for n, e in parts.items()]
    rows = rows_by_group(frame.group_by(G).agg(exprs)) if exprs else {}
    out: dict[str, dict[Any, Distribution]] = {}
    for c in columns:
        out[c] = {}
        for value, row in rows.items():
            count = int(row[f"{c}\x00count"] or 0)
            out[c][value] = (
                {n: count if n == "count" else row[f"{c}\x00{n}"] for n in STATISTICS}
                if count
                else empty_distribution()
            )
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
    """``formula._check`` per group."""
    checked = frame.filter(pl.col(residual).is_not_null())
    tolerance = pl.max_horizontal(pl.lit(float(abs_tol_ns)), pl.col("response_ns") * rel_tol)
    within = rows_by_group(
        checked.group_by(G).agg(
            pl.len().alias("n"), (pl.col(residual).abs() <= tolerance).sum().alias("within")
        )
    )
    residuals = describe_groups(checked, [residual])[residual]
    worst = (
        checked.with_columns(pl.col(residual).abs().alias("_abs"), _likely_cause().alias("cause"))
        .sort("_abs", descending=True, maintain_order=True)
        .group_by(G, maintain_order=True)
        .head(WORST_SHOWN)
        .select(
            G,
            "request_id",
            pl.col(residual).alias("residual_ns"),
            "response_ns",
            "output_tokens",
            "ticks",
            "preemptions",
            "cause",
        )
    )
    worst_of: dict[Any, list[dict[str, object]]] = {}
    for row in worst.iter_rows(named=True):
        worst_of.setdefault(row.pop(G), []).append(row)
    return {
        value: FormulaCheck(
            checked=int(row["n"]),
            within_tolerance=int(row["within"]),
            residual_ns=residuals[value],
            worst=tuple(worst_of.get(value, [])),
        )
        for value, row in within.items()
    }


def formula(
    completed: pl.DataFrame, values: Sequence[Any], abs_tol_ns: int, rel_tol: float
) -> dict[Any, FormulaReport]:
    """``formula.check_formula`` per group."""
    checkable = completed.filter(pl.col("response_ns").is_not_null())
    per_request = _formula_checks(checkable, "formula_residual_ns", abs_tol_ns, rel_tol)
    fleet_itl = rows_by_group(
        checkable.filter(pl.col("output_tokens") >= 2)
        .group_by(G)
        .agg(
            pl.col("decode_ns").sum().alias("decode"),
            (pl.col("output_tokens") - 1).sum().alias("steps"),
        )
        .filter(pl.col("steps") > 0)
        .with_columns((pl.col("decode") / pl.col("steps")).alias("fleet_itl"))
    )
    itl = pl.DataFrame(
        {G: list(fleet_itl), "_fleet_itl": [r["fleet_itl"] for r in fleet_itl.values()]},
        schema={G: completed.schema[G], "_fleet_itl": pl.Float64},
    )
    errors = checkable.join(itl, on=G, how="inner", nulls_equal=True).with_columns(
        (
            pl.col("response_ns")
            - pl.col("ttft_ns")
            - (pl.col("output_tokens") - 1).clip(lower_bound=0) * pl.col("_fleet_itl")
        ).alias("fleet_error_ns")
    )
    fleet = _formula_checks(errors, "fleet_error_ns", abs_tol_ns, rel_tol)
    counts = dict(checkable.group_by(G).len().iter_rows())
    empty = FormulaCheck(0, 0, empty_distribution(), ())
    out: dict[Any, FormulaReport] = {}
    for value in values:
        notes: list[str] = []
        itl_value = fleet_itl[value]["fleet_itl"] if value in fleet_itl else None
        if itl_value is None:
            notes.append("no completed request has 2 or more output tokens: no fleet ITL")
        check = per_request.get(value, empty)
        unchecked = counts.get(value, 0) - check.checked
        if unchecked:
            notes.append(
                f"{unchecked} completed requests have no per-tick times (single tick carrying "
                "several tokens, or a request-level import): per-request check skipped for them"
            )
        out[value] = FormulaReport(
            abs_tol_ns=abs_tol_ns,
            rel_tol=rel_tol,
            per_request=check,
            fleet=fleet.get(value, empty) if itl_value is not None else empty,
            fleet_itl_ns=float(itl_value) if itl_value is not None else None,
            notes=tuple(notes),
        )
    return out
