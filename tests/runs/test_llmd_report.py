"""llm-d Benchmark Reports (tests/data/interchange/llm-d, see its PROVENANCE.md) through the
CLI: a reported run of the report's own figures in ms, its declared facts, the v0.1 twin
giving way to the v0.2 one, and one-line refusals of bad reports."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data" / "interchange" / "llm-d"
V01 = DATA / "vllm-qps10" / "benchmark_report,_vllm-qps10-Qwen3-0.6B.json.yaml"
V02 = DATA / "inference-perf" / "benchmark_report_v0.2,_stage_2_lifecycle_metrics.json.yaml"


def _runs(*args: str) -> tuple[list[dict[str, Any]], str]:
    done = runner.invoke(app, ["analyze", *args, "-f", "json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    return doc["runs"], done.stderr


def _refused(path: Path) -> str:
    done = runner.invoke(app, ["analyze", str(path), "-q"])
    assert done.exit_code == 3, done.output
    assert "Traceback" not in done.output
    first: str = done.output.strip().splitlines()[0]
    assert first.startswith(f"error: {path}: ")
    return first


def test_a_v02_report_is_a_reported_run_in_ms_with_its_declared_facts() -> None:
    (run,), said = _runs(str(V02))
    assert "only llm-d's summary" in said
    reported = run["reported"]
    assert reported["report_version"] == "0.2" and reported["harness"] == "inference-perf"
    ttft = reported["metrics"]["ttft"]  # seconds in the report
    assert ttft["p99"] == pytest.approx(94.0) and ttft["std"] == pytest.approx(11.0)
    assert reported["metrics"]["itl"]["p99"] == pytest.approx(41.0)  # s/token
    assert reported["metrics"]["e2e"]["mean"] == pytest.approx(3730.0)
    assert reported["completed"] == 400 - 4 and reported["errored"] == 4
    assert reported["throughput"] == {"requests_per_s": 7.92, "output_tokens_per_s": 1584.0}
    declared = run["declared"]
    assert declared["model"] == "Qwen/Qwen3-32B"
    assert declared["request_rate_per_s"] == 8.0
    assert declared["max_concurrency"] is None  # concurrency: .inf, no limit
    assert declared["duration_s"] == 50.0  # PT50.0S
    assert (declared["tensor_parallel"], declared["pipeline_parallel"]) == (4, 1)
    assert declared["sources"]["request_rate_per_s"].endswith(
        " scenario.load.standardized.rate_qps"
    )


def test_a_v01_report_of_vllm_declares_vllms_arguments() -> None:
    (run,), _ = _runs(str(V01.parent))
    reported = run["reported"]
    assert reported["report_version"] == "0.1" and reported["harness"] == "vllm-benchmark"
    assert reported["metrics"]["ttft"]["p99"] == 70.25
    assert reported["metrics"]["itl"]["p99"] == 30.0
    assert reported["metrics"]["tpot"]["p50"] == 12.0
    assert reported["completed"] is None  # vLLM's total is its completed count: unknown
    declared = run["declared"]
    assert declared["model"] == "Qwen/Qwen3-0.6B"
    assert (declared["request_rate_per_s"], declared["max_concurrency"]) == (10.0, 32)
    assert declared["num_prompts"] == 200
    assert declared["duration_s"] == pytest.approx(20.833333333333332)
    assert (declared["tensor_parallel"], declared["gpus"]) == (2, 2)


def test_the_v01_twin_gives_way_to_the_v02_report(tmp_path: Path) -> None:
    shutil.copy(V02, tmp_path / V02.name)
    twin = tmp_path / "benchmark_report,_stage_2_lifecycle_metrics.json.yaml"
    shutil.copy(V01, twin)
    runs, said = _runs(str(tmp_path))
    assert [r["reported"]["report_version"] for r in runs] == ["0.2"]
    assert f"{twin}: the v0.1 report of the same results as {V02.name}" in said


def test_compare_and_check_refuse_a_summary_as_for_any_tool() -> None:
    for args in (["compare", str(V01), str(V02)], ["check", str(V02), "--slo", "ttft.p99<=1s"]):
        done = runner.invoke(app, args)
        assert done.exit_code == 2, done.output  # a usage error, as for GuideLLM's CSV
        assert "only the tool's summary (no per-request file)" in done.output


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / V02.name
    text = V02.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        (
            "          units: s\n      requests:",
            "          units: tokens\n      requests:",
            "field 'results.request_performance.aggregate.latency.time_to_first_token.units' "
            "must be one of ms, s, ms/token, s/token, got 'tokens'",
        ),
        (
            "        total: 400",
            "        total: 3",
            "field 'results.request_performance.aggregate.requests.total' (3) is below",
        ),
        ("version: '0.2'", "version: '0.3'", "field 'version' is '0.3'"),
    ],
)
def test_a_bad_report_is_one_line_naming_file_field_and_rule(
    tmp_path: Path, old: str, new: str, rule: str
) -> None:
    assert rule in _refused(_edited(tmp_path, old, new))


def test_beside_the_harness_file_it_was_made_from_that_file_is_read(tmp_path: Path) -> None:
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "vllm-bench-llama33-70b-a100"
    native = "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_01.json"
    (tmp_path / native).write_bytes(
        gzip.decompress((real / "01_tp8_pp1" / f"{native}.gz").read_bytes())
    )
    shutil.copy(V01, tmp_path / f"benchmark_report,_{native}.yaml")
    done = runner.invoke(app, ["analyze", str(tmp_path), "-f", "json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)  # one run of 200 requests, not the report's figures
    assert doc["outcomes"]["completed"] == 200 and "reported" not in doc
    assert f"the per-request file beside it ({native}) is analysed instead" in done.stderr
