"""Where ITL stalls come from (``analyze --steps``): the ``stalls`` JSON key, the lines of
the table and Markdown section, and the per-gap frame of ``--stalls-out``.

Everything is read from `analysis.stalls.Stalls`; times become ms here (and seconds from
the trace start for the instants of the worst stalls).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.analysis.stall_causes import CAUSES, UNJOINED_REASONS
from servetrace.analysis.stalls import GAP_COLUMNS, Stalls
from servetrace.render._json import clean
from servetrace.units import NS_PER_MS, NS_PER_S

TITLE = "Where ITL stalls come from"


def _ms(value: float | int | None) -> float | None:
    return None if value is None else value / NS_PER_MS


def _shares(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if k != "excess_ns" and k != "threshold_ns"}
    out["excess_ms"] = _ms(raw["excess_ns"])
    return out


def stalls_dict(stalls: Stalls, origin_ns: int | None) -> dict[str, Any]:
    """The ``stalls`` key of the JSON report (``origin_ns``: the trace start, for ``at_s``)."""
    fit = stalls.fit
    tail = stalls.tail_shares()
    worst = stalls.worst().with_columns(
        at_s=(pl.col("gap_start_ns") - (origin_ns or 0)) / NS_PER_S,
        gap_ms=pl.col("gap_ns") / NS_PER_MS,
        excess_ms=pl.col("excess_ns") / NS_PER_MS,
    )
    per = stalls.per_request()
    return clean(
        {
            "steps_file": stalls.steps_file,
            "steps_format": stalls.steps_format,
            "steps": stalls.steps,
            "replicas": stalls.replicas,
            "alignment_error_ms": _ms(stalls.alignment_error_ns),
            "gaps": {
                "total": stalls.gap_count,
                "joined": stalls.joined_count,
                "unjoined": stalls.unjoined,
                "unjoined_reasons": {r: UNJOINED_REASONS[r] for r in stalls.unjoined},
            },
            "baseline": {
                "definition": "least squares of decode-only step time on decode batch size "
                "(and KV tokens where every decode-only step gives them)",
                "steps_fitted": fit.n,
                "intercept_ms": _ms(fit.intercept_ns),
                "per_request_ms": _ms(fit.per_request_ns),
                "per_kv_token_ms": _ms(fit.per_kv_token_ns),
                "residual_ms": _ms(fit.residual_ns),
                "usual_batch": fit.usual_batch,
                "usual_kv_tokens": fit.usual_kv_tokens,
                "unavailable": fit.unavailable,
            },
            "causes": list(CAUSES),
            "overall": _shares(stalls.shares()),
            "tail": {"threshold_ms": _ms(tail["threshold_ns"]), **_shares(tail)},
            "worst": worst.select(
                "request_id",
                "at_s",
                "gap_ms",
                "excess_ms",
                "cause",
                "steps",
                "first_step",
                "last_step",
                "prefill_tokens",
                "decode_requests",
            ).to_dicts(),
            "per_request": {
                **{k: v for k, v in per.items() if k != "top"},
                "top": [
                    {
                        "request_id": row["request_id"],
                        "tail_stalls": row["tail_stalls"],
                        "excess_ms": _ms(row["excess_ns"]),
                    }
                    for row in per["top"]
                ],
            },
            "findings": [
                {"name": f.name, "steps": f.steps, "definition": f.words} for f in stalls.findings
            ],
            "notes": list(stalls.notes),
        }
    )


def _pct(value: float | None) -> str:
    return "unavailable" if value is None else f"{value:.1%}"


def _by_cause(shares: dict[str, Any]) -> str:
    return " · ".join(f"{c.replace('_', ' ')} {_pct(shares[f'{c}_share'])}" for c in CAUSES)


def stalls_lines(report: dict[str, Any]) -> list[str]:
    """The section's lines (the table prints them as they are, Markdown as a list)."""
    gaps, fit = report["gaps"], report["baseline"]
    replicas = report["replicas"]
    out = [
        f"steps: {report['steps_file']} ({report['steps_format']}, {report['steps']:,} steps, "
        f"{replicas} replica{'s' if replicas != 1 else ''})",
    ]
    unjoined = ", ".join(f"{n:,} {r}" for r, n in gaps["unjoined"].items()) or "none"
    out.append(
        f"gaps joined to steps: {gaps['joined']:,} of {gaps['total']:,} (unjoined: {unjoined})"
    )
    if fit["unavailable"] is not None:
        out.append(f"decode-step baseline: unavailable ({fit['unavailable']})")
        return out + _tail_lines(report)
    kv = (
        f" + {fit['per_kv_token_ms'] * 1000:.3g} µs/KV token"
        if fit["per_kv_token_ms"] is not None
        else ""
    )
    out.append(
        f"decode-step baseline: {fit['intercept_ms']:.3f} ms + {fit['per_request_ms']:.3f} "
        f"ms/request{kv} ({fit['steps_fitted']:,} decode-only steps, residual "
        f"{fit['residual_ms']:.3f} ms); usual batch {fit['usual_batch']:g}"
    )
    overall = report["overall"]
    out.append(
        f"excess over the usual step, by cause: {_by_cause(overall)} "
        f"({overall['gaps']:,} stalled gaps)"
    )
    tail = report["tail"]
    if tail["threshold_ms"] is not None:
        out.append(
            f"tail (gaps ≥ ITL p99 {tail['threshold_ms']:.2f} ms): {tail['tail_gaps']:,} gaps, "
            f"{_pct(tail['prefill_fraction'])} with prefill work in their steps; "
            f"{_by_cause(tail)}"
        )
    return out + _tail_lines(report)


def _tail_lines(report: dict[str, Any]) -> list[str]:
    out = []
    for row in report["worst"][:3]:
        steps = (
            f"step {row['last_step']}"
            if row["first_step"] == row["last_step"]
            else f"steps {row['first_step']}–{row['last_step']}"
        )
        out.append(
            f"stall: request {row['request_id']} at {row['at_s']:.3f} s: {row['gap_ms']:.2f} ms "
            f"(excess {row['excess_ms']:.2f} ms, {row['cause']}; {steps}, "
            f"{row['prefill_tokens']:,} prefill tokens, batch {row['decode_requests']:,})"
        )
    per = report["per_request"]
    if per["requests_with_tail_stalls"]:
        top = per["top"][0]
        out.append(
            f"tail stalls per request: {per['requests_with_tail_stalls']:,} requests have any, "
            f"at most {per['max_tail_stalls']:,} (request {top['request_id']})"
        )
    out += [f"finding {f['name']}: {f['steps']:,} {f['definition']}" for f in report["findings"]]
    return out


def gap_rows(stalls: Stalls) -> pl.DataFrame:
    """The ``--stalls-out`` frame: one row per gap, `GAP_COLUMNS` (``cause`` as text)."""
    return stalls.gaps.select(GAP_COLUMNS).with_columns(pl.col("cause").cast(pl.String))
