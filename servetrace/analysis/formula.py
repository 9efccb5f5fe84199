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

from dataclasses import dataclass, field

import polars as pl

from servetrace.stats.describe import describe

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


def within(residual: pl.Expr, abs_tol_ns: int, rel_tol: float) -> pl.Expr:
    """Whether a residual is within ``max(abs_tol, rel_tol · response)``."""
    tolerance = pl.max_horizontal(pl.lit(float(abs_tol_ns)), pl.col("response_ns") * rel_tol)
    return residual.abs() <= tolerance


def worst(checked: pl.DataFrame, residual: str, by: str | None = None) -> pl.DataFrame:
    """The requests the formula misses most (per ``by`` group), with a likely cause.

    Ties by arrival then id: the same list from either engine, any row order, and for a
    group as for the group analysed alone.
    """
    descending = [True, False, False]
    if by is None:
        # The first few in that order, without sorting every column of every request:
        # the keys' order, then only those rows (a full sort copied the frame: 1e9 events).
        first = checked.select(
            pl.arg_sort_by(
                pl.col(residual).abs(),
                "arrival_ns",
                "request_id",
                descending=descending,
                nulls_last=True,
            )
            .head(WORST_SHOWN)
            .alias("row")
        )["row"]
        heads = checked[first].lazy().with_columns(_likely_cause().alias("cause"))
    else:
        heads = (
            checked.lazy()  # one query: rank, head per group, select
            .with_columns(pl.col(residual).abs().alias("_abs"), _likely_cause().alias("cause"))
            .sort("_abs", "arrival_ns", "request_id", descending=descending, nulls_last=True)
            .group_by(by, maintain_order=True)
            .head(WORST_SHOWN)
        )
    return heads.select(
        *([by] if by is not None else []),
        "request_id",
        pl.col(residual).alias("residual_ns"),
        "response_ns",
        "output_tokens",
        "ticks",
        "preemptions",
        "cause",
    ).collect()


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

# The fleet-wide mean ITL: Σ decode / Σ (N − 1) over completed requests of 2+ tokens.
MULTI_TOKEN = pl.col("output_tokens") >= 2
FLEET_DECODE = pl.col("decode_ns").sum().alias("decode")
FLEET_STEPS = (pl.col("output_tokens") - 1).sum().alias("steps")


def fleet_error(fleet_itl: pl.Expr | float) -> pl.Expr:
    """Response time minus what the fleet-wide formula predicts for the request."""
    return (
        pl.col("response_ns")
        - pl.col("ttft_ns")
        - (pl.col("output_tokens") - 1).clip(lower_bound=0) * fleet_itl
    ).alias("fleet_error_ns")


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


def _likely_cause() -> pl.Expr:
    """A short, honest hint at why a request misses: evidence we have in the row."""
    return (
        pl.when(pl.col("preemptions") > 0)
        .then(pl.lit("preempted"))
        .when(pl.col("itl_mean_ns").is_null() & (pl.col("output_tokens") > 1))
        .then(pl.lit("no tick times"))
        .when(pl.col("output_tokens") != pl.col("ticks"))
        .then(pl.lit("multi-token chunks"))
        .when(pl.col("itl_max_ns") > 10 * pl.col("itl_mean_ns"))
        .then(pl.lit("stall"))
        .otherwise(pl.lit(""))
    )


def _check(frame: pl.DataFrame, residual: str, abs_tol_ns: int, rel_tol: float) -> FormulaCheck:
    # No copy when every residual is known (the frame itself is checked).
    null = frame[residual].null_count()
    checked = frame if null == 0 else frame.filter(pl.col(residual).is_not_null())
    if checked.height == 0:
        return FormulaCheck(0, 0, describe(pl.Series([], dtype=pl.Float64)), ())
    n_within = int(checked.select(within(pl.col(residual), abs_tol_ns, rel_tol).sum()).item())
    return FormulaCheck(
        checked=checked.height,
        within_tolerance=n_within,
        residual_ns=describe(checked[residual]),
        worst=tuple(worst(checked, residual).to_dicts()),
    )


def check_formula(
    requests: pl.DataFrame,
    abs_tol_ns: int = DEFAULT_ABS_TOL_NS,
    rel_tol: float = DEFAULT_REL_TOL,
) -> FormulaReport:
    """Check the decomposition on completed requests of the per-request frame."""
    # Only the columns the check reads: a filter of the whole frame copied every column
    # of every completed request (4 M requests at 1e9 events: 0.65 GB per copy).
    completed = requests.select(c for c in FORMULA_COLUMNS if c in requests.columns).filter(
        (pl.col("outcome") == "completed") & pl.col("response_ns").is_not_null()
    )
    per_request = _check(completed, "formula_residual_ns", abs_tol_ns, rel_tol)

    # Lazily: the filter then copies only the two columns summed (sums of none are 0).
    fleet_sums = completed.lazy().filter(MULTI_TOKEN).select(FLEET_DECODE, FLEET_STEPS)
    decode, steps = fleet_sums.collect().row(0)
    fleet_itl = decode / steps if steps else None
    uncounted = int(completed["output_tokens"].null_count())
    if fleet_itl is None:
        fleet = FormulaCheck(0, 0, describe(pl.Series([], dtype=pl.Float64)), ())
    else:
        with_error = completed.with_columns(fleet_error(fleet_itl))
        fleet = _check(with_error, "fleet_error_ns", abs_tol_ns, rel_tol)
    unchecked = completed.height - per_request.checked - uncounted
    return FormulaReport(
        abs_tol_ns=abs_tol_ns,
        rel_tol=rel_tol,
        per_request=per_request,
        fleet=fleet,
        fleet_itl_ns=float(fleet_itl) if fleet_itl is not None else None,
        notes=notes(fleet_itl, unchecked, uncounted, completed.height),
    )
