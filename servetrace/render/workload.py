"""Word a workload match and a declared-load match (``servetrace.comparison.workload``,
``.load``): the sentences under "workload:" and "load:" and their JSON blocks.

Shared by ``compare`` and ``check`` (a regression budget against a trace matches the
workloads too).
"""

from __future__ import annotations

import math
from typing import Any

from servetrace.comparison.load import LoadMatch
from servetrace.comparison.workload import WorkloadMatch
from servetrace.units import NS_PER_MS


def workload_message(match: WorkloadMatch) -> str:
    """``identical workload: 1500 requests …``, or why the workloads differ."""
    tol = f"{match.arrival_tolerance_ns / NS_PER_MS:g} ms"
    n = match.shared_requests
    by = f"paired by {match.paired_by}" if match.paired_by else "unpaired"
    if match.verdict == "identical":
        return (
            f"identical workload: {n} requests with the same arrival offsets "
            f"(within {tol}) and lengths; {by}"
        )
    if match.verdict == "same_requests":
        return f"same {n} requests, but " + "; ".join(_mismatches(match, tol)) + f"; {by}"
    if match.verdict == "partial":
        return (
            f"partial workload match: {n} shared requests of {match.baseline_requests} "
            f"(baseline) and {match.candidate_requests} (candidate); compared unpaired: "
            "differences may come from the load, not the policy"
        )
    if n:
        # The ids are shared, but what they name is not the same workload.
        return (
            f"different workloads: the {n} shared request ids name other requests ("
            + "; ".join(_mismatches(match, tol))
            + "): differences may come from the load, not the policy"
        )
    return (
        "different workloads (no shared requests): differences may come from the "
        "load, not the policy"
    )


def _mismatches(match: WorkloadMatch, tol: str) -> list[str]:
    parts = []
    if match.arrival_mismatches:
        worst = (match.max_arrival_offset_diff_ns or 0) / NS_PER_MS
        parts.append(
            f"{match.arrival_mismatches} arrival offsets differ by more than {tol} "
            f"(at most {worst:.4g} ms)"
        )
    if match.prompt_length_mismatches:
        parts.append(f"{match.prompt_length_mismatches} prompt lengths differ")
    if match.output_length_mismatches:
        parts.append(f"{match.output_length_mismatches} output lengths differ")
    return parts


def workload_dict(match: WorkloadMatch) -> dict[str, Any]:
    """The ``workload`` block of the compare and check JSON (times in ms)."""
    worst = match.max_arrival_offset_diff_ns
    return {
        "verdict": match.verdict,
        "shared_requests": match.shared_requests,
        "paired": match.paired,
        "paired_by": match.paired_by,
        "baseline_requests": match.baseline_requests,
        "candidate_requests": match.candidate_requests,
        "arrival_tolerance_ms": match.arrival_tolerance_ns / NS_PER_MS,
        "arrival_mismatches": match.arrival_mismatches,
        "max_arrival_offset_diff_ms": None if worst is None else worst / NS_PER_MS,
        "prompt_length_mismatches": match.prompt_length_mismatches,
        "output_length_mismatches": match.output_length_mismatches,
        "message": workload_message(match),
    }


_NAMES = {"request_rate_per_s": ("request rate", "req/s"), "max_concurrency": ("concurrency", "")}


def _amount(value: float | None, unit: str) -> str:
    if value is None:
        return "not declared"
    if math.isinf(value):
        return "unlimited"
    text = f"{value:g}"
    return f"{text} {unit}" if unit else text


def _factor(factor: float) -> str:
    return "∞×" if math.isinf(factor) else f"{factor:.3g}×"


def load_message(load: LoadMatch) -> str:
    """``declared load differs 16×: request rate 1 req/s vs 16 req/s …``."""
    if load.verdict == "unknown":
        return "declared load unknown: the runs do not both declare a request rate or concurrency"
    if load.verdict == "same":
        parts = [f"{_NAMES[k][0]} {_amount(load.baseline[k], _NAMES[k][1])}" for k in load.compared]
        return "same declared load: " + ", ".join(parts)
    biggest = max(d.factor for d in load.differences)
    parts = [
        f"{_NAMES[d.key][0]} {_amount(d.baseline, _NAMES[d.key][1])} vs "
        f"{_amount(d.candidate, _NAMES[d.key][1])}"
        for d in load.differences
    ]
    return (
        f"declared load differs {_factor(biggest)}: "
        + "; ".join(parts)
        + " — latency and throughput differences may be the load, not the system"
    )


def load_warning(load: LoadMatch | None) -> str | None:
    return load_message(load) if load is not None and load.verdict == "differs" else None


def load_dict(load: LoadMatch | None) -> dict[str, Any] | None:
    if load is None:
        return None

    def clean(value: float | None) -> float | str | None:
        return "inf" if value is not None and math.isinf(value) else value

    return {
        "verdict": load.verdict,
        "message": load_message(load),
        "compared": list(load.compared),
        "baseline": {k: clean(v) for k, v in load.baseline.items()},
        "candidate": {k: clean(v) for k, v in load.candidate.items()},
        "differences": [
            {
                "key": d.key,
                "baseline": clean(d.baseline),
                "candidate": clean(d.candidate),
                "factor": clean(d.factor),
            }
            for d in load.differences
        ],
    }
