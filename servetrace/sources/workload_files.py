"""Workload files (Azure LLM inference traces, Mooncake traces) are not serving traces.

They hold what was *asked* (arrival times and token counts), not what a server did: they
cannot be analysed, only replayed. Reading one as a trace or as a per-request table is
refused with a pointer to ``servetrace simulate --workload``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servetrace.errors import InputError

# lower-cased column sets that identify each workload format
_KINDS: dict[str, frozenset[str]] = {
    "an Azure LLM inference trace": frozenset({"timestamp", "contexttokens", "generatedtokens"}),
    "a Mooncake trace": frozenset({"timestamp", "input_length", "output_length"}),
}


def workload_kind(columns: Sequence[str]) -> str | None:
    names = {c.lower() for c in columns}
    for kind, needed in _KINDS.items():
        if needed <= names and "event" not in names and "ttft" not in names:
            return kind
    return None


def workload_error(path: Path, columns: Sequence[str], mapped: bool = False) -> InputError | None:
    """The error for a workload file, or None. A user who mapped columns meant otherwise."""
    kind = None if mapped else workload_kind(columns)
    if kind is None:
        return None
    return InputError(
        f"{path}: this is {kind} (arrivals and token counts only: {', '.join(columns)}), "
        "a workload to replay, not a trace of what a server did",
        hint=f"replay it: servetrace simulate --workload {path}",
    )


def per_request_hint(columns: Sequence[str], missing: Sequence[str]) -> str:
    """More hint for a table without an ``event`` column: it may be one row per request."""
    if "event" not in missing or "event" in columns:
        return ""
    return (
        "; or, if it has one row per request rather than one row per event: --from requests "
        "--column arrival=NAME --column ttft=NAME --column e2e=NAME --column output_tokens=NAME"
    )
