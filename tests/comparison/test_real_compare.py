"""``compare`` on real data: the same 200 ShareGPT prompts served by vLLM 0.8.3 on two
deployments of Llama-3.3-70B (one node TP8 vs two nodes TP4×PP2 over InfiniBand)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from servetrace.analysis.memory import analyze_events
from servetrace.comparison.compare import compare
from servetrace.sources.registry import import_file
from servetrace.units import NS_PER_MS

DATA = Path(__file__).parent.parent / "data" / "real" / "vllm-bench-llama33-70b-a100"
TP8 = (
    DATA
    / "01_tp8_pp1"
    / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_04.json.gz"
)
TP4PP2 = (
    DATA
    / "04_tp4_pp2_IB"
    / "serving_meta-llama-Llama-3.3-70B-Instruct_tp4_pp2_sharegpt_qps_04.json.gz"
)


def vllm_summary(path: Path) -> dict:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def comparison():
    base = analyze_events(import_file(TP8).events)
    cand = analyze_events(import_file(TP4PP2).events)
    return compare(base, cand, metrics=["ttft", "itl", "tpot"], resamples=500, seed=1)


def test_same_prompts_are_recognised_and_paired(comparison) -> None:
    workload = comparison.workload
    assert workload.verdict == "same_requests"  # same prompts; generation lengths vary
    assert workload.paired and workload.shared_requests == 200


@pytest.mark.parametrize(("metric", "key"), [("ttft", "ttft"), ("itl", "itl")])
def test_means_are_vllms_own_and_the_slowdown_is_significant(comparison, metric, key) -> None:
    rows = comparison.rows.filter(
        (comparison.rows["metric"] == metric) & (comparison.rows["stat"] == "mean")
    ).to_dicts()
    (row,) = rows
    base_ms = vllm_summary(TP8)[f"mean_{key}_ms"]
    cand_ms = vllm_summary(TP4PP2)[f"mean_{key}_ms"]
    assert row["baseline"] == pytest.approx(base_ms * NS_PER_MS, rel=1e-9)  # ns inside
    assert row["candidate_value"] == pytest.approx(cand_ms * NS_PER_MS, rel=1e-9)
    assert row["ratio"] == pytest.approx(cand_ms / base_ms, rel=1e-9)
    assert row["significant"] and row["verdict"] == "slower"
    assert row["ci_low"] > 1.0
