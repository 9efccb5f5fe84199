"""A run given only as the tool's summary: the tool's own numbers, marked ``reported``.

No per-request statistics exist for such a run; what the tool wrote is carried over
under servetrace's metric names (ms, req/s, tok/s) with the tool's own name beside each,
so the runs table can show it, clearly marked. The tool's definitions stay the tool's:
AIPerf's and GenAI-Perf's ``inter_token_latency`` is a per-request mean (servetrace's
``tpot``), ``inter_chunk_latency`` the pooled gaps (``itl``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.runs import declared as declared_facts
from servetrace.runs import guidellm_summary, llmd_summary
from servetrace.runs.facts import Kind, checked
from servetrace.sources import llmd_report
from servetrace.sources.guidellm_csv import read_rows
from servetrace.sources.inputs import RunSource
from servetrace.sources.reading import load_json
from servetrace.sources.registry import nesting_refused

_AIPERF_NAMES = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "inter_chunk_latency": "itl",
    "request_latency": "e2e",
}
_AIPERF_STATS = {"avg": "mean", "std": "std", "min": "min", "p50": "p50", "p90": "p90"}
_AIPERF_STATS.update({"p95": "p95", "p99": "p99", "max": "max"})
_LLMPERF_NAMES = {"ttft_s": "ttft", "inter_token_latency_s": "tpot", "end_to_end_latency_s": "e2e"}
_VLLM_ROW = re.compile(r"^(Mean|Median|P99) (TTFT|TPOT|ITL) \(ms\)$")


def _aiperf_like(doc: Mapping[str, Any], path: Path) -> dict[str, Any]:
    records = doc.get("records")
    source: Mapping[str, Any] = records if isinstance(records, Mapping) else doc
    metrics: dict[str, Any] = {}
    for tool_name, name in _AIPERF_NAMES.items():
        entry = source.get(tool_name)
        if not isinstance(entry, Mapping) or entry.get("unit") != "ms":
            continue
        stats = {
            ours: checked(entry.get(theirs), "latency_ms", path, f"{tool_name}.{theirs}")
            for theirs, ours in _AIPERF_STATS.items()
        }
        metrics[name] = {"unit": "ms", "tool_name": tool_name, **stats}

    def avg(key: str, kind: Kind) -> float | int | None:
        entry = source.get(key)
        return (
            checked(entry.get("avg"), kind, path, f"{key}.avg")
            if isinstance(entry, Mapping)
            else None
        )

    return {
        "metrics": metrics,
        "throughput": {
            "requests_per_s": avg("request_throughput", "per_s"),
            "output_tokens_per_s": avg("output_token_throughput", "per_s"),
        },
        "completed": avg("completed_request_count", "count") or avg("request_count", "count"),
    }


def _llmperf(doc: Mapping[str, Any], path: Path) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for tool_name, name in _LLMPERF_NAMES.items():
        base = f"results_{tool_name}"
        fields = {
            "mean": f"{base}_mean",
            "std": f"{base}_stddev",
            "min": f"{base}_min",
            "p50": f"{base}_quantiles_p50",
            "p90": f"{base}_quantiles_p90",
            "p95": f"{base}_quantiles_p95",
            "p99": f"{base}_quantiles_p99",
            "max": f"{base}_max",
        }
        ms: dict[str, float | None] = {}
        for stat, field in fields.items():
            seconds = checked(doc.get(field), "latency_s", path, field)
            ms[stat] = None if seconds is None else seconds * 1000
        if any(v is not None for v in ms.values()):
            metrics[name] = {"unit": "ms", "tool_name": tool_name, **ms}

    def number(field: str, kind: Kind) -> float | int | None:
        return checked(doc.get(field), kind, path, field)

    per_min = number("results_num_completed_requests_per_min", "per_s")
    return {
        "metrics": metrics,
        "throughput": {
            "requests_per_s": per_min / 60 if per_min is not None else None,
            "output_tokens_per_s": number("results_mean_output_throughput_token_per_s", "per_s"),
        },
        "completed": number("results_num_completed_requests", "count"),
    }


def _vllm_row(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    metrics: dict[str, dict[str, Any]] = {}
    stat_names = {"Mean": "mean", "Median": "p50", "P99": "p99"}
    for key, value in row.items():
        match = _VLLM_ROW.match(str(key))
        if match:
            entry = metrics.setdefault(
                match.group(2).lower(), {"unit": "ms", "tool_name": match.group(2)}
            )
            entry[stat_names[match.group(1)]] = checked(value, "latency_ms", where, str(key))
    return {
        "metrics": metrics,
        "throughput": {
            "requests_per_s": checked(row.get("Tput (req/s)"), "per_s", where, "Tput (req/s)"),
            "output_tokens_per_s": checked(
                row.get("Output Tput (tok/s)"), "per_s", where, "Output Tput (tok/s)"
            ),
        },
        "completed": checked(row.get("# of req."), "count", where, "# of req."),
    }


# A tool's summary counts the requests that completed, not those that failed apart from
# those the client cancelled.
ERRORED_UNTOLD = "the source does not tell failed from cancelled requests"


def reported_run(source: RunSource) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(reported, declared)`` of a summary-only run."""
    path = source.summary
    assert path is not None
    kind = source.fmt or ""
    doc: Any = None
    try:
        if kind not in ("guidellm", llmd_report.KIND):  # a CSV and YAML, read below
            with nesting_refused(path):
                doc = load_json(path)
    except InputError as error:
        raise InputError(f"{path}: {kind} summary unreadable: {error.message}") from None
    declared: dict[str, Any]
    if kind == "vllm-bench" and isinstance(doc, list):
        row = doc[source.summary_row or 0]
        if not isinstance(row, Mapping):
            raise InputError(f"{path}: row {source.summary_row} is not an object")
        body = _vllm_row(row, f"{path}: row {source.summary_row or 0}")
        declared = declared_facts.vllm_bench(Path(str(row.get("Test name", path.name))), {})
        name = str(row.get("Test name", ""))
        rate = re.search(r"qps_(\d+(?:\.\d+)?|inf)", name)
        if rate:
            value = math.inf if rate.group(1) == "inf" else float(rate.group(1))
            declared["request_rate_per_s"] = value
            declared["sources"]["request_rate_per_s"] = "Test name"
        body["test_name"] = name
        body["run_name"] = name
    elif kind == "guidellm":
        rows = read_rows(path)
        index = source.summary_row or 0
        if not 0 <= index < len(rows):
            raise InputError(f"{path}: no benchmark row {index + 1} (it has {len(rows)})")
        where = f"{path}: benchmark row {index + 1}"
        body = guidellm_summary.reported_row(rows[index], where)
        declared = guidellm_summary.declared_row(rows[index], path, where)
    elif kind == llmd_report.KIND:
        version, report = llmd_report.read(path)
        body = llmd_summary.reported(version, report, path)
        declared = llmd_summary.declared(version, report, path)
    elif kind == "llmperf" and isinstance(doc, Mapping):
        body = _llmperf(doc, path)
        declared = declared_facts.llmperf(path, doc)
    elif isinstance(doc, Mapping):
        body = _aiperf_like(doc, path)
        declared = (
            declared_facts.genai_perf(path) if kind == "genai-perf" else declared_facts.aiperf(path)
        )
    else:
        raise InputError(f"{path}: not a {kind} summary this version can read")
    if declared.get("completed") is None and body.get("completed") is not None:
        declared["completed"] = int(body["completed"])
        declared["sources"]["completed"] = path.name
    reported = {
        "tool": kind,
        "file": str(path),
        "note": "the tool's own summary: no per-request file, so no per-request statistics",
        **body,
    }
    if reported.get("errored") is None:
        reported["unavailable"] = {"errored": ERRORED_UNTOLD}
    return reported, declared
