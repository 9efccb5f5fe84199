"""The response-time decomposition counted in engine steps (DESIGN §5), where the trace
knows each request's decode steps: speculative decoding's verify steps, as the server
reported them (``spec_steps``, ``sources.response_body``).

With speculative decoding one decode step emits several tokens (the accepted drafts plus
one), so ``N − 1`` counts tokens, not the steps that took the time. With ``S`` the
request's steps:

- **per request**, ``response − (ttft + S · itl_mean)``, ``itl_mean`` the request's mean
  gap between ticks: zero exactly when the client saw one chunk per engine step
  (``ticks − 1 = S``); a step that streamed no text (only the end-of-sequence token) or
  chunks the network merged or split make it non-zero. Where the token version misses by
  "multi-token chunks", this one says whether the chunks are the engine's steps;
- **fleet-wide**, one step time for the deployment, ``Σ decode / Σ S`` over completed
  requests with ``S ≥ 1``, predicts ``ttft + S · step time``: requests whose drafts were
  accepted more often need fewer steps for the same tokens, which one time per token
  cannot see.

Requests without a step count (another server, the flag off) are not checked here; the
token version still checks them. Same tolerance as the token version.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from servetrace.analysis import formula
from servetrace.analysis.formula import NO_CHECK, FormulaCheck, checks
from servetrace.analysis.groups import Groups

STEPS = "spec_steps"
_STEP_RESIDUAL = "step_residual_ns"


@dataclass(frozen=True)
class StepFormula:
    """The two checks in steps, for the completed requests with a step count."""

    requests: int  # completed requests with a step count
    per_request: FormulaCheck
    fleet: FormulaCheck
    fleet_step_ns: float | None  # Σ decode / Σ S


def _cause() -> pl.Expr:
    """Why a request misses in steps: the evidence in its row."""
    chunks, steps = pl.col("ticks") - 1, pl.col(STEPS)
    return formula.cause_of(
        steps > 0,
        (chunks < steps, "fewer chunks than steps"),
        (chunks > steps, "more chunks than steps"),
    )


def step_formula_by_group(
    requests: pl.DataFrame, groups: Groups, abs_tol_ns: int, rel_tol: float
) -> list[StepFormula | None]:
    """Per group (``requests`` coded), the checks in steps of the completed requests the
    token version checks; None for every group when no request has a step count."""
    if STEPS not in requests.columns or requests[STEPS].is_null().all():
        return [None] * len(groups)
    completed = formula.formula_requests(requests)
    steps = pl.col(STEPS)
    counted = completed.filter(steps.is_not_null()).with_columns(
        (pl.col("response_ns") - pl.col("ttft_ns") - steps * pl.col("itl_mean_ns")).alias(
            _STEP_RESIDUAL
        )
    )
    extra, tolerance = (STEPS,), (abs_tol_ns, rel_tol)
    per_request = checks(counted, groups, _STEP_RESIDUAL, *tolerance, _cause(), extra)
    step_ns, fleet = formula.fleet_checks(counted, groups, steps, *tolerance, _cause(), extra)
    sizes = groups.rows(counted, pl.len().alias("n"))
    return [
        StepFormula(
            requests=int(sizes[g]["n"]) if sizes[g] else 0,  # type: ignore[index]
            per_request=per_request[g],
            fleet=fleet[g] if step_ns[g] is not None else NO_CHECK,
            fleet_step_ns=float(step_ns[g]) if step_ns[g] is not None else None,  # type: ignore[arg-type]
        )
        for g in groups
    ]
