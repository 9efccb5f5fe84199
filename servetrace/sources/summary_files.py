"""Which tool's *summary* (aggregate-only) file a path is: by the tools' fixed names, then
by the shape of a small JSON document."""

from __future__ import annotations

import json
from pathlib import Path

from servetrace.errors import InputError
from servetrace.sources import llmd_report
from servetrace.sources.guidellm_csv import is_benchmarks_csv
from servetrace.sources.reading import read_text, strip_suffixes

_SUMMARY_PEEK_BYTES = 4_000_000  # summaries are small; never read a large trace whole


def summary_kind(path: Path) -> str | None:
    """The tool whose *summary* (aggregate-only) file ``path`` is, or None.

    Decided by name first (the tools' fixed names), then, for small JSON documents, by
    content: AIPerf/GenAI-Perf ``{metric: {unit, avg, …}}``, LLMPerf ``results_*`` keys,
    vLLM's list of ``{"Test name": …}`` rows, GuideLLM's ``benchmarks.csv`` (a CSV whose
    first header row starts ``Run Info``).
    """
    name = path.name.lower()
    if name == "cumulative_results.md":
        return "vllm-bench"
    if llmd_report.is_report(path):
        return llmd_report.KIND
    bare = strip_suffixes(path, ".gz", ".json").lower()
    if bare.endswith("_aiperf"):
        return "aiperf"
    if bare.endswith("_genai_perf"):
        return "genai-perf"
    if bare == "benchmark_results":
        return "vllm-bench"
    if name.endswith(".csv"):
        return "guidellm" if is_benchmarks_csv(path) else None
    if not name.endswith((".json", ".json.gz")):
        return None
    try:
        if path.stat().st_size > _SUMMARY_PEEK_BYTES:
            return None
        doc = json.loads(read_text(path))
    except (OSError, InputError, json.JSONDecodeError, RecursionError):
        # Not a summary; nested too deep for Python's parser, it is no export either, and
        # the importer that reads it says so in one line.
        return None
    if llmd_report.version_of(doc) is not None:
        return llmd_report.KIND
    if isinstance(doc, list) and doc and all(isinstance(r, dict) and "Test name" in r for r in doc):
        return "vllm-bench"
    if not isinstance(doc, dict):
        return None
    if any(key.startswith("results_") for key in doc) and "model" in doc:
        return "llmperf"
    records = doc.get("records")
    metrics = records if isinstance(records, dict) else doc
    if "ttfts" not in doc and any(
        isinstance(v, dict) and "unit" in v and "avg" in v for v in metrics.values()
    ):
        return "genai-perf" if "input_config" in doc and "aiperf_version" not in doc else "aiperf"
    return None
