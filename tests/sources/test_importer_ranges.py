"""Importers refuse values that would wrap Int64 nanoseconds, and values Polars cannot
hold, with exit 3 naming file, record and field — never exit 4."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.sources.conftest import AIPERF_CONC8, LLMPERF, read_json, read_jsonl, write_json
from tests.sources.test_guidellm import _report_with, _variant
from tests.sources.test_vllm_bench import _file

runner = CliRunner()


def _refused(path: Path, fmt: str, *needles: str) -> None:
    result = runner.invoke(app, ["analyze", str(path), "--from", fmt])
    assert result.exit_code == 3, (result.exit_code, result.stderr)
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {path}: "), first
    for needle in needles:
        assert needle in first, first


@pytest.mark.parametrize(
    ("field", "value"),
    [("end_to_end_latency_s", 9.3e10), ("ttft_s", 1e20), ("inter_token_latency_s", 1e20)],
)
def test_llmperf_latencies_beyond_range(tmp_path: Path, field: str, value: float) -> None:
    rows = read_json(LLMPERF / "anyscale_70b.json")[:4]
    rows[2][field] = value
    if field == "ttft_s":
        rows[2]["end_to_end_latency_s"] = 2e20
    path = write_json(tmp_path, "individual.json", rows)
    _refused(path, "llmperf", "record 2", f"'{field}'", "beyond")


@pytest.mark.parametrize(
    ("arrays", "needle"),
    [
        ({"e2els": [0.5, 9.3e10]}, "'e2els'"),
        ({"start_times": [0.0, 1e20]}, "'start_times'"),
        ({"itls": [[0.01], [0.01, 1e20]]}, "'itls'"),
    ],
)
def test_vllm_bench_times_beyond_range(tmp_path: Path, arrays: dict[str, Any], needle: str) -> None:
    doc = _file(ttfts=[0.1, 0.2], itls=[[0.01], [0.01, 0.02]], output_lens=[2, 3])
    doc.update(arrays)
    path = write_json(tmp_path, "bench.json", doc)
    _refused(path, "vllm-bench", "request 1", needle)


def test_guidellm_time_beyond_range(tmp_path: Path) -> None:
    doc = _report_with([], [])
    doc["benchmarks"][0]["requests"]["successful"].append(_variant("completed", request_end=1e12))
    path = write_json(tmp_path, "benchmarks.json", doc)
    _refused(path, "guidellm", "successful[3]", "beyond")


def _genai_doc(**request: Any) -> dict[str, Any]:
    base = {
        "timestamp": 1_000,
        "response_timestamps": [1_100, 1_200],
        "response_outputs": [{"response": "data: {}\n\n"}, {"response": "data: {}\n\n"}],
    }
    return {"experiments": [{"experiment": {"mode": "x"}, "requests": [base | request]}]}


@pytest.mark.parametrize(
    ("request_fields", "needle"),
    [
        ({"timestamp": 2**70}, "'timestamp'"),
        ({"response_timestamps": [1_100, 2**70]}, "'response_timestamps'"),
        ({"response_timestamps": [1_100, 2**62 + 1]}, "'response_timestamps'"),
        ({"response_outputs": [{"response": "data: {}"}, "text"]}, "'response_outputs[1]'"),
    ],
)
def test_genai_perf_values_polars_cannot_hold(
    tmp_path: Path, request_fields: dict[str, Any], needle: str
) -> None:
    path = write_json(tmp_path, "profile_export.json", _genai_doc(**request_fields))
    _refused(path, "genai-perf", "experiments[0].requests[0]", needle)


def _aiperf_raw(tmp_path: Path, edit: Any) -> Path:
    records = read_jsonl(AIPERF_CONC8.with_name("profile_export_raw.jsonl.gz"))[:3]
    records = copy.deepcopy(records)
    edit(records[1])
    path = tmp_path / "profile_export_raw.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    return path


@pytest.mark.parametrize(
    "value", [2**70, 2**62 + 5, "soon", [1]], ids=["2^70", "2^62", "text", "list"]
)
def test_aiperf_raw_perf_ns_polars_cannot_hold(tmp_path: Path, value: Any) -> None:
    def edit(record: dict[str, Any]) -> None:
        record["responses"][1]["perf_ns"] = value

    path = _aiperf_raw(tmp_path, edit)
    _refused(path, "aiperf", "record 1 (line 2)", "perf_ns")


def test_aiperf_raw_response_that_is_not_an_object(tmp_path: Path) -> None:
    def edit(record: dict[str, Any]) -> None:
        record["responses"][0] = "chunk"

    _refused(_aiperf_raw(tmp_path, edit), "aiperf", "record 1 (line 2)", "'responses[0]'")


def test_aiperf_metric_beyond_range(tmp_path: Path) -> None:
    records = read_jsonl(AIPERF_CONC8)[:3]
    records[1]["metrics"]["request_latency"] = {"value": 9.3e10, "unit": "s"}
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    _refused(path, "aiperf", "record 1", "request_latency", "beyond")


def test_aiperf_integer_ns_beyond_range(tmp_path: Path) -> None:
    records = read_jsonl(AIPERF_CONC8)[:3]
    records[1]["metadata"]["request_start_ns"] = 2**70
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    _refused(path, "aiperf", "record 1", "request_start_ns", "beyond")


@pytest.mark.parametrize(("field", "value"), [("ttft", 1e20), ("e2e", 2**62), ("ttft", 1e13)])
def test_requests_table_times_beyond_range(tmp_path: Path, field: str, value: float) -> None:
    rows = [{"request_id": f"r{i}", "ttft": 0.05, "e2e": 1.5} for i in range(3)]
    rows[1][field] = value
    path = write_json(tmp_path, "requests.json", rows)
    _refused(path, "requests", "row 2", f"'{field}'", "beyond")
