"""inference-perf's client and server summaries per stage (the KubeCon NA 2025 demo's
vllm+eagle run): every stage paired, the definitional differences named, numbers pinned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.api import inference_perf_stages
from servetrace.cli import app
from servetrace.errors import InputError
from servetrace.sources.server_metrics.inference_perf import read_stages

RUN = Path(__file__).resolve().parents[1] / "data" / "real" / "inference-perf-kubecon-na-2025"
EAGLE = RUN / "vllm+eagle"
runner = CliRunner()


def _pair(stage: dict, quantity: str, stat: str) -> dict:
    return next(p for p in stage["pairs"] if (p["quantity"], p["stat"]) == (quantity, stat))


def test_every_stage_is_paired() -> None:
    found = inference_perf_stages(EAGLE)
    assert [s["stage"] for s in found.stages] == list(range(7))
    three = found.stages[3]
    successes = _pair(three, "successes", "count")
    assert (successes["client"], successes["server"]) == (3149, 6411)
    assert successes["difference"] == "window"
    # the server's window is its count over its rate: 60 s of sends + 15 s scrape + 2 s + …
    assert three["server_window_s"] == pytest.approx(6411 / 81.162446)
    assert three["client_window_s"] == pytest.approx(59.980510351015255)
    # tokens per request from the server's rates, not its prompt_len.mean (7,942)
    prompt = _pair(three, "prompt_tokens", "mean")
    assert prompt["client"] == pytest.approx(201.540489044141)
    assert prompt["server"] == pytest.approx(16485.235042 / 81.162446)
    tpot = _pair(three, "tpot", "mean")
    assert tpot["ratio"] == pytest.approx(0.022593 / 0.01079119370142353)
    assert set(three["server_unavailable"]) == {
        "kv_cache_usage_percentage",
        "queue_len",
        "num_preemptions_total",
        "num_requests_swapped",
        "prefix_cache_hit_percent",
    }


def test_a_stage_without_its_server_file_is_named(tmp_path: Path) -> None:
    shutil.copytree(EAGLE / "results", tmp_path / "results")
    (tmp_path / "results" / "stage_2_prometheus_metrics.json").unlink()
    with pytest.raises(InputError, match=r"stage 2 has no stage_2_prometheus_metrics\.json"):
        read_stages(tmp_path)


def test_analyze_on_the_results_folder() -> None:
    done = runner.invoke(app, ["analyze", str(EAGLE), "-f", "json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["source"] == "inference-perf" and len(report["stages"]) == 7
    ttft = _pair(report["stages"][3], "ttft", "p99")
    assert ttft["unit"] == "ms"
    assert ttft["client"] == pytest.approx(72.21136546693742)
    assert ttft["server"] == pytest.approx(71.51)
    assert "arrival at the engine" in report["differences"]["ttft"]
    table = runner.invoke(app, ["analyze", str(EAGLE / "results")]).stdout
    assert "3      successes count            requests  3,149   6,411   2.04×" in table
    assert "per engine output step" in table
    md = runner.invoke(app, ["analyze", str(EAGLE), "-f", "markdown"]).stdout
    assert md.startswith("## inference-perf client vs server per stage")
