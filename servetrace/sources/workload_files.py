"""Workload files (Azure LLM inference traces, Mooncake traces) are not serving traces.

They hold what was *asked* (arrival times and token counts), not what a server did: they
cannot be analysed, only replayed. Reading one as a trace or as a per-request table is
refused with a pointer to ``servetrace simulate --workload``. A file of one record per
request (a table without events, a JSON object of records keyed by id) read as an event
log is pointed to ``--from requests`` the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servetrace.errors import InputError

_FIELDS_SHOWN = 8
_FROM_REQUESTS = (
    "--from requests --column ttft=NAME --column e2e=NAME (and arrival=NAME or end=NAME)"
)

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


def records_by_id_error(
    path: Path, schema: Mapping[str, Any], missing: Sequence[str]
) -> InputError | None:
    """The error for one JSON object of per-request records keyed by id (BurstGPT's
    ``detail_log``), read as an event log: every top-level key became a column holding a
    record. It leads with the way to read it; None for any other file."""
    import polars as pl

    columns = list(schema)
    if len(columns) < 2 or not all(isinstance(schema[c], pl.Struct) for c in columns):
        return None
    fields = [f.name for f in schema[columns[0]].fields]
    shown = ", ".join(fields[:_FIELDS_SHOWN]) + (", …" if len(fields) > _FIELDS_SHOWN else "")
    return InputError(
        f"{path}: read it with {_FROM_REQUESTS}: it holds {len(columns):,} per-request "
        f"records keyed by id ({shown}), not an event log",
        hint="the keys become the request ids; as an event log it would need "
        + ", ".join(repr(c) for c in missing),
    )
