"""Word a workload match: the sentence under "workload:" and its JSON block.

Shared by ``compare`` and ``check`` (a regression budget against a trace matches the
workloads too).
"""

from __future__ import annotations

from typing import Any

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
