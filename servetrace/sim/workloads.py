"""Workloads: what arrives when, and how long it is (the simulator's input).

A **workload** is a Polars DataFrame with one row per request, sorted by arrival:

| column | dtype | meaning |
|---|---|---|
| `request_id` | Utf8 | unique within the workload |
| `arrival_ns` | Int64 | arrival time in ns, relative to the first arrival (which is 0) |
| `prompt_tokens` | Int64 ≥ 0 | input length |
| `output_tokens` | Int64 ≥ 1 | output length the request will generate if it completes |

Readers may add columns (Mooncake keeps `prefix_blocks`); the simulator ignores them,
except an optional numeric `priority` (lower first, null: after every level), which the
``priority`` policy orders its queue by and the event log carries on each arrival.

This module defines the table: its schema, `validate_workload` (every workload the
simulator runs passes through it), and small pure transformations (`head`,
`scale_rate`). Workloads are made by the seeded generator (`servetrace.sim.synthetic`)
or read from public real traces (`servetrace.sim.readers`).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from servetrace.errors import InputError, UsageError
from servetrace.sim.config import Policy

WORKLOAD_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "arrival_ns": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
}
WORKLOAD_COLUMNS: tuple[str, ...] = tuple(WORKLOAD_SCHEMA)
PRIORITY = "priority"  # the optional column the priority policy orders by


def request_ids(n: int, prefix: str = "r") -> list[str]:
    """``prefix`` + the zero-padded index, for ``n`` requests (``r0000``, ``r0001``...)."""
    width = max(4, len(str(max(n - 1, 0))))
    return [f"{prefix}{i:0{width}d}" for i in range(n)]


def missing_columns(source: str, missing: list[str], found: list[str], hint: str) -> InputError:
    """The error for a table that lacks columns, naming them and the ones it has."""
    return InputError(
        f"{source}: missing column(s) {', '.join(map(repr, missing))} "
        f"(found: {', '.join(found) or 'none'})",
        hint=hint,
    )


def head(workload: pl.DataFrame, n: int) -> pl.DataFrame:
    """The first ``n`` requests by arrival (arrivals stay relative to the first)."""
    if n < 0:
        raise UsageError(f"number of requests must be >= 0 (got {n})")
    return workload.head(n)


def scale_rate(workload: pl.DataFrame, factor: float) -> pl.DataFrame:
    """Compress (``factor`` > 1) or stretch (< 1) arrivals: the rate is multiplied by it.

    ``arrival_ns / factor``, rounded to the nearest ns; lengths and ids are unchanged.
    """
    if not factor > 0 or not math.isfinite(factor):
        raise UsageError(f"rate factor must be a positive number (got {factor})")
    return workload.with_columns(
        (pl.col("arrival_ns").cast(pl.Float64) / factor).round().cast(pl.Int64)
    )


def validate_workload(workload: pl.DataFrame, source: str = "workload") -> pl.DataFrame:
    """Check a workload frame and return it typed and sorted by arrival (stable).

    Raises `InputError` naming ``source`` and the field when a column is missing, a
    value is null, negative or not an integer, an output length is 0, or an id repeats.
    Arrivals are rebased so that the first is at 0.
    """
    missing = [c for c in WORKLOAD_COLUMNS if c not in workload.columns]
    if missing:
        hint = "a workload has columns " + ", ".join(WORKLOAD_COLUMNS)
        raise missing_columns(source, missing, workload.columns, hint)
    out = workload
    for name in WORKLOAD_COLUMNS[1:]:
        dtype = out.schema[name]
        if not dtype.is_integer():
            raise InputError(f"{source}: column '{name}' must be integer (found {dtype})")
    for name in WORKLOAD_COLUMNS:
        nulls = out[name].null_count()
        if nulls:
            raise InputError(f"{source}: column '{name}' has {nulls} null value(s)")
    out = out.with_columns(
        pl.col("request_id").cast(pl.String),
        pl.col("arrival_ns", "prompt_tokens", "output_tokens").cast(pl.Int64),
    )
    for name, low in (("arrival_ns", 0), ("prompt_tokens", 0), ("output_tokens", 1)):
        bad = out.filter(pl.col(name) < low)
        if bad.height:
            raise InputError(
                f"{source}: {bad.height} request(s) have '{name}' < {low} "
                f"(first: request {bad['request_id'][0]!r}, {name}={bad[name][0]})"
            )
    if PRIORITY in out.columns:
        dtype = out.schema[PRIORITY]
        if not (dtype.is_integer() or dtype.is_float()):
            raise InputError(
                f"{source}: column '{PRIORITY}' must be numeric (found {dtype})",
                hint="lower values run first under --policy priority; leave a value empty "
                "to run it after every level",
            )
        if dtype.is_float():
            out = out.with_columns(pl.col(PRIORITY).fill_nan(None))
    dup = out["request_id"].is_duplicated()
    if dup.any():
        first = out["request_id"].filter(dup)[0]
        raise InputError(f"{source}: request id {first!r} appears more than once")
    out = out.sort("arrival_ns", maintain_order=True)
    if out.height:
        out = out.with_columns(pl.col("arrival_ns") - pl.col("arrival_ns").first())
    return out


def queue_keys(workload: pl.DataFrame, policy: str) -> np.ndarray:
    """Each request's place in the scheduler's queue under ``policy`` (smaller first;
    ties go by arrival, the workload's order): its index under ``fcfs`` and ``chunked``,
    its prompt length under ``sjf``, and under ``priority`` the rank of its ``priority``
    value, requests without one after every level."""
    if policy == Policy.SJF.value:
        return workload["prompt_tokens"].to_numpy().astype(np.int64)
    if policy != Policy.PRIORITY.value:
        return np.arange(workload.height, dtype=np.int64)
    if PRIORITY not in workload.columns:
        raise UsageError(
            "the priority policy orders the queue by the workload's 'priority' column, "
            "and this workload has none",
            hint="add a numeric column 'priority' (lower runs first) to the workload "
            "(simulate --workload reads it from a table)",
        )
    ranks = workload[PRIORITY].rank("dense")
    last = (ranks.max() or 0) + 1  # type: ignore[operator]
    return ranks.fill_null(last).to_numpy().astype(np.int64)
