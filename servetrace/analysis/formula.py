"""The response-time decomposition check (DESIGN §5).

The lesson's formula ``T_response ≈ TTFT + (N_output − 1) · mean ITL`` is checked twice:

- **per request**, with the request's own mean gap between ticks: the residual is zero
  exactly when every tick carries one token, so a non-zero residual points at bundled
  chunks, missing ticks or an output count that disagrees with the ticks;
- **fleet-wide**, with one token-weighted mean ITL for the whole deployment (Σ decode /
  Σ (N − 1) over completed requests): the error shows which requests the single-number
  model misses (stalls, preemptions, batch growth).

A request is *within tolerance* when ``|residual| ≤ max(abs_tol, rel_tol · response)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from servetrace.analysis.groups import CODE, Groups
from servetrace.stats.describe import describe_sorted

if TYPE_CHECKING:
    from servetrace.analysis.formula_steps import StepFormula

DEFAULT_ABS_TOL_NS = 1_000_000  # 1 ms: below what any client or log can resolve reliably
DEFAULT_REL_TOL = 0.01
WORST_SHOWN = 5


@dataclass(frozen=True)
class FormulaCheck:
    """How well one version of the formula predicts response time."""

    checked: int
    within_tolerance: int
    residual_ns: dict[str, float | int | None]
    worst: tuple[dict[str, object], ...]

    @property
    def share_within(self) -> float | None:
        return self.within_tolerance / self.checked if self.checked else None


@dataclass(frozen=True)
class FormulaReport:
    abs_tol_ns: int
    rel_tol: float
    per_request: FormulaCheck
    fleet: FormulaCheck
    fleet_itl_ns: float | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # With tokens per step known (speculative decoding: steps from the server), the same
    # checks counted in engine steps (analysis.formula_steps); None without them.
    steps: StepFormula | None = None


def within(residual: pl.Expr, abs_tol_ns: int, rel_tol: float) -> pl.Expr:
    """Whether a residual is within ``max(abs_tol, rel_tol · response)``."""
    tolerance = pl.max_horizontal(pl.lit(float(abs_tol_ns)), pl.col("response_ns") * rel_tol)
    return residual.abs() <= tolerance


def worst(
    checked: pl.DataFrame,
    residual: str,
    groups: int,
    cause: pl.Expr | None = None,
    extra: Sequence[str] = (),
) -> list[list[dict[str, object]]]:
    """Per group (``checked`` is coded), the requests the formula misses most, with a
    likely cause (``cause``, else the token version's) and the ``extra`` columns. Ties by
    arrival then id: the same list from either engine, any row order, and for a group as
    for the group analysed alone.

    The order is found on the sort keys alone, then only those rows are taken (a sort
    of every column of every request copied the frame: 4 M requests at 1e9 events).
    """
    ranked = (
        checked.select(CODE, pl.col(residual).abs().alias("_abs"), "arrival_ns", "request_id")
        .with_row_index("_row")
        .sort(
            CODE,
            "_abs",
            "arrival_ns",
            "request_id",
            descending=[False, True, False, False],
            nulls_last=True,
        )
        .group_by(CODE, maintain_order=True)
        .head(WORST_SHOWN)
    )
    likely = cause if cause is not None else _likely_cause(checked.columns)
    heads = checked[ranked["_row"]].with_columns(likely.alias("cause"))
    rows = heads.select(
        CODE,
        "request_id",
        pl.col(residual).alias("residual_ns"),
        "response_ns",
        "output_tokens",
        "ticks",
        "preemptions",
        *extra,
        "cause",
    )
    out: list[list[dict[str, object]]] = [[] for _ in range(groups)]
    for row in rows.iter_rows(named=True):
        out[row.pop(CODE)].append(row)
    return out


# What check_formula reads of the per-request frame (worst and _likely_cause included).
FORMULA_COLUMNS = (
    "request_id",
    "outcome",
    "arrival_ns",
    "response_ns",
    "ttft_ns",
    "decode_ns",
    "output_tokens",
    "ticks",
    "preemptions",
    "itl_mean_ns",
    "itl_max_ns",
    "formula_residual_ns",
)


def notes(
    fleet_itl: float | None, unchecked: int, uncounted: int = 0, completed: int = 0
) -> tuple[str, ...]:
    """Why part of the check could not be made. ``uncounted``: completed requests whose
    output count is unknown (analysis.output_counts), so N, hence the formula, is unknown."""
    out: list[str] = []
    if fleet_itl is None and not (uncounted and uncounted >= completed):
        out.append("no completed request has 2 or more output tokens: no fleet ITL")
    if uncounted:
        out.append(
            f"{uncounted} completed requests have no output-token count: the formula is "
            "unavailable for them (N unknown)"
        )
    if unchecked:
        out.append(
            f"{unchecked} completed requests have no per-tick times (single tick carrying "
            "several tokens, or a request-level import): per-request check skipped for them"
        )
    return tuple(out)


def cause_of(timed: pl.Expr, *reasons: tuple[pl.Expr, str]) -> pl.Expr:
    """A short, honest hint at why a request misses, from the evidence in its row:
    preempted; no tick times where the version needs them (``timed``); the version's own
    ``reasons`` in order; a stall."""
    cause = (
        pl.when(pl.col("preemptions") > 0)
        .then(pl.lit("preempted"))
        .when(pl.col("itl_mean_ns").is_null() & timed)
        .then(pl.lit("no tick times"))
    )
    for condition, text in reasons:
        cause = cause.when(condition).then(pl.lit(text))
    stall = pl.col("itl_max_ns") > 10 * pl.col("itl_mean_ns")
    return cause.when(stall).then(pl.lit("stall")).otherwise(pl.lit(""))


def _likely_cause(columns: Sequence[str] = ()) -> pl.Expr:
    """The token version's cause; with the server's step count, chunks of one engine step
    each are named as such."""
    multi = pl.col("output_tokens") != pl.col("ticks")
    reasons = [(multi, "multi-token chunks")]
    if "spec_steps" in columns:
        one_per_step = multi & (pl.col("ticks") - 1 == pl.col("spec_steps"))
        reasons.insert(0, (one_per_step, "multi-token chunks, one per speculative step"))
    return cause_of(pl.col("output_tokens") > 1, *reasons)


def checks(
    frame: pl.DataFrame,
    groups: Groups,
    residual: str,
    abs_tol_ns: int,
    rel_tol: float,
    cause: pl.Expr | None = None,
    extra: Sequence[str] = (),
) -> list[FormulaCheck]:
    """Each group's check of one version of the formula (``frame`` coded)."""
    checked = frame.filter(pl.col(residual).is_not_null())
    counts = groups.rows(
        checked,
        pl.len().alias("n"),
        within(pl.col(residual), abs_tol_ns, rel_tol).sum().alias("in"),
    )
    sample = groups.sample(checked, residual)
    worst_of = worst(checked, residual, len(groups), cause, extra)
    out = []
    for g in groups:
        row = counts[g]
        out.append(
            FormulaCheck(
                checked=int(row["n"]) if row else 0,
                within_tolerance=int(row["in"]) if row else 0,
                residual_ns=describe_sorted(sample.of(g)),
                worst=tuple(worst_of[g]),
            )
        )
    return out


def fleet_checks(
    frame: pl.DataFrame,
    groups: Groups,
    steps: pl.Expr,
    abs_tol_ns: int,
    rel_tol: float,
    cause: pl.Expr | None = None,
    extra: Sequence[str] = (),
) -> tuple[list[float | None], list[FormulaCheck]]:
    """The fleet-wide version of the formula (``frame`` coded): one time per step for
    each group, Σ decode / Σ ``steps`` over its requests of a step or more (None without
    any), and each group's check of ``response − (ttft + steps · that time)``."""
    decode = pl.col("decode_ns").sum().alias("decode")
    sums = groups.rows(frame.filter(steps >= 1), decode, steps.sum().alias("n"))
    per_step = [r["decode"] / r["n"] if r and r["n"] else None for r in sums]
    of = pl.Series("_per_step", [v if v is not None else 0.0 for v in per_step], pl.Float64)
    error = pl.col("response_ns") - pl.col("ttft_ns") - steps * pl.col("_per_step")
    with_error = frame.with_columns(of.gather(frame[CODE])).with_columns(error.alias("_error"))
    return per_step, checks(with_error, groups, "_error", abs_tol_ns, rel_tol, cause, extra)


def formula_requests(requests: pl.DataFrame) -> pl.DataFrame:
    """The completed requests the checks read (``requests`` coded), with only the columns
    they read: a filter of the whole frame copied every column of every completed request
    (4 M requests at 1e9 events: 0.65 GB per copy)."""
    wanted = (*FORMULA_COLUMNS, "spec_steps")
    return requests.select(CODE, *(c for c in wanted if c in requests.columns)).filter(
        (pl.col("outcome") == "completed") & pl.col("response_ns").is_not_null()
    )


def formula_by_group(
    requests: pl.DataFrame,
    groups: Groups,
    abs_tol_ns: int = DEFAULT_ABS_TOL_NS,
    rel_tol: float = DEFAULT_REL_TOL,
) -> list[FormulaReport]:
    """Check the decomposition on each group's completed requests (``requests`` coded)."""
    completed = formula_requests(requests)
    per_request = checks(completed, groups, "formula_residual_ns", abs_tol_ns, rel_tol)
    # The fleet-wide mean ITL: Σ decode / Σ (N − 1) over completed requests of 2+ tokens.
    n = pl.col("output_tokens")
    steps = (n - 1).clip(lower_bound=0)
    fleet_itl, fleet = fleet_checks(completed, groups, steps, abs_tol_ns, rel_tol)
    tallies = groups.rows(completed, pl.len().alias("n"), n.null_count())
    out = []
    for g in groups:
        tally = tallies[g] or {"n": 0, "output_tokens": 0}
        count, uncounted = int(tally["n"]), int(tally["output_tokens"])
        itl = fleet_itl[g]
        out.append(
            FormulaReport(
                abs_tol_ns=abs_tol_ns,
                rel_tol=rel_tol,
                per_request=per_request[g],
                fleet=fleet[g] if itl is not None else NO_CHECK,
                fleet_itl_ns=float(itl) if itl is not None else None,
                notes=notes(itl, count - per_request[g].checked - uncounted, uncounted, count),
            )
        )
    return out


NO_CHECK = FormulaCheck(0, 0, describe_sorted(np.zeros(0)), ())
