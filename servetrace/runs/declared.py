"""What a run declares about itself: tool, model, offered load, duration, parallelism.

Read from the export and its companions, never measured: vLLM's result scalars
(``request_rate``, ``max_concurrency``, ``num_prompts``, ``duration``, ``completed``,
``model_id``), its ``.commands`` file (``--dataset-name``) and the file name
(``_tp8_pp1_``); AIPerf's ``profile_export_aiperf.json`` (``input_config`` phases,
``benchmark_duration``); GenAI-Perf's ``input_config`` (``perf_analyzer.stimulus``);
GuideLLM's ``benchmarks[i].config.strategy`` and ``duration``; LLMPerf's summary
(``num_concurrent_requests``). Keys: ``servetrace.runs.model.DECLARED_KEYS``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.runs.model import DECLARED_KEYS, empty_declared
from servetrace.sources.reading import load_json, sibling, strip_suffixes

_TP_PP = re.compile(r"(?:^|[_\-.])tp(\d+)[_\-]pp(\d+)(?:[_\-.]|$)", re.IGNORECASE)
_DATASET_FLAG = re.compile(r"--dataset[-_]name[= ]+['\"]?([\w\-./]+)")


def declared_dict(declared: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready: an infinite rate becomes the string ``"inf"`` (JSON has no infinity)."""
    out: dict[str, Any] = {}
    for key in (*DECLARED_KEYS, "sources"):
        value = declared.get(key)
        out[key] = "inf" if isinstance(value, float) and math.isinf(value) else value
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if not math.isnan(float(value)) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return None if math.isnan(number) else number
    return None


def _integer(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and math.isfinite(number) else None


def _avg(summary: Mapping[str, Any], key: str) -> Any:
    value = summary.get(key)
    return value.get("avg") if isinstance(value, Mapping) else None


class _Facts:
    """``declared`` being filled in, recording where each fact came from."""

    def __init__(self, tool: str) -> None:
        self.values = empty_declared()
        self.values["tool"] = tool

    def set(self, key: str, value: Any, source: str) -> None:
        if value is None or self.values.get(key) is not None:
            return
        self.values[key] = value
        self.values["sources"][key] = source

    def finish(self) -> dict[str, Any]:
        tp, pp = self.values["tensor_parallel"], self.values["pipeline_parallel"]
        if tp is not None and pp is not None:
            self.set("gpus", tp * pp, "tensor_parallel × pipeline_parallel")
        return self.values


def _json_or_none(path: Path | None) -> Any:
    if path is None or not path.is_file():
        return None
    try:
        return load_json(path)
    except InputError:
        return None


def _parallelism(facts: _Facts, name: str) -> None:
    match = _TP_PP.search(name)
    if match:
        facts.set("tensor_parallel", int(match.group(1)), "file name")
        facts.set("pipeline_parallel", int(match.group(2)), "file name")


# ----------------------------------------------------------------------- per tool


def vllm_bench(path: Path, summary: Mapping[str, Any] | None) -> dict[str, Any]:
    facts = _Facts("vllm-bench")
    summary = summary or {}
    here = path.name
    rate = summary.get("request_rate")
    facts.set("model", summary.get("model_id"), here)
    facts.set("request_rate_per_s", _number(rate), here)
    facts.set("max_concurrency", _integer(summary.get("max_concurrency")), here)
    facts.set("num_prompts", _integer(summary.get("num_prompts")), here)
    facts.set("duration_s", _number(summary.get("duration")), here)
    facts.set("completed", _integer(summary.get("completed")), here)
    facts.set("dataset", summary.get("dataset_name") or summary.get("dataset"), here)
    commands = path.with_name(strip_suffixes(path, ".gz", ".json") + ".commands")
    doc = _json_or_none(commands)
    if isinstance(doc, Mapping):
        command = doc.get("client_command") or ""
        if isinstance(command, str):
            match = _DATASET_FLAG.search(command)
            if match:
                facts.set("dataset", match.group(1), commands.name)
        server = doc.get("server_command") or ""
        if isinstance(server, str):
            tp = re.search(r"--tensor-parallel-size[= ]+(\d+)", server)
            pp = re.search(r"--pipeline-parallel-size[= ]+(\d+)", server)
            if tp:
                facts.set("tensor_parallel", int(tp.group(1)), commands.name)
            if pp:
                facts.set("pipeline_parallel", int(pp.group(1)), commands.name)
    _parallelism(facts, path.name)
    return facts.finish()


def aiperf(summary_file: Path | None) -> dict[str, Any]:
    facts = _Facts("aiperf")
    doc = _json_or_none(summary_file)
    if not isinstance(doc, Mapping) or summary_file is None:
        return facts.finish()
    here = summary_file.name
    records = doc.get("records")
    metrics: Mapping[str, Any] = records if isinstance(records, Mapping) else doc
    config = doc.get("input_config") if isinstance(doc.get("input_config"), Mapping) else {}
    assert isinstance(config, Mapping)
    models = config.get("models")
    items = models.get("items") if isinstance(models, Mapping) else None
    if isinstance(items, list) and items and isinstance(items[0], Mapping):
        facts.set("model", items[0].get("name"), here)
    elif isinstance(models, list) and models:
        facts.set("model", str(models[0]), here)
    for phase in config.get("phases") or []:
        if isinstance(phase, Mapping) and phase.get("kind", "profiling") == "profiling":
            facts.set("max_concurrency", _integer(phase.get("concurrency")), here)
            facts.set("request_rate_per_s", _number(phase.get("request_rate")), here)
            facts.set("num_prompts", _integer(phase.get("requests")), here)
    loadgen = config.get("loadgen")
    if isinstance(loadgen, Mapping):
        facts.set("max_concurrency", _integer(loadgen.get("concurrency")), here)
        facts.set("request_rate_per_s", _number(loadgen.get("request_rate")), here)
        facts.set("num_prompts", _integer(loadgen.get("request_count")), here)
    datasets = config.get("datasets")
    if isinstance(datasets, list) and datasets and isinstance(datasets[0], Mapping):
        facts.set("dataset", datasets[0].get("type") or datasets[0].get("name"), here)
    facts.set("duration_s", _number(_avg(metrics, "benchmark_duration")), here)
    facts.set("completed", _integer(_avg(metrics, "completed_request_count")), here)
    return facts.finish()


def genai_perf(summary_file: Path | None) -> dict[str, Any]:
    facts = _Facts("genai-perf")
    doc = _json_or_none(summary_file)
    if not isinstance(doc, Mapping) or summary_file is None:
        return facts.finish()
    here = summary_file.name
    config = doc.get("input_config")
    if isinstance(config, Mapping):
        names = config.get("model_names") or config.get("model")
        if isinstance(names, list) and names:
            facts.set("model", str(names[0]), here)
        elif isinstance(names, str):
            facts.set("model", names, here)
        analyzer = config.get("perf_analyzer")
        if isinstance(analyzer, Mapping):
            stimulus = analyzer.get("stimulus")
            if isinstance(stimulus, Mapping):
                facts.set("max_concurrency", _integer(stimulus.get("concurrency")), here)
                facts.set("request_rate_per_s", _number(stimulus.get("request_rate")), here)
            measurement = analyzer.get("measurement")
            if isinstance(measurement, Mapping) and measurement.get("mode") == "request_count":
                facts.set("num_prompts", _integer(measurement.get("num")), here)
        for key in ("concurrency", "request_rate"):
            value = config.get(key)
            target = "max_concurrency" if key == "concurrency" else "request_rate_per_s"
            facts.set(target, _number(value) if key == "request_rate" else _integer(value), here)
        inputs = config.get("input")
        if isinstance(inputs, Mapping) and inputs.get("file"):
            facts.set("dataset", str(inputs["file"]), here)
    facts.set("completed", _integer(_avg(doc, "request_count")), here)
    return facts.finish()


def guidellm(path: Path, benchmark: int | None) -> dict[str, Any]:
    facts = _Facts("guidellm")
    doc = _json_or_none(path)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("benchmarks"), list):
        return facts.finish()
    benchmarks = doc["benchmarks"]
    index = benchmark or 0
    if not (0 <= index < len(benchmarks)) or not isinstance(benchmarks[index], Mapping):
        return facts.finish()
    here = f"{path.name} benchmarks[{index}]"
    bench = benchmarks[index]
    config = bench.get("config") if isinstance(bench.get("config"), Mapping) else {}
    assert isinstance(config, Mapping)
    strategy = config.get("strategy") if isinstance(config.get("strategy"), Mapping) else {}
    assert isinstance(strategy, Mapping)
    kind = strategy.get("type_") or strategy.get("type")
    if kind == "synchronous":
        facts.set("max_concurrency", 1, here)
    elif kind == "concurrent":
        facts.set(
            "max_concurrency",
            _integer(strategy.get("max_concurrency") or strategy.get("streams")),
            here,
        )
    elif kind in ("constant", "poisson", "async"):
        facts.set("request_rate_per_s", _number(strategy.get("rate")), here)
    elif kind == "throughput":
        facts.set("request_rate_per_s", math.inf, here)
        facts.set("max_concurrency", _integer(strategy.get("max_concurrency")), here)
    constraints = config.get("constraints")
    if isinstance(constraints, Mapping):
        limit = constraints.get("max_requests")
        args = limit.get("args") if isinstance(limit, Mapping) else None
        if isinstance(args, Mapping):
            facts.set("num_prompts", _integer(args.get("count")), here)
    facts.set("duration_s", _number(bench.get("duration")), here)
    scheduler = bench.get("scheduler_metrics")
    made = scheduler.get("requests_made") if isinstance(scheduler, Mapping) else None
    if isinstance(made, Mapping):
        facts.set("completed", _integer(made.get("successful")), here)
    top = doc.get("config") if isinstance(doc.get("config"), Mapping) else None
    if isinstance(top, Mapping):
        model = top.get("model") or (top.get("backend_kwargs") or {}).get("model")
        if isinstance(model, str):
            facts.set("model", model, path.name)
        data = top.get("data")
        if isinstance(data, str):
            facts.set("dataset", data, path.name)
        elif isinstance(data, list) and data and isinstance(data[0], str):
            facts.set("dataset", data[0], path.name)
    return facts.finish()


def llmperf(path: Path, summary: Mapping[str, Any] | None) -> dict[str, Any]:
    facts = _Facts("llmperf")
    summary = summary or {}
    here = "summary"
    facts.set("model", summary.get("model"), here)
    facts.set("max_concurrency", _integer(summary.get("num_concurrent_requests")), here)
    facts.set("completed", _integer(summary.get("results_num_completed_requests")), here)
    facts.set("num_prompts", _integer(summary.get("results_num_requests_started")), here)
    return facts.finish()


def declared_for(
    fmt: str | None,
    path: Path | None,
    tool_summary: Mapping[str, Any] | None,
    benchmark: int | None = None,
) -> dict[str, Any]:
    """The declared facts of one run read with importer ``fmt`` from ``path``."""
    if fmt is None or path is None:
        facts = empty_declared()
        facts["tool"] = "servetrace" if fmt is None else fmt
        return facts
    if fmt == "vllm-bench":
        return vllm_bench(path, tool_summary)
    if fmt == "aiperf":
        main = path
        name = strip_suffixes(main, ".gz", ".jsonl")
        name = name.removesuffix("_raw")
        return aiperf(sibling(main, name + "_aiperf.json"))
    if fmt == "genai-perf":
        return genai_perf(sibling(path, strip_suffixes(path, ".gz", ".json") + "_genai_perf.json"))
    if fmt == "guidellm":
        return guidellm(path, benchmark)
    if fmt == "llmperf":
        return llmperf(path, tool_summary)
    facts = empty_declared()
    facts["tool"] = fmt
    return facts


def dumps(declared: Mapping[str, Any]) -> str:
    return json.dumps(declared_dict(declared), sort_keys=True)
