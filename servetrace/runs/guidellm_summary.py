"""A row of GuideLLM's ``benchmarks.csv`` as a reported run: its figures under
servetrace's names, and what the benchmark declares.

GuideLLM's names map as its ``benchmarks.json`` does (``render.naming``): ``Time to First
Token`` is ``ttft``, ``Inter Token Latency`` (decode / (tokens − 1)) is ``tpot``,
``Request Latency`` (send to stream close) is ``e2e``. Its ``Time per Output Token``
includes the TTFT and has no servetrace name: it is left out. Every figure is GuideLLM's
own, only converted to ms (request latency is in s).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servetrace.runs.declared import Facts
from servetrace.runs.facts import Kind, checked
from servetrace.sources.guidellm_csv import PERCENTILE_KEYS, Row, cell, json_cell

# servetrace name -> (group, field, tool name, factor to ms)
_METRICS = {
    "ttft": ("Time to First Token", "Successful ms", "time_to_first_token", 1.0),
    "tpot": ("Inter Token Latency", "Successful ms", "inter_token_latency", 1.0),
    "e2e": ("Request Latency", "Successful Sec", "request_latency", 1000.0),
}
_LISTED = {"min": "min", "p90": "p90", "p95": "p95", "p99": "p99", "max": "max"}
_STRATEGY = re.compile(r"^(?P<kind>[a-z_]+)(?:@(?P<value>[\d.eE+-]+|inf))?$")


def _number(row: Row, where: str, kind: Kind, group: str, field: str, stat: str = "") -> Any:
    name = " / ".join(p for p in (group, field, stat) if p)
    return checked(cell(row, group, field, stat), kind, where, name)


def _latency(row: Row, where: str, group: str, field: str, factor: float) -> dict[str, Any]:
    kind: Kind = "latency_s" if factor != 1.0 else "latency_ms"

    def scaled(value: Any) -> float | None:
        return None if value is None else float(value) * factor

    stats = {
        "mean": scaled(_number(row, where, kind, group, field, "Mean")),
        "p50": scaled(_number(row, where, kind, group, field, "Median")),
        "std": scaled(_number(row, where, kind, group, field, "Std Dev")),
    }
    listed = json_cell(row, group, field, "Percentiles", where=where)
    if isinstance(listed, list) and len(listed) == len(PERCENTILE_KEYS):
        values = dict(zip(PERCENTILE_KEYS, listed, strict=True))
        for ours, theirs in _LISTED.items():
            name = f"{group} / {field} / Percentiles[{PERCENTILE_KEYS.index(theirs)}]"
            stats[ours] = scaled(checked(values[theirs], kind, where, name))
    return stats


def reported_row(row: Row, where: str) -> dict[str, Any]:
    """The reported body of one benchmark row (``where`` names it in errors)."""
    metrics: dict[str, Any] = {}
    for name, (group, field, tool_name, factor) in _METRICS.items():
        stats = _latency(row, where, group, field, factor)
        if any(v is not None for v in stats.values()):
            metrics[name] = {"unit": "ms", "tool_name": tool_name, **stats}
    strategy = cell(row, "Benchmark", "Strategy")
    return {
        "metrics": metrics,
        "throughput": {
            "requests_per_s": _number(
                row, where, "per_s", "Server Throughput", "Successful Requests/Sec", "Mean"
            ),
            "output_tokens_per_s": _number(
                row, where, "per_s", "Token Throughput", "Successful Output Tokens/Sec", "Mean"
            ),
        },
        "completed": _number(row, where, "count", "Request Counts", "Successful"),
        # GuideLLM tells failed requests from incomplete (cancelled) ones.
        "errored": _number(row, where, "count", "Request Counts", "Errored"),
        "run_name": strategy,
    }


def declared_row(row: Row, path: Path, where: str) -> dict[str, Any]:
    """What one benchmark row declares: strategy (rate or concurrency), requests asked
    for, duration, model."""
    facts = Facts("guidellm")

    def put(key: str, value: Any, column: str) -> None:
        facts.set(key, value, f"{path.name} {column}")

    match = _STRATEGY.match(cell(row, "Benchmark", "Strategy") or "")
    if match:
        kind, value = match.group("kind"), match.group("value")
        column = "Benchmark / Strategy"
        if kind == "synchronous":
            put("max_concurrency", 1, column)
        elif kind == "concurrent" and value is not None:
            put("max_concurrency", checked(value, "positive_count", where, column), column)
        elif kind in ("constant", "poisson", "async") and value is not None:
            put("request_rate_per_s", checked(value, "rate", where, column), column)
        elif kind == "throughput":
            put("request_rate_per_s", math.inf, column)
    constraints = json_cell(row, "Benchmark", "Constraints", where=where)
    limit = constraints.get("max_requests") if isinstance(constraints, Mapping) else None
    args = limit.get("args") if isinstance(limit, Mapping) else None
    if isinstance(args, Mapping):
        column = "Benchmark / Constraints max_requests"
        put("num_prompts", checked(args.get("count"), "count", where, column), column)
    put(
        "duration_s",
        _number(row, where, "duration_s", "Timings", "Duration", "Sec"),
        "Timings / Duration",
    )
    put(
        "completed",
        _number(row, where, "count", "Request Counts", "Successful"),
        "Request Counts / Successful",
    )
    backend = json_cell(row, "Run Info", "Backend", where=where)
    if isinstance(backend, Mapping) and isinstance(backend.get("model"), str):
        put("model", backend["model"], "Run Info / Backend")
    return facts.finish()
