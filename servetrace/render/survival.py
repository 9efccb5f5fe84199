"""Words and ms for the censoring-aware estimates and the percentile intervals.

``survival_dict`` and ``ci95_dict`` are the JSON blocks ``survival`` and
``metrics.NAME.ci95``; ``survival_lines`` the sentences under the summary table.
"""

from __future__ import annotations

from typing import Any

from servetrace.analysis.survival import QUANTILES
from servetrace.render.format import fixed
from servetrace.render.naming import display_name
from servetrace.render.outcomes import PARTIAL_OUTPUT_DROPPED
from servetrace.units import NS_PER_MS

_CAUSES = {"censored_cancelled": "cancelled", "censored_in_flight": "in flight"}


def _ms(value: Any) -> float | None:
    return None if value is None else float(value) / NS_PER_MS


def _q_text(name: str) -> str:
    return name.replace("p", "", 1).replace("_", ".")


def unreached_reason(stat: str, floor: float) -> str:
    """Why the estimate cannot give a percentile: survival stays above 1 − q."""
    q = QUANTILES[stat]
    return (
        f"survival never drops to {1 - q:.3g}: it stops at {floor:.3g}, because every "
        "request still waiting after the last observed event was censored (cancelled or "
        "in flight)"
    )


_UNAVAILABLE = {
    "arrival_unknown": "in-flight requests have no send time, so their censoring time is unknown",
    "streamed": "more ITL gaps than a batched engine keeps exactly: they are pooled in a "
    "log histogram, which has no order statistics (an in-memory analysis gives the interval)",
}


def bias(km: float | None, completed: float | None) -> float | None:
    """(KM − completed-only) / KM: how much the completed-only figure understates."""
    if km is None or completed is None or km == 0:
        return None
    return (km - completed) / km


def survival_dict(survival: dict[str, dict[str, Any]] | None, naming: str) -> dict[str, Any]:
    if not survival:
        return {}
    out: dict[str, Any] = {}
    for metric, fit in survival.items():
        reasons: dict[str, str] = {}
        if fit.get("unavailable"):
            reasons = dict.fromkeys(QUANTILES, _UNAVAILABLE[fit["unavailable"]])
        for stat in fit.get("unreached") or []:
            reasons[stat] = unreached_reason(stat, fit["floor"])
        out[display_name(metric, naming)] = {
            "estimator": fit["estimator"],
            "unit": "ms",
            "events": fit["events"],
            "censored": fit["censored"],
            **{stat: _ms(fit[stat]) for stat in QUANTILES},
            "censored_cancelled": fit["censored_cancelled"],
            "censored_in_flight": fit["censored_in_flight"],
            "left_out_unknown": fit.get("left_out_unknown", 0),
            "completed_only": {k: _ms(v) for k, v in fit["completed_only"].items()},
            "understatement": {
                stat: bias(fit[stat], fit["completed_only"][stat]) for stat in QUANTILES
            },
            "null_reasons": reasons,
        }
    return out


def ci95_dict(block: dict[str, Any] | None) -> dict[str, Any] | None:
    """``{pNN: [lo, hi] | None, ..., "confidence", "method", "null_reasons"}`` in ms."""
    if not block:
        return None
    out: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for stat, bounds in block["intervals"].items():
        out[stat] = None if bounds is None else [_ms(b) for b in bounds]
        if block.get("unavailable"):
            reasons[stat] = _UNAVAILABLE[block["unavailable"]]
        elif block["n"] == 0:
            reasons[stat] = "no samples"
        elif stat in block["needed"]:
            side = "upper" if bounds and bounds[0] is not None else "lower"
            if bounds is None:
                side = "lower and upper"
            reasons[stat] = (
                f"{block['n']:,} samples cannot bound p{_q_text(stat)} at "
                f"{block['confidence']:.0%} ({side} bound null): it takes at least "
                f"{block['needed'][stat]:,}"
            )
    out["confidence"] = block["confidence"]
    out["method"] = (
        "order statistics X_(l), X_(u), equal-tailed binomial: each tail P <= (1-confidence)/2"
    )
    out["null_reasons"] = reasons
    return out


def survival_lines(survival: dict[str, dict[str, Any]] | None, shown: bool = True) -> list[str]:
    """One line per metric: KM p50/p90/p99 beside completed-only, and the named bias."""
    if not survival or not shown:
        return []
    lines: list[str] = []
    for metric, fit in survival.items():
        left_out = fit.get("left_out_unknown", 0)
        unknown = (
            f"{left_out:,} cancelled left out: {PARTIAL_OUTPUT_DROPPED}, so whether each "
            "had its first token is unknown"
        )
        if not fit["censored"]:
            if left_out:
                lines.append(f"censored {metric}: none censored ({unknown})")
            continue
        if fit.get("unavailable"):
            lines.append(f"censored {metric}: unavailable ({_UNAVAILABLE[fit['unavailable']]})")
            continue
        pairs = ", ".join(
            f"p{_q_text(s)} {fixed(_ms(fit[s]))} ({fixed(_ms(fit['completed_only'][s]))})"
            for s in QUANTILES
        )
        causes = " + ".join(f"{fit[k]:,} {w}" for k, w in _CAUSES.items() if fit[k])
        line = (
            f"censored {metric} (Kaplan–Meier, {fit['events']:,} observed, {causes} "
            f"censored{f'; {unknown}' if left_out else ''}), ms (completed-only): {pairs}"
        )
        worst = _worst_bias(fit)
        if worst is not None:
            stat, value = worst
            verb = "understates" if value > 0 else "overstates"
            line += (
                f"; completed-only {metric} p{_q_text(stat)} {verb} the censored "
                f"estimate by {abs(value):.0%}"
            )
        for stat in fit.get("unreached") or []:
            line += f"; p{_q_text(stat)} unreachable ({unreached_reason(stat, fit['floor'])})"
        lines.append(line)
    return lines


def _worst_bias(fit: dict[str, Any]) -> tuple[str, float] | None:
    """The percentile whose completed-only figure is furthest from KM (if ≥ 0.5 %)."""
    found = [
        (s, b)
        for s in QUANTILES
        if (b := bias(fit[s], fit["completed_only"][s])) is not None and abs(b) >= 0.005
    ]
    return max(found, key=lambda item: abs(item[1])) if found else None
