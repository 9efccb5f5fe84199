"""vLLM bench importer: agreement with vLLM's stored aggregates, the quirks of the real
files (no send times, two-token chunks, one-token outputs, "inf" rate) and bad files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servetrace.errors import InputError
from servetrace.sources import vllm_bench

from .conftest import (
    MS,
    TICKS,
    VLLM_DEEPSEEK_INF,
    VLLM_LLAMA_QPS4,
    analyze_or_skip,
    assert_lifecycle_is_plausible,
    completed,
    per_request,
    pooled_gaps,
    read_json,
    write_json,
)

FILES = {"llama-qps4": VLLM_LLAMA_QPS4, "deepseek-inf": VLLM_DEEPSEEK_INF}


@pytest.fixture(scope="module", params=list(FILES), ids=list(FILES))
def run(request: pytest.FixtureRequest) -> vllm_bench.ImportResult:
    return vllm_bench.read(FILES[request.param])


def _vllm_stats(values: Any) -> dict[str, float]:
    """vLLM's own statistics: numpy mean, median, population std, linear p99."""
    v = np.asarray(values, dtype=float)
    return {
        "mean": v.mean(),
        "median": float(np.median(v)),
        "std": v.std(),
        "p99": float(np.percentile(v, 99)),
    }


def _diff(ours: dict[str, float], summary: dict[str, Any], metric: str) -> float:
    return max(abs(ours[s] - summary[f"{s}_{metric}_ms"]) for s in ("mean", "median", "std", "p99"))


# --------------------------------------------------------------------------------------
# Numbers agree with vLLM's stored aggregates
# --------------------------------------------------------------------------------------


def test_vllm_bench_ttft_agrees_with_vllm(run: vllm_bench.ImportResult) -> None:
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events)
    assert done.height == summary["completed"]
    # each TTFT is rounded once to whole ns, so statistics agree to well under 1 ns
    assert _diff(_vllm_stats(done["ttft_ns"] / MS), summary, "ttft") < 1e-9


def test_vllm_bench_itl_is_our_pooled_itl(run: vllm_bench.ImportResult) -> None:
    summary = run.tool_summary
    assert summary is not None
    assert _diff(_vllm_stats(pooled_gaps(run.events) / MS), summary, "itl") < 1e-9


def test_vllm_bench_tpot_differs_by_vllms_unsaved_latency(run: vllm_bench.ImportResult) -> None:
    """vLLM's TPOT is (e2e latency - ttft)/(out - 1) with an e2e it does not save, a
    little longer than ttft + Σitls; ours is (last tick - first tick)/(out - 1). The
    documented difference is about 1e-4 ms; pinned below 1.5e-4 ms."""
    summary = run.tool_summary
    assert summary is not None
    tpot = completed(run.events)["tpot_ns"].drop_nulls() / MS
    difference = _diff(_vllm_stats(tpot), summary, "tpot")
    assert 0 < difference < 1.5e-4


def test_vllm_bench_agrees_through_the_pipeline(run: vllm_bench.ImportResult) -> None:
    analysis = analyze_or_skip(run.events)
    summary = run.tool_summary
    assert summary is not None
    done = analysis.requests.filter(pl.col("outcome") == "completed")
    assert _diff(_vllm_stats(done["ttft_ns"] / MS), summary, "ttft") < 1e-9
    assert _diff(_vllm_stats(analysis.gaps["itl_ns"] / MS), summary, "itl") < 1e-9


def test_vllm_bench_no_fabricated_events(run: vllm_bench.ImportResult) -> None:
    assert_lifecycle_is_plausible(run.events)
    assert run.events["ticks_available"].all()
    assert not run.request_level


# --------------------------------------------------------------------------------------
# Quirks of the real files
# --------------------------------------------------------------------------------------


def test_vllm_bench_without_start_times_has_unknown_arrivals(run: vllm_bench.ImportResult) -> None:
    assert not run.arrival_known
    assert not run.events["arrival_known"].any()
    assert (run.events.filter(pl.col("event") == "arrival")["ts"] == 0).all()
    assert any("throughput and concurrency are unavailable" in w for w in run.warnings)


def test_vllm_bench_two_token_chunk() -> None:
    raw = read_json(VLLM_LLAMA_QPS4)
    result = vllm_bench.read(VLLM_LLAMA_QPS4)
    rows = per_request(result.events).sort(pl.col("request_id").cast(pl.Int64))
    chunks = np.array([len(i) + 1 for i in raw["itls"]])
    two_token = np.flatnonzero(chunks == np.array(raw["output_lens"]) - 1)
    assert len(two_token) == 25
    picked = rows[two_token.tolist()]
    assert (picked["ticks"] == picked["reported"] - 1).all()
    assert picked["reported"].to_list() == np.array(raw["output_lens"])[two_token].tolist()
    assert any("fewer chunks than output tokens" in w for w in result.warnings)


def test_vllm_bench_single_token_outputs_have_one_tick_and_no_gap() -> None:
    raw = read_json(VLLM_DEEPSEEK_INF)
    singles = [str(i) for i, n in enumerate(raw["output_lens"]) if n == 1]
    assert len(singles) == 38
    assert all(raw["itls"][int(i)] == [] for i in singles)
    rows = per_request(vllm_bench.read(VLLM_DEEPSEEK_INF).events).filter(
        pl.col("request_id").is_in(singles)
    )
    assert (rows["ticks"] == 1).all()
    assert rows["tpot_ns"].is_null().all()
    assert (rows["terminal_ns"] == rows["first_ns"]).all()


def test_vllm_bench_inf_request_rate_is_a_float() -> None:
    summary = vllm_bench.read(VLLM_DEEPSEEK_INF).tool_summary
    assert summary is not None
    assert summary["request_rate"] == math.inf
    llama = vllm_bench.read(VLLM_LLAMA_QPS4).tool_summary
    assert llama is not None and llama["request_rate"] == 4.0
    assert "request_goodput" in llama and "request_goodput:" in llama


def test_vllm_bench_gaps_are_rounded_once_and_summed_in_integers() -> None:
    raw = read_json(VLLM_LLAMA_QPS4)
    events = vllm_bench.read(VLLM_LLAMA_QPS4).events
    ticks = events.filter((pl.col("request_id") == "1") & pl.col("event").is_in(TICKS))["ts"]
    expected = np.cumsum([round(raw["ttfts"][1] * 1e9)] + [round(g * 1e9) for g in raw["itls"][1]])
    assert ticks.to_list() == expected.tolist()


def _file(**arrays: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"backend": "vllm", "request_rate": "inf"}
    base.update(arrays)
    return base


def test_vllm_bench_start_times_and_a_failed_request(tmp_path: Path) -> None:
    """Newer vLLM saves start_times (perf_counter seconds): arrivals become known. A
    failed request (non-empty errors[i], ttft 0, no itls) ends in a flagged error."""
    doc = _file(
        start_times=[1000.0, 1000.25, 1000.5],
        ttfts=[0.1, 0.0, 0.2],
        itls=[[0.01, 0.02], [], []],
        output_lens=[3, 0, 1],
        input_lens=[10, 11, 12],
        errors=["", "Traceback ... ServerDisconnectedError", ""],
    )
    result = vllm_bench.read(write_json(tmp_path, "start_times_and_failure.json", doc))
    assert result.arrival_known and result.events["arrival_known"].all()
    rows = per_request(result.events).sort("request_id")
    assert rows["arrival_ns"].to_list() == [1_000_000_000_000, 1_000_250_000_000, 1_000_500_000_000]
    failed = rows.filter(pl.col("request_id") == "1").row(0, named=True)
    assert failed["terminal"] == "error" and failed["ticks"] is None
    assert failed["reported"] is None and failed["e2e_ns"] == 0
    failed_rows = result.events.filter(pl.col("request_id") == "1")
    assert failed_rows["error"].str.contains("ServerDisconnectedError").all()
    assert not failed_rows["terminal_known"].any()
    assert rows.filter(pl.col("request_id") == "0")["terminal_ns"].item() == (
        1_000_000_000_000 + 100_000_000 + 10_000_000 + 20_000_000
    )
    assert not any("no per-request send times" in w for w in result.warnings)
    assert any("failed" in w for w in result.warnings)
    assert_lifecycle_is_plausible(result.events)


@settings(max_examples=50, deadline=None)
@given(
    ttft=st.floats(1e-4, 10.0),
    itls=st.lists(st.floats(1e-6, 1.0), max_size=60),
)
def test_vllm_bench_last_tick_is_exact_sum_of_rounded_gaps(
    tmp_path_factory: pytest.TempPathFactory, ttft: float, itls: list[float]
) -> None:
    doc = _file(ttfts=[ttft], itls=[itls], output_lens=[len(itls) + 1], errors=[""])
    path = write_json(tmp_path_factory.mktemp("prop"), "one.json", doc)
    ticks = vllm_bench.read(path).events.filter(pl.col("event").is_in(TICKS))["ts"].to_list()
    assert ticks[0] == round(ttft * 1e9)
    assert ticks[-1] == round(ttft * 1e9) + sum(round(g * 1e9) for g in itls)


# --------------------------------------------------------------------------------------
# Bad files
# --------------------------------------------------------------------------------------


def test_vllm_bench_arrays_of_different_length_name_the_fields(tmp_path: Path) -> None:
    doc = _file(ttfts=[0.1, 0.2], itls=[[0.01]], output_lens=[2, 2])
    with pytest.raises(InputError) as caught:
        vllm_bench.read(write_json(tmp_path, "ragged.json", doc))
    assert "ragged.json" in caught.value.message
    assert "'itls' has 1 entries but 'ttfts' has 2" in caught.value.message


def test_vllm_bench_text_in_itls_names_request_and_field(tmp_path: Path) -> None:
    doc = _file(ttfts=[0.1, 0.2], itls=[[0.01], [0.01, "slow"]], output_lens=[2, 3])
    with pytest.raises(InputError, match=r"bad_itls\.json: request 1: field 'itls'.*'slow'"):
        vllm_bench.read(write_json(tmp_path, "bad_itls.json", doc))


def test_vllm_bench_missing_field_is_named(tmp_path: Path) -> None:
    doc = _file(ttfts=[0.1], itls=[[]])
    with pytest.raises(InputError, match=r"no_output_lens\.json: .*'output_lens'"):
        vllm_bench.read(write_json(tmp_path, "no_output_lens.json", doc))


def test_vllm_bench_truncated_json_names_the_position(tmp_path: Path) -> None:
    full = write_json(tmp_path, "full.json", read_json(VLLM_LLAMA_QPS4))
    cut = tmp_path / "truncated.json"
    cut.write_bytes(full.read_bytes()[:20_000])
    with pytest.raises(InputError) as caught:
        vllm_bench.read(cut)
    assert "truncated.json: not valid JSON at line 1 column" in caught.value.message
    assert caught.value.hint is not None and "truncated" in caught.value.hint
