"""The response-time decomposition check in words and JSON (DESIGN §5): the token version,
and, where the server reported each request's steps, the step version
(``analysis.formula_steps``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from servetrace.analysis.formula import FormulaCheck, FormulaReport
from servetrace.analysis.formula_steps import StepFormula
from servetrace.render._json import clean
from servetrace.render.distribution import distribution_ms
from servetrace.units import NS_PER_MS


def _formula_check(check: FormulaCheck) -> dict[str, Any]:
    return {
        "checked": check.checked,
        "within_tolerance": check.within_tolerance,
        "share_within": check.share_within,
        "residual": distribution_ms(check.residual_ns),
        "worst": [
            {
                "request_id": clean(w["request_id"]),
                "residual_ms": float(w["residual_ns"]) / NS_PER_MS,  # type: ignore[arg-type]
                "response_ms": float(w["response_ns"]) / NS_PER_MS,  # type: ignore[arg-type]
                "output_tokens": clean(w["output_tokens"]),
                "ticks": clean(w["ticks"]),
                "preemptions": clean(w["preemptions"]),
                **({"spec_steps": clean(w["spec_steps"])} if "spec_steps" in w else {}),
                "likely_cause": w["cause"] or None,
            }
            for w in check.worst
        ],
    }


def formula_dict(report: FormulaReport) -> dict[str, Any]:
    out = {
        "formula": "T_response ≈ TTFT + (N_output − 1) · mean ITL",
        "tolerance": {"abs_ms": report.abs_tol_ns / NS_PER_MS, "rel": report.rel_tol},
        "per_request": _formula_check(report.per_request),
        "fleet": {
            "fleet_itl_ms": report.fleet_itl_ns / NS_PER_MS if report.fleet_itl_ns else None,
            **_formula_check(report.fleet),
        },
        "notes": list(report.notes),
    }
    if report.steps is not None:  # add-only: present with the server's step counts
        out["steps"] = steps_dict(report.steps)
    return out


def steps_dict(steps: StepFormula) -> dict[str, Any]:
    """The ``formula.steps`` key: the checks counted in engine steps."""
    step = steps.fleet_step_ns
    return {
        "formula": "T_response ≈ TTFT + S · mean ITL, S = decode steps (spec_steps)",
        "requests": steps.requests,
        "per_request": _formula_check(steps.per_request),
        "fleet": {
            "fleet_step_ms": step / NS_PER_MS if step else None,
            **_formula_check(steps.fleet),
        },
    }


def formula_lines(report: FormulaReport) -> list[str]:
    tol = f"|residual| ≤ max({report.abs_tol_ns / NS_PER_MS:g} ms, {report.rel_tol:.0%})"
    lines = []
    pr, fl = report.per_request, report.fleet
    if pr.checked:
        lines.append(
            f"formula T ≈ TTFT + (N−1)·ITL, per request: {pr.within_tolerance:,} of "
            f"{pr.checked:,} within {tol} ({pr.share_within:.1%})"
        )
    if fl.checked and report.fleet_itl_ns:
        lines.append(
            f"formula with one fleet ITL of {report.fleet_itl_ns / NS_PER_MS:.2f} ms: "
            f"{fl.within_tolerance:,} of {fl.checked:,} within ({fl.share_within:.1%}); "
            f"worst: {_worst(fl)}"
        )
    if report.steps is not None:
        lines.extend(_step_lines(report.steps, report.abs_tol_ns, report.rel_tol))
    lines.extend(f"formula: {note}" for note in report.notes)
    return lines


def _worst(check: FormulaCheck) -> str:
    return ", ".join(
        f"{w['request_id']} ({w['residual_ns'] / NS_PER_MS:+,.0f} ms"  # type: ignore[operator]
        + (f", {w['cause']}" if w["cause"] else "")
        + ")"
        for w in check.worst[:3]
    )


def _step_lines(steps: StepFormula, abs_tol_ns: int, rel_tol: float) -> list[str]:
    """The step version, under the token one: S is the server's count of decode steps;
    per request, the misses among the worst are named."""
    pr, fl = steps.per_request, steps.fleet
    out = []
    if pr.checked:
        missed = [
            w
            for w in pr.worst
            if abs(w["residual_ns"]) > max(abs_tol_ns, rel_tol * w["response_ns"])  # type: ignore[arg-type, operator]
        ]
        named = _worst(replace(pr, worst=tuple(missed)))
        out.append(
            f"formula in steps T ≈ TTFT + S·ITL (S = the server's spec_steps), per request: "
            f"{pr.within_tolerance:,} of {pr.checked:,} within ({pr.share_within:.1%})"
            + (f"; missed: {named}" if missed else "")
        )
    if fl.checked and steps.fleet_step_ns:
        out.append(
            f"formula with one fleet step time of {steps.fleet_step_ns / NS_PER_MS:.2f} ms: "
            f"{fl.within_tolerance:,} of {fl.checked:,} within ({fl.share_within:.1%}); "
            f"worst: {_worst(fl)}"
        )
    return out
