"""What a run declares about itself: tool, model, offered load, duration, parallelism.

Read from the export and its companions, never measured: vLLM's result scalars
(``request_rate``, ``max_concurrency``, ``num_prompts``, ``duration``, ``completed``,
``model_id``), its ``.commands`` file (``--dataset-name``) and the file name
(``_tp8_pp1_``); AIPerf's ``profile_export_aiperf.json`` (``input_config`` phases,
``benchmark_duration``); GenAI-Perf's ``input_config`` (``perf_analyzer.stimulus``);
GuideLLM's ``benchmarks[i].config.strategy`` and ``duration``; LLMPerf's summary
(``num_concurrent_requests``); a BLIS trace's header (``server.model``,
``server.tensor_parallel``). Keys: ``servetrace.runs.model.DECLARED_KEYS``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.runs.facts import Kind, checked
from servetrace.runs.model import DECLARED_KEYS, empty_declared
from servetrace.sources.reading import load_json, sibling, strip_suffixes

_TP_PP = re.compile(r"(?:^|[_\-.])tp(\d+)[_\-]pp(\d+)(?:[_\-.]|$)", re.IGNORECASE)
_DATASET_FLAG = re.compile(r"--dataset[-_]name[= ]+['\"]?([\w\-./]+)")
# The offered load as AIPerf and GenAI-Perf spell it (GenAI-Perf: stimulus, or the top of
# input_config; AIPerf: a profiling phase or the loadgen, beside its request count).
_LOAD: list[tuple[str, str, Kind]] = [
    ("max_concurrency", "concurrency", "positive_count"),
    ("request_rate_per_s", "request_rate", "rate"),
]


def declared_dict(declared: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready: an infinite rate becomes the string ``"inf"`` (JSON has no infinity)."""
    out: dict[str, Any] = {}
    for key in (*DECLARED_KEYS, "sources"):
        value = declared.get(key)
        out[key] = "inf" if isinstance(value, float) and math.isinf(value) else value
    return out


def _avg(summary: Mapping[str, Any], key: str) -> Any:
    value = summary.get(key)
    return value.get("avg") if isinstance(value, Mapping) else None


class Facts:
    """``declared`` being filled in, recording where each fact came from."""

    def __init__(self, tool: str) -> None:
        self.values = empty_declared()
        self.values["tool"] = tool

    def set(self, key: str, value: Any, source: str) -> None:
        if value is None or self.values.get(key) is not None:
            return
        self.values[key] = value
        self.values["sources"][key] = source

    def set_checked(
        self,
        obj: Mapping[str, Any],
        wanted: Sequence[tuple[str, str, Kind]],
        where: Path | str,
        source: str,
        prefix: str = "",
    ) -> None:
        """Each ``(key, field, kind)`` of ``wanted``: ``obj[field]`` checked as ``kind``
        (``facts.checked``, errors naming ``where`` and ``prefix + field``), then set."""
        for key, field, kind in wanted:
            self.set(key, checked(obj.get(field), kind, where, prefix + field), source)

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


def _parallelism(facts: Facts, name: str) -> None:
    match = _TP_PP.search(name)
    if match:
        facts.set("tensor_parallel", int(match.group(1)), "file name")
        facts.set("pipeline_parallel", int(match.group(2)), "file name")


# ----------------------------------------------------------------------- per tool


def vllm_bench(path: Path, summary: Mapping[str, Any] | None) -> dict[str, Any]:
    facts = Facts("vllm-bench")
    summary = summary or {}
    here = path.name
    rate = summary.get("request_rate")
    facts.set("model", summary.get("model_id"), here)
    facts.set("request_rate_per_s", checked(rate, "rate", path, "request_rate"), here)
    wanted: list[tuple[str, str, Kind]] = [
        ("max_concurrency", "max_concurrency", "positive_count"),
        ("num_prompts", "num_prompts", "count"),
        ("duration_s", "duration", "duration_s"),
        ("completed", "completed", "count"),
    ]
    facts.set_checked(summary, wanted, path, here)
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
    facts = Facts("aiperf")
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
            wanted = [*_LOAD, ("num_prompts", "requests", "count")]
            facts.set_checked(phase, wanted, summary_file, here, "input_config.phases[].")
    loadgen = config.get("loadgen")
    if isinstance(loadgen, Mapping):
        loads = [*_LOAD, ("num_prompts", "request_count", "count")]
        facts.set_checked(loadgen, loads, summary_file, here, "input_config.loadgen.")
    datasets = config.get("datasets")
    if isinstance(datasets, list) and datasets and isinstance(datasets[0], Mapping):
        facts.set("dataset", datasets[0].get("type") or datasets[0].get("name"), here)
    duration = checked(
        _avg(metrics, "benchmark_duration"), "duration_s", summary_file, "benchmark_duration.avg"
    )
    facts.set("duration_s", duration, here)
    completed = _avg(metrics, "completed_request_count")
    field = "completed_request_count.avg"
    facts.set("completed", checked(completed, "count", summary_file, field), here)
    return facts.finish()


def genai_perf(summary_file: Path | None) -> dict[str, Any]:
    facts = Facts("genai-perf")
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
                facts.set_checked(
                    stimulus, _LOAD, summary_file, here, "input_config.perf_analyzer.stimulus."
                )
            measurement = analyzer.get("measurement")
            if isinstance(measurement, Mapping) and measurement.get("mode") == "request_count":
                field = "input_config.perf_analyzer.measurement.num"
                facts.set(
                    "num_prompts",
                    checked(measurement.get("num"), "count", summary_file, field),
                    here,
                )
        facts.set_checked(config, _LOAD, summary_file, here, "input_config.")
        inputs = config.get("input")
        if isinstance(inputs, Mapping) and inputs.get("file"):
            facts.set("dataset", str(inputs["file"]), here)
    count = checked(_avg(doc, "request_count"), "count", summary_file, "request_count.avg")
    facts.set("completed", count, here)
    return facts.finish()


def guidellm(path: Path, benchmark: int | None) -> dict[str, Any]:
    facts = Facts("guidellm")
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
        field = f"{here}.config.strategy.max_concurrency"
        value = strategy.get("max_concurrency") or strategy.get("streams")
        facts.set("max_concurrency", checked(value, "positive_count", path, field), here)
    elif kind in ("constant", "poisson", "async"):
        rate = checked(strategy.get("rate"), "rate", path, f"{here}.config.strategy.rate")
        facts.set("request_rate_per_s", rate, here)
    elif kind == "throughput":
        facts.set("request_rate_per_s", math.inf, here)
        field = f"{here}.config.strategy.max_concurrency"
        value = checked(strategy.get("max_concurrency"), "positive_count", path, field)
        facts.set("max_concurrency", value, here)
    constraints = config.get("constraints")
    if isinstance(constraints, Mapping):
        limit = constraints.get("max_requests")
        args = limit.get("args") if isinstance(limit, Mapping) else None
        if isinstance(args, Mapping):
            field = f"{here}.config.constraints.max_requests.args.count"
            facts.set("num_prompts", checked(args.get("count"), "count", path, field), here)
    duration = checked(bench.get("duration"), "duration_s", path, f"{here}.duration")
    facts.set("duration_s", duration, here)
    scheduler = bench.get("scheduler_metrics")
    made = scheduler.get("requests_made") if isinstance(scheduler, Mapping) else None
    if isinstance(made, Mapping):
        field = f"{here}.scheduler_metrics.requests_made.successful"
        facts.set("completed", checked(made.get("successful"), "count", path, field), here)
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
    facts = Facts("llmperf")
    summary = summary or {}
    here = "summary"
    facts.set("model", summary.get("model"), here)
    where = f"{path} (its summary)"
    wanted: list[tuple[str, str, Kind]] = [
        ("max_concurrency", "num_concurrent_requests", "positive_count"),
        ("completed", "results_num_completed_requests", "count"),
        ("num_prompts", "results_num_requests_started", "count"),
    ]
    facts.set_checked(summary, wanted, where, here)
    return facts.finish()


def blis(path: Path, summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """A BLIS trace's header: ``server.model`` and ``server.tensor_parallel`` (else the one
    model of the CSV's ``model`` column); it states no offered load."""
    facts = Facts("blis")
    summary = summary or {}
    header = summary.get("header")
    where = Path(summary.get("header_file") or path)
    server = header.get("server") if isinstance(header, Mapping) else None
    if isinstance(server, Mapping):
        if isinstance(server.get("model"), str) and server["model"]:
            facts.set("model", server["model"], f"{where.name} server.model")
        field = "server.tensor_parallel"
        tp = checked(server.get("tensor_parallel"), "positive_count", where, field)
        facts.set("tensor_parallel", tp, f"{where.name} {field}")
    facts.set("model", summary.get("model_column"), f"{path.name} model")
    return facts.finish()


def declared_for(
    fmt: str | None,
    path: Path | None,
    tool_summary: Mapping[str, Any] | None,
    benchmark: int | None = None,
) -> dict[str, Any]:
    """The declared facts of one run read with importer ``fmt`` from ``path``."""
    if fmt is None or path is None:
        return Facts("servetrace" if fmt is None else fmt).finish()
    if fmt == "vllm-bench":
        return vllm_bench(path, tool_summary)
    if fmt == "aiperf":
        name = strip_suffixes(path, ".gz", ".jsonl").removesuffix("_raw")
        return aiperf(sibling(path, name + "_aiperf.json"))
    if fmt == "genai-perf":
        return genai_perf(sibling(path, strip_suffixes(path, ".gz", ".json") + "_genai_perf.json"))
    if fmt == "guidellm":
        return guidellm(path, benchmark)
    if fmt == "llmperf":
        return llmperf(path, tool_summary)
    if fmt == "blis":
        return blis(path, tool_summary)
    return Facts(fmt).finish()


def dumps(declared: Mapping[str, Any]) -> str:
    return json.dumps(declared_dict(declared), sort_keys=True)
