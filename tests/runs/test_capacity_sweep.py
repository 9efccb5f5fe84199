"""``servetrace capacity`` on the real vLLM sweep, read through the run model.

The sweep folder is found as ``analyze`` finds runs (``benchmark_results.json`` and
``cumulative_results.md`` noted and skipped), each run brings its declared offered rate
and GPUs (tp × pp from the file name), throughput is over the declared duration as vLLM
computed it, and the curve equals vLLM's own numbers and the user's cumulative_results.md.

Hand-computed capacity for ``ttft<=60ms`` at 80 %: from vLLM's own ``ttfts`` arrays the
TP8 runs meet the target for 116, 170, 114 and 0 of their 200 requests (58 %, 85 %, 57 %,
0 %); the highest offered rate at ≥ 80 % is 4 req/s and the next run (16 req/s) misses,
so capacity = 4 + (0.85 − 0.80) / (0.85 − 0.57) × (16 − 4) = 6.142857… req/s, interpolated.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app

DATA = Path(__file__).resolve().parent.parent / "data" / "real"
LLAMA = DATA / "vllm-bench-llama33-70b-a100"
TP8 = LLAMA / "01_tp8_pp1"
QPS = ("01", "04", "16", "inf")
FILES = {
    q: TP8 / f"serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_{q}.json.gz"
    for q in QPS
}
SLO = ["--goodput", "ttft<=60ms", "--attainment", "80%"]
CAPACITY = 4 + (170 / 200 - 0.8) / (170 / 200 - 114 / 200) * (16 - 4)

runner = CliRunner()


def _vllm(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _capacity(*args: str) -> tuple[dict[str, Any], str]:
    result = runner.invoke(app, ["capacity", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _cumulative() -> dict[str, dict[str, float]]:
    lines = [
        line
        for line in (LLAMA / "cumulative_results.md").read_text().splitlines()
        if line.startswith("|")
    ]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        row = dict(zip(head, (c.strip() for c in line.strip("|").split("|")), strict=True))
        rows[row["Test name"]] = {k: float(v) for k, v in row.items() if re.fullmatch(r"[\d.]+", v)}
    return rows


@pytest.fixture(scope="module")
def tp8() -> tuple[dict[str, Any], str]:
    return _capacity(str(TP8), *SLO)


@pytest.mark.slow
def test_sweep_folder_is_read_as_analyze_reads_runs(tp8: tuple[dict[str, Any], str]) -> None:
    doc, stderr = tp8
    assert [r["label"] for r in doc["runs"]] == [f"qps_{q}" for q in QPS]
    # the rates each file declares (request_rate), inf for "all at once"
    assert [r["offered_rate"] for r in doc["runs"]] == [1.0, 4.0, 16.0, "inf"]
    # GPUs from the declared parallelism (tp8 × pp1 in the file names), no --gpus
    assert [r["gpus"] for r in doc["runs"]] == [8, 8, 8, 8]
    assert doc["pareto_frontier"] is not None and doc["pareto_unavailable"] is None
    assert all(r["throughput_window"] == "declared" for r in doc["runs"])
    # the summary beside the runs is noted, not read as a run
    assert "benchmark_results.json: vllm-bench's summary" in stderr.replace("\n", "")


@pytest.mark.parametrize("q", QPS)
def test_curve_equals_vllm_files_and_cumulative_results(
    tp8: tuple[dict[str, Any], str], q: str
) -> None:
    run = {r["label"]: r for r in tp8[0]["runs"]}[f"qps_{q}"]
    own = _vllm(FILES[q])
    assert run["requests_per_s"] == pytest.approx(own["request_throughput"], rel=1e-9)
    assert run["output_tokens_per_s"] == pytest.approx(own["output_throughput"], rel=1e-9)
    assert run["latency_ms"]["ttft_p99"] == pytest.approx(own["p99_ttft_ms"], rel=1e-9)
    # vLLM's TPOT divides its own request latency, which these files do not keep per
    # request; servetrace ends the request at its last token (ttft + Σ itls): ns apart
    assert run["latency_ms"]["tpot_p50"] == pytest.approx(own["median_tpot_ms"], rel=1e-6)
    assert run["latency_ms"]["itl_p99"] == pytest.approx(own["p99_itl_ms"], rel=1e-9)
    user = _cumulative()[f"tp8_pp1_qps_{q}"]  # 6 significant digits
    assert run["requests_per_s"] == pytest.approx(user["Tput (req/s)"], rel=1e-5)
    assert run["output_tokens_per_s"] == pytest.approx(user["Output Tput (tok/s)"], rel=1e-5)
    assert run["latency_ms"]["ttft_p50"] == pytest.approx(user["Median TTFT (ms)"], rel=1e-5)
    assert run["latency_ms"]["ttft_p99"] == pytest.approx(user["P99 TTFT (ms)"], rel=1e-5)
    assert run["latency_ms"]["tpot_p99"] == pytest.approx(user["P99 TPOT (ms)"], rel=1e-5)
    # per GPU: output tok/s over the 8 declared GPUs; per user: 1 / median TPOT
    assert run["output_tokens_per_s_per_gpu"] == pytest.approx(own["output_throughput"] / 8)
    assert run["output_tokens_per_s_per_user"] == pytest.approx(1000 / own["median_tpot_ms"])


@pytest.mark.slow
def test_attainment_and_capacity_hand_computed(tp8: tuple[dict[str, Any], str]) -> None:
    doc, _ = tp8
    met = [sum(1 for t in _vllm(FILES[q])["ttfts"] if t <= 0.060) for q in QPS]
    assert met == [116, 170, 114, 0]  # independent of servetrace: vLLM's own arrays
    assert [r["met"] for r in doc["runs"]] == met
    # completed + errored is the denominator (no errors in these runs: 200 each)
    assert [r["answered"] for r in doc["runs"]] == [200] * 4
    assert [r["attainment"] for r in doc["runs"]] == [m / 200 for m in met]
    cap = doc["capacity"]
    assert cap["requests_per_s"] == pytest.approx(CAPACITY, rel=1e-12)
    assert cap["bound"] == "interpolated" and cap["bracket"] == ["qps_04", "qps_16"]
    assert any("not monotone" in n and "qps_01" in n for n in cap["notes"])
    table = runner.invoke(app, ["capacity", str(TP8), *SLO], env={"COLUMNS": "250"})
    assert table.exit_code == 0
    assert (
        "capacity at 80% SLO attainment (ttft<=60ms): 6.14 req/s, linearly interpolated "
        "between qps_04 (4.00 req/s, 85.0%) and qps_16 (16.00 req/s, 57.0%)" in table.stdout
    )


@pytest.mark.slow
def test_library_api_gives_the_same_report() -> None:
    report = servetrace.capacity([TP8], goodput="ttft<=60ms", attainment="80%")
    assert report.capacity is not None
    assert report.capacity.rate == pytest.approx(CAPACITY, rel=1e-12)
    assert [p.label for p in report.curve] == [f"qps_{q}" for q in QPS]
    assert [p.gpus for p in report.curve] == [8] * 4
    # the files one by one are the same four runs (one per argument, never pooled)
    files = servetrace.capacity([FILES[q] for q in QPS], goodput="ttft<=60ms", attainment="80%")
    assert files.capacity is not None and files.capacity.rate == pytest.approx(CAPACITY)


@pytest.mark.slow
def test_gpus_replaces_the_declared_count_and_says_so() -> None:
    doc, _ = _capacity(str(TP8), *SLO, "--gpus", "16")
    assert [r["gpus"] for r in doc["runs"]] == [16] * 4
    assert any("--gpus 16 replaces the declared GPU count" in n for n in doc["notes"])
    run = doc["runs"][0]
    assert run["output_tokens_per_s_per_gpu"] == pytest.approx(run["output_tokens_per_s"] / 16)


@pytest.mark.slow
def test_rate_overrides_in_the_order_runs_are_found() -> None:
    doc, _ = _capacity(str(TP8), *SLO, "--rate", "1", "--rate", "2", "--rate", "3", "--rate", "5")
    # found by file name: qps_01, qps_04, qps_16, qps_inf
    assert [r["offered_rate"] for r in doc["runs"]] == [1.0, 2.0, 3.0, 5.0]
    wrong = runner.invoke(app, ["capacity", str(TP8), *SLO, "--rate", "1"])
    assert wrong.exit_code == 2 and "1 --rate values for 4 runs" in wrong.stderr


@pytest.mark.slow
def test_configurations_side_by_side_give_capacity_per_sweep() -> None:
    """The folder of configurations (with the user's cumulative_results.md): one curve,
    capacity per configuration folder (each repeats the offered rates), one frontier."""
    doc, stderr = _capacity(str(LLAMA), *SLO)
    assert "cumulative_results.md: vllm-bench's summary" in stderr.replace("\n", "")
    labels = [r["label"] for r in doc["runs"]]
    # labelled as analyze labels them: the file names already tell the runs apart
    assert labels[:4] == [f"tp8_pp1_sharegpt_qps_{q}" for q in QPS]
    assert labels[4:] == ["tp4_pp2_sharegpt_qps_04"]
    assert [r["sweep"] for r in doc["runs"]] == ["01_tp8_pp1"] * 4 + ["04_tp4_pp2_IB"]
    assert doc["capacity"] is None
    by = {c["sweep"]: c for c in doc["capacity_by_sweep"]}
    assert by["01_tp8_pp1"]["requests_per_s"] == pytest.approx(CAPACITY, rel=1e-12)
    # TP4×PP2 at 4 req/s: 3 of 200 under 60 ms (vLLM's ttfts), so below its lowest rate
    tp4 = _vllm(
        LLAMA
        / "04_tp4_pp2_IB"
        / "serving_meta-llama-Llama-3.3-70B-Instruct_tp4_pp2_sharegpt_qps_04.json.gz"
    )
    assert sum(1 for t in tp4["ttfts"] if t <= 0.060) == 3
    assert doc["runs"][4]["attainment"] == pytest.approx(3 / 200)
    assert by["04_tp4_pp2_IB"]["requests_per_s"] is None
    assert "below the lowest offered rate" in by["04_tp4_pp2_IB"]["unavailable"]
    assert doc["runs"][4]["gpus"] == 8  # tp4 × pp2
    table = runner.invoke(app, ["capacity", str(LLAMA), *SLO], env={"COLUMNS": "250"})
    assert "01_tp8_pp1: capacity at 80% SLO attainment (ttft<=60ms): 6.14 req/s" in table.stdout
    assert "04_tp4_pp2_IB: capacity at 80% SLO attainment (ttft<=60ms): unavailable" in (
        table.stdout
    )


def test_errored_requests_count_against_attainment(tmp_path: Path) -> None:
    """A vLLM run whose failed requests carry an error: completed + errored is the base."""
    doc = _vllm(FILES["04"])
    failed = [i for i, t in enumerate(doc["ttfts"]) if t <= 0.060][:10]  # 10 that met it
    for i in failed:
        doc["errors"][i] = "HTTP 429 Too Many Requests"
        doc["ttfts"][i] = 0.0
        doc["itls"][i] = []
        doc["output_lens"][i] = 0
        doc["generated_texts"][i] = ""
    doc["completed"] = 190
    out = tmp_path / "serving_x_tp8_pp1_qps_04.json"
    out.write_text(json.dumps(doc))
    shutil.copy(FILES["16"], tmp_path / "serving_x_tp8_pp1_qps_16.json.gz")
    got, _ = _capacity(str(tmp_path), *SLO)
    run = got["runs"][0]
    assert (run["completed"], run["errored"], run["answered"]) == (190, 10, 200)
    assert run["met"] == 160 and run["attainment"] == pytest.approx(160 / 200)
