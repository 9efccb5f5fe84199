"""An llm-d Benchmark Report (v0.1, v0.2, v0.2.1) as a reported run: its aggregate
figures under servetrace's names, and what it declares about the run.

Field names from llm-d/llm-d-benchmark at 8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36,
``llmdbenchmark/analysis/benchmark_report/``: ``schema_v0_1.py`` (``scenario.model.name``,
``scenario.load.name`` and ``args``, ``scenario.host.accelerator[].count`` and
``parallelism``, ``metrics.time.duration`` in s, ``metrics.requests.total`` /
``failures`` / ``incomplete``, ``metrics.latency.*`` and ``metrics.throughput.*_per_sec``),
``schema_v0_2.py`` (``run.time.duration`` an ISO-8601 duration, ``scenario.stack[]``
components of ``kind: inference_engine`` with ``model.name``, ``replicas`` and
``accelerator.parallelism``, ``scenario.load.standardized.tool`` / ``rate_qps`` /
``concurrency``, ``results.request_performance.aggregate.{requests, latency,
throughput}``), ``base.py`` (units: ``ms``/``s`` for times, ``ms/token``/``s/token`` per
token) and the converters ``native_to_br0_1.py``/``native_to_br0_2.py``.

Names: the schema's ``time_to_first_token`` is ``ttft``, ``time_per_output_token``
(excluding the first token) ``tpot``, ``inter_token_latency`` (between consecutive
tokens) ``itl``, ``request_latency`` ``e2e`` — except where the converter copies a
harness's own figure under the schema's name: GuideLLM's and AIPerf's
``inter_token_latency`` is a per-request decode / (tokens − 1) (``tpot``), and GuideLLM's
``time_per_output_token`` includes the TTFT (no servetrace name: left out).
``normalized_time_per_output_token`` has no servetrace name either. Every figure is the
report's own, only converted to ms. Completed = total − failures − incomplete, when the
report counts failures or incomplete requests (unknown otherwise: a vLLM-made report's
``total`` is vLLM's completed count).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.runs.declared import Facts
from servetrace.runs.facts import Kind, checked
from servetrace.sources.llmd_report import KIND

_SCHEMA_NAMES = {
    "time_to_first_token": "ttft",
    "time_per_output_token": "tpot",
    "inter_token_latency": "itl",
    "request_latency": "e2e",
}
_PER_REQUEST_ITL = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "request_latency": "e2e",
}
_NAMES_BY_HARNESS = {"guidellm": _PER_REQUEST_ITL, "aiperf": _PER_REQUEST_ITL}
_STATS = {"mean": "mean", "stddev": "std", "min": "min", "p50": "p50", "p90": "p90"}
_STATS.update({"p95": "p95", "p99": "p99", "max": "max"})
_TO_MS = {"ms": 1.0, "s": 1000.0, "ms/token": 1.0, "s/token": 1000.0}
# harnesses whose v0.1 ``scenario.load.args`` the converter fills with vLLM's own scalars
_VLLM_ARGS = ("vllm-benchmark", "inferencemax")
_ISO_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def _get(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc


def _number(doc: Any, dotted: str, kind: Kind, path: Path) -> float | int | None:
    """The field at ``dotted`` checked as ``kind`` (an error names the file and the field)."""
    return checked(_get(doc, dotted), kind, path, dotted)


def _latency(entry: Any, path: Path, field: str) -> dict[str, float | None] | None:
    """One latency statistics block in ms (``InputError`` on a unit that is not a time)."""
    if not isinstance(entry, Mapping):
        return None
    units = entry.get("units")
    if units not in _TO_MS:
        raise InputError(
            f"{path}: field '{field}.units' must be one of {', '.join(_TO_MS)}, got {units!r}",
            hint="a latency of a benchmark report is in ms or s (per token: ms/token, s/token)",
        )
    factor = _TO_MS[units]
    kind: Kind = "latency_ms" if factor == 1.0 else "latency_s"
    out: dict[str, float | None] = {}
    for theirs, ours in _STATS.items():
        value = checked(entry.get(theirs), kind, path, f"{field}.{theirs}")
        out[ours] = None if value is None else float(value) * factor
    return out


def _harness(doc: Mapping[str, Any], version: str) -> str | None:
    tool = _get(
        doc, "scenario.load.name" if version == "0.1" else "scenario.load.standardized.tool"
    )
    return str(tool) if tool is not None else None


def reported(version: str, doc: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The reported body: latencies in ms, throughput, completed and errored counts."""
    v01 = version == "0.1"
    base = "metrics" if v01 else "results.request_performance.aggregate"
    harness = _harness(doc, version)
    names = _NAMES_BY_HARNESS.get(harness or "", _SCHEMA_NAMES)
    metrics: dict[str, Any] = {}
    for theirs, ours in names.items():
        field = f"{base}.latency.{theirs}"
        stats = _latency(_get(doc, field), path, field)
        if stats is not None and any(v is not None for v in stats.values()):
            metrics[ours] = {"unit": "ms", "tool_name": theirs, **stats}
    requests = f"{base}.requests"
    total = _number(doc, f"{requests}.total", "count", path)
    failures = _number(doc, f"{requests}.failures", "count", path)
    incomplete = _number(doc, f"{requests}.incomplete", "count", path)
    completed = None
    if total is not None and (failures is not None or incomplete is not None):
        completed = int(total) - int(failures or 0) - int(incomplete or 0)
        if completed < 0:
            raise InputError(
                f"{path}: field '{requests}.total' ({total}) is below its failures and "
                f"incomplete requests ({failures or 0} + {incomplete or 0})"
            )
    if v01:
        rate = ("metrics.throughput.requests_per_sec", "metrics.throughput.output_tokens_per_sec")
    else:
        rate = (f"{base}.throughput.request_rate.mean", f"{base}.throughput.output_token_rate.mean")
    return {
        "metrics": metrics,
        "throughput": {
            "requests_per_s": _number(doc, rate[0], "per_s", path),
            "output_tokens_per_s": _number(doc, rate[1], "per_s", path),
        },
        "completed": completed,
        "errored": failures,
        "harness": harness,
        "report_version": version,
    }


def _seconds(text: Any) -> float | None:
    """An ISO-8601 duration (``PT49.97S``, ``PT1H2M3S``) in seconds; None if not one."""
    match = _ISO_DURATION.match(str(text)) if isinstance(text, str) else None
    if match is None or not any(match.groupdict().values()):
        return None
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    return parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]


def declared(version: str, doc: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """Model, offered load, duration and parallelism, each from the field that states it."""
    facts = Facts(KIND)
    name = path.name

    def put(key: str, value: Any, field: str) -> None:
        facts.set(key, value, f"{name} {field}")

    def put_checked(key: str, dotted: str, kind: Kind) -> None:
        put(key, _number(doc, dotted, kind, path), dotted)

    if version == "0.1":
        put("model", _get(doc, "scenario.model.name"), "scenario.model.name")
        if _harness(doc, version) in _VLLM_ARGS:
            args = "scenario.load.args"
            loads: tuple[tuple[str, str, Kind], ...] = (
                ("request_rate_per_s", "request_rate", "rate"),
                ("max_concurrency", "max_concurrency", "positive_count"),
                ("num_prompts", "num_prompts", "count"),
            )
            for key, field, kind in loads:
                put_checked(key, f"{args}.{field}", kind)
        put_checked("duration_s", "metrics.time.duration", "duration_s")
        accelerators = _get(doc, "scenario.host.accelerator")
        if isinstance(accelerators, list) and accelerators:
            field = "scenario.host.accelerator[].count"
            counts = [checked(_get(a, "count"), "count", path, field) for a in accelerators]
            if all(c is not None for c in counts):
                put("gpus", sum(int(c or 0) for c in counts), field)
            if len(accelerators) == 1:
                _parallelism(facts, accelerators[0], path, name, "scenario.host.accelerator[0]")
        return facts.finish()
    load = "scenario.load.standardized"
    put_checked("request_rate_per_s", f"{load}.rate_qps", "rate")
    concurrency = _get(doc, f"{load}.concurrency")
    if not (isinstance(concurrency, float) and math.isinf(concurrency)):  # .inf: no limit
        put_checked("max_concurrency", f"{load}.concurrency", "positive_count")
    put("duration_s", _seconds(_get(doc, "run.time.duration")), "run.time.duration")
    stack = _get(doc, "scenario.stack")
    engines = [
        c
        for c in (stack if isinstance(stack, list) else [])
        if _get(c, "standardized.kind") == "inference_engine"
    ]
    models = {str(m) for c in engines if (m := _get(c, "standardized.model.name")) is not None}
    if len(models) == 1:
        put("model", models.pop(), "scenario.stack[].standardized.model.name")
    if len(engines) == 1 and _get(engines[0], "standardized.replicas") == 1:
        at = "scenario.stack[0].standardized.accelerator"
        _parallelism(facts, _get(engines[0], "standardized.accelerator"), path, name, at)
    return facts.finish()


def _parallelism(facts: Facts, accelerator: Any, path: Path, name: str, at: str) -> None:
    """tp and pp of one engine's accelerators (gpus = tp × pp, as ``Facts.finish`` makes it)."""
    for key, short in (("tensor_parallel", "tp"), ("pipeline_parallel", "pp")):
        field = f"{at}.parallelism.{short}"
        value = checked(_get(accelerator, f"parallelism.{short}"), "positive_count", path, field)
        facts.set(key, value, f"{name} {field}")
