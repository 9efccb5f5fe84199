"""Workload matching and compare: hand-made traces, properties, and real analyses.

Every ``compare`` here runs on analyses of generated events (``tests.factories``), so the
numbers are the ones production computes.
"""

from __future__ import annotations

import math
import re
import warnings

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.summary import GoodputTarget
from servetrace.comparison.compare import ROW_SCHEMA, compare
from servetrace.comparison.values import metric_value
from servetrace.comparison.workload import match_workloads
from servetrace.errors import UsageError
from servetrace.render.compare_words import (
    comparison_notes,
    comparison_warnings,
    display_rows,
    tradeoff_text,
)
from servetrace.render.workload import workload_message
from servetrace.settings import DEFAULT_ARRIVAL_TOLERANCE_NS
from tests.factories import MS, constant_trace, streamed, synthetic, synthetic_events

FAST = {"resamples": 200}


@pytest.fixture(autouse=True)
def _no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def requests_frame(
    ids: list,
    arrivals_ms: list[float],
    prompt: list | None = None,
    output: list | None = None,
    outcome: list[str] | None = None,
    **columns: list,
) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame(
        {
            "request_id": ids,
            "arrival_ns": [round(a * MS) for a in arrivals_ms],
            "outcome": outcome or ["completed"] * n,
            "prompt_tokens": prompt if prompt is not None else [None] * n,
            "output_tokens": output if output is not None else [10] * n,
            **columns,
        },
        schema_overrides={"prompt_tokens": pl.Int64, "output_tokens": pl.Int64},
    )


# --------------------------------------------------------------------------- workloads
def test_identical_workload_pairs_by_request_id() -> None:
    base = requests_frame(["a", "b", "c"], [1000, 1010, 1500], [10, 20, 30])
    cand = requests_frame(["c", "a", "b"], [5500, 5000, 5012], [30, 10, 20])  # 2 ms jitter
    match = match_workloads(base, cand)
    assert match.verdict == "identical"
    assert match.paired and match.paired_by == "request_id"
    assert match.shared_requests == 3
    assert match.max_arrival_offset_diff_ns == 2 * MS
    assert match.pairs.rows() == [(0, 1), (1, 2), (2, 0)]


def test_same_requests_with_different_timing_or_lengths() -> None:
    base = requests_frame(["a", "b"], [0, 100], [10, 20], [5, 5])
    late = requests_frame(["a", "b"], [0, 150], [10, 20], [5, 5])
    match = match_workloads(base, late)
    assert match.verdict == "same_requests" and match.paired
    assert match.arrival_mismatches == 1
    assert "1 arrival offsets differ by more than 10 ms" in workload_message(match)
    longer = requests_frame(["a", "b"], [0, 100], [10, 20], [5, 9])
    assert match_workloads(base, longer).output_length_mismatches == 1
    assert match_workloads(base, longer).verdict == "same_requests"


def test_partial_and_different() -> None:
    base = requests_frame(["a", "b", "c"], [0, 1, 2])
    partial = match_workloads(base, requests_frame(["b", "c", "d"], [0, 1, 2]))
    assert partial.verdict == "partial" and partial.shared_requests == 2
    assert not partial.paired
    assert "not the policy" in workload_message(partial)
    different = match_workloads(base, requests_frame(["x", "y"], [0, 1]))
    assert different.verdict == "different" and different.shared_requests == 0
    assert "differences may come from the load, not the policy" in workload_message(different)


def test_coinciding_ids_with_other_prompts_are_a_different_workload() -> None:
    base = requests_frame([0, 1, 2, 3], [0, 1, 2, 3], [10, 20, 30, 40])
    cand = requests_frame([0, 1, 2, 3], [0, 1, 2, 3], [11, 21, 31, 40])
    assert match_workloads(base, cand).verdict == "different"


def test_position_pairing_when_ids_differ() -> None:
    base = requests_frame(["a1", "a2", "a3"], [0, 50, 90], [10, 20, 30], [4, 5, 6])
    cand = requests_frame(["b1", "b2", "b3"], [7, 57, 97], [10, 20, 30], [4, 5, 6])
    match = match_workloads(base, cand)
    assert match.verdict == "identical" and match.paired_by == "position"
    assert match.pairs.rows() == [(0, 0), (1, 1), (2, 2)]
    other_lengths = requests_frame(["b1", "b2", "b3"], [0, 50, 90], [99, 20, 30])
    assert match_workloads(base, other_lengths).verdict == "different"
    fewer = requests_frame(["b1", "b2"], [0, 50], [10, 20])
    assert match_workloads(base, fewer).verdict == "different"


def test_pair_on_another_column_and_duplicates_in_order() -> None:
    base = requests_frame(["a", "b", "c"], [0, 10, 20], prompt_hash=["h1", "h2", "h1"])
    cand = requests_frame(["x", "y", "z"], [0, 10, 40], prompt_hash=["h1", "h1", "h2"])
    match = match_workloads(base, cand, pair_on="prompt_hash")
    assert match.shared_requests == 3 and match.paired_by == "prompt_hash"
    # the k-th h1 of the baseline pairs with the k-th h1 of the candidate, by arrival
    assert match.pairs.rows() == [(0, 0), (1, 2), (2, 1)]
    # offsets differ by 0, 10 (within the 10 ms tolerance) and 30 ms (beyond it)
    assert match.arrival_mismatches == 1
    assert match.verdict == "same_requests"
    with pytest.raises(UsageError, match="no such column"):
        match_workloads(base, cand, pair_on="tenant")
    # the analysis' internal request key is not offered as a column to pair on
    real = synthetic(5)
    with pytest.raises(UsageError) as error:
        match_workloads(real.requests, real.requests, pair_on="tenant")
    assert "_key" not in error.value.message and "request_id" in error.value.message


def test_integer_and_string_ids_match() -> None:
    base = requests_frame([1, 2], [0, 1])
    cand = requests_frame(["1", "2"], [0, 1])
    assert match_workloads(base, cand).verdict == "identical"


def test_default_tolerance_is_ten_ms() -> None:
    assert DEFAULT_ARRIVAL_TOLERANCE_NS == 10 * MS


# --------------------------------------------------------------------------- compare
def rows(comparison) -> dict[str, dict]:
    """The rows as reported (ms, with words), by ``metric.stat``."""
    return {f"{r['metric']}.{r['stat']}": r for r in display_rows(comparison)}


def test_rows_follow_the_contract() -> None:
    a = synthetic(120)
    result = compare(a, a, **FAST, candidate_label="cand.parquet")
    assert result.rows.schema == pl.Schema(ROW_SCHEMA)
    row = rows(result)["ttft.p99"]
    assert row["candidate"] == "cand.parquet" and row["unit"] == "ms"
    # the comparison itself keeps ns; only the reported row is in ms
    core = result.rows.filter(metric="ttft", stat="p99").row(0, named=True)
    assert core["unit"] == "ns" and core["baseline"] == pytest.approx(row["baseline"] * MS)
    assert row["better"] == "lower" and row["verdict"] == "no significant change"
    assert rows(result)["throughput.requests_per_s"]["unit"] == "req/s"
    assert rows(result)["throughput.output_tokens_per_s"]["unit"] == "tok/s"
    assert rows(result)["cancelled.fraction"]["unit"] == ""
    assert rows(result)["throughput.requests_per_s"]["better"] == "higher"
    assert result.seed == 0 and result.resamples == 200
    assert any("goodput" in note for note in comparison_notes(result))  # no targets: said so


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=hs.integers(12, 150), seed=hs.integers(0, 1000), cancelled=hs.integers(0, 5))
def test_compare_with_itself_finds_no_significant_change(n: int, seed: int, cancelled: int) -> None:
    a = synthetic(n, workload_seed=seed, latency_seed=seed + 1, cancelled=cancelled)
    result = compare(a, a, **FAST, seed=seed)
    assert result.workload.verdict == "identical"
    assert not result.rows.get_column("significant").any()
    ratios = result.rows.get_column("ratio").drop_nulls()
    assert (ratios == 1.0).all()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=hs.integers(0, 1000), same_workload=hs.booleans(), scale=hs.floats(0.7, 1.5))
def test_swapping_baseline_and_candidate_inverts_every_ratio(
    seed: int, same_workload: bool, scale: float
) -> None:
    a = synthetic(60, workload_seed=seed, latency_seed=1)
    b = synthetic(
        60 if same_workload else 50,
        workload_seed=seed if same_workload else seed + 9,
        latency_seed=2,
        queue_scale=scale,
        id_prefix="r" if same_workload else "x",
    )
    forward = rows(compare(a, b, **FAST, seed=seed))
    backward = rows(compare(b, a, **FAST, seed=seed))
    assert forward.keys() == backward.keys()
    for key, f in forward.items():
        g = backward[key]
        if f["ratio"] is None or not math.isfinite(f["ratio"]) or f["ratio"] == 0:
            continue
        assert f["ratio"] * g["ratio"] == pytest.approx(1.0, rel=1e-9), key
        if f["ci_low"] is not None and f["ci_low"] > 0 and math.isfinite(f["ci_high"]):
            assert f["ci_low"] * g["ci_high"] == pytest.approx(1.0, rel=1e-9), key
            assert f["ci_high"] * g["ci_low"] == pytest.approx(1.0, rel=1e-9), key
        assert f["significant"] == g["significant"], key
        if f["significant"]:
            assert {f["verdict"], g["verdict"]} == {"slower", "faster"}, key


def test_twenty_percent_ttft_slowdown_is_detected() -> None:
    base = synthetic(300)
    slow = synthetic(300, queue_scale=1.2, prefill_scale=1.2)  # same latency draws, x1.2
    result = compare(base, slow, **FAST)
    assert result.workload.paired
    by_key = rows(result)
    for stat in ("mean", "p50", "p90"):
        row = by_key[f"ttft.{stat}"]
        assert row["ratio"] == pytest.approx(1.2, rel=1e-3)
        assert row["ci_low"] == pytest.approx(1.2, rel=1e-3)
        assert row["verdict"] == "slower" and row["words"] == "1.20x slower"
        assert row["paired"] and row["method"] == "paired bootstrap"
    assert by_key["itl.mean"]["verdict"] == "no significant change"
    assert by_key["itl.mean"]["ratio"] == 1.0


def test_unpaired_slowdown_is_detected() -> None:
    base = synthetic(800, latency_seed=1)
    slow = synthetic(800, workload_seed=9, latency_seed=2, prefill_scale=1.6, id_prefix="x")
    result = compare(base, slow, **FAST)
    assert not result.workload.paired and result.workload.verdict == "different"
    assert rows(result)["prefill.p50"]["verdict"] == "slower"
    assert rows(result)["prefill.p50"]["method"] == "bootstrap"
    assert result.buckets is None
    assert any("not the policy" in w for w in comparison_warnings(result))


def test_min_change_filters_small_significant_changes() -> None:
    base = synthetic(300)
    slow = synthetic(300, queue_scale=1.03, prefill_scale=1.03)
    assert rows(compare(base, slow, **FAST))["ttft.mean"]["verdict"] == "no significant change"
    strict = compare(base, slow, **FAST, min_change=0.01)
    assert rows(strict)["ttft.mean"]["words"] == "1.03x slower"


def test_decomposition_adds_up_and_buckets_say_who_lost() -> None:
    base = synthetic(200)
    cand = synthetic(200, queue_scale=1.5, itl_scale=0.8)
    result = compare(base, cand, **FAST)
    parts = {r["component"]: r for r in result.decomposition.iter_rows(named=True)}
    total = sum(
        parts[c]["delta_mean_ns"] for c in ("queue_wait", "prefill", "decode", "delivery_tail")
    )
    assert total == pytest.approx(parts["e2e"]["delta_mean_ns"])
    assert parts["residual"]["delta_mean_ns"] == 0.0
    assert parts["prefill"]["delta_mean_ns"] == 0.0
    assert parts["queue_wait"]["delta_mean_ns"] > 0 > parts["decode"]["delta_mean_ns"]
    buckets = result.buckets
    assert buckets is not None
    assert set(buckets.get_column("dimension")) == {"prompt_tokens", "output_tokens"}
    assert buckets.filter(pl.col("dimension") == "prompt_tokens")["requests"].sum() == 200
    assert (buckets.get_column("delta_itl_ns") < 0).all()
    assert result.tradeoff is not None
    assert result.tradeoff.lost.spec.name == "ttft" and result.tradeoff.gained.spec.name == "itl"
    text = tradeoff_text(result.tradeoff, "candidate")
    # the largest significant opposite moves, named with their statistic
    assert text is not None and re.fullmatch(
        r"candidate trades \S+ \S+ of TTFT (mean|p\d+) for \S+ \S+ of ITL (mean|p\d+)", text
    ), text


def test_goodput_rows_with_targets() -> None:
    base = synthetic(200)
    slow = synthetic(200, queue_scale=3.0)
    targets = [GoodputTarget("ttft", "<=", 100 * MS)]
    result = compare(base, slow, **FAST, goodput=targets, metrics=["goodput"])
    by_key = rows(result)
    assert set(by_key) == {"goodput.requests_per_s", "goodput.fraction", "goodput.count"}
    assert by_key["goodput.fraction"]["verdict"] == "slower"
    assert by_key["goodput.fraction"]["words"].endswith("worse")


def test_small_samples_are_never_significant() -> None:
    base = synthetic(6)
    slow = synthetic(6, queue_scale=2.0, prefill_scale=2.0)
    result = compare(base, slow, **FAST, metrics=["ttft"])
    assert not result.rows.get_column("significant").any()
    assert any("too few" in w for w in comparison_warnings(result))


def test_all_zero_queue_wait_is_no_change() -> None:
    a = synthetic(40, queue_scale=0.0)  # admitted on arrival
    assert (a.requests["queue_wait_ns"] == 0).all()
    result = compare(a, a, **FAST, metrics=["queue_wait"])
    assert rows(result)["queue_wait.p50"]["ratio"] == 1.0
    assert not result.rows.get_column("significant").any()


def test_candidate_without_completed_requests() -> None:
    base = synthetic(30)
    none = synthetic(30, cancelled=30)
    result = compare(base, none, **FAST, metrics=["ttft", "cancelled"])
    by_key = rows(result)
    assert by_key["ttft.p50"]["candidate_value"] is None and by_key["ttft.p50"]["ratio"] is None
    assert by_key["cancelled.fraction"]["candidate_value"] == 1.0
    assert any("no completed requests" in w for w in comparison_warnings(result))


def test_bad_metric_or_statistic_lists_every_problem() -> None:
    a = synthetic(20)
    with pytest.raises(UsageError) as error:
        compare(a, a, metrics=["ttfx", "itl"], stats=["p99", "q50"])
    assert "ttfx" in error.value.message and "q50" in error.value.message
    assert "did you mean 'ttft'" in error.value.message
    with pytest.raises(UsageError, match="resamples"):
        compare(a, a, resamples=10)


def test_same_seed_same_result() -> None:
    a, b = synthetic(80), synthetic(80, latency_seed=5)
    assert compare(a, b, **FAST, seed=3).rows.equals(compare(a, b, **FAST, seed=3).rows)


# --------------------------------------------------------------------------- pipeline
def test_compare_through_the_pipeline() -> None:
    from tests.conftest import events, make_request

    def trace(extra_queue_ms: float) -> pl.DataFrame:
        requests = []
        for i in range(40):
            t = i * 100.0
            admit = t + 5 + extra_queue_ms + (i % 7)
            first = admit + 20 + (i % 5)
            ticks = [first + 10 * k for k in range(1, 6)]
            requests.append(
                make_request(
                    f"q{i}",
                    arrival=t,
                    admission=admit,
                    first=first,
                    ticks=ticks,
                    complete=ticks[-1],
                    prompt_tokens=100 + i,
                )
            )
        return events(*requests)

    base = analyze_events(trace(0))
    slow = analyze_events(trace(30))
    result = compare(base, slow, **FAST, baseline_label="base", candidate_label="slow")
    assert result.workload.verdict == "identical"
    by_key = rows(result)
    assert by_key["queue_wait.mean"]["verdict"] == "slower"
    assert by_key["ttft.p50"]["verdict"] == "slower"
    assert by_key["itl.mean"]["ratio"] == pytest.approx(1.0)
    assert by_key["itl.mean"]["verdict"] == "no significant change"


def test_streamed_analysis_without_gap_samples(tmp_path) -> None:
    """A streamed analysis keeps no gap rows: ITL is skipped with a note, not a crash."""
    full = synthetic(50)
    batched = streamed(synthetic_events(50), tmp_path)
    assert batched.gaps.height == 0 and batched.requests.height == 50
    result = compare(full, batched, resamples=200, metrics=["itl", "ttft"])
    assert set(result.rows.get_column("metric")) == {"ttft"}
    assert result.skipped[0].metric == "itl" and result.skipped[0].stat is None
    assert any("itl skipped: no per-gap samples" in n for n in comparison_notes(result))
    # the same requests: every TTFT statistic agrees exactly with the in-memory analysis
    assert (result.rows["ratio"] == 1.0).all()


def test_client_side_traces_skip_queue_wait() -> None:
    """Without admissions (a client-side trace) queue wait is unavailable, not zero."""
    frame = synthetic_events(30).filter(pl.col("event") != "admission")
    frame = frame.filter(pl.col("event") != "preemption")
    a = analyze_events(frame)
    result = compare(a, a, resamples=200, metrics=["queue_wait", "ttft"])
    assert set(result.rows.get_column("metric")) == {"ttft"}
    assert result.skipped[0].reason == "no completed request has a queue_wait in either trace"


def test_rates_are_the_summary_numbers_by_hand() -> None:
    # 20 requests, arrivals 0, 100, …, 1900 ms; each queued 40 ms, prefilled 60 ms,
    # decoded 90 ms: the last completes at 1900 + 190 = 2090 ms, so the window is
    # 2.09 s: 20 / 2.09 req/s, 200 output tokens / 2.09 s, and with the prompts
    # (100 + 110 + … + 290 = 3900) 4100 / 2.09 total tok/s.
    a = constant_trace(60)
    result = compare(a, a, resamples=200, metrics=["throughput", "ttft"], stats=["mean"])
    by_key = rows(result)
    assert by_key["throughput.requests_per_s"]["baseline"] == pytest.approx(20 / 2.09)
    assert by_key["throughput.output_tokens_per_s"]["baseline"] == pytest.approx(200 / 2.09)
    assert by_key["throughput.total_tokens_per_s"]["baseline"] == pytest.approx(4100 / 2.09)
    # exactly what the analysis summary reports, not a definition of compare's own
    for stat in ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s"):
        assert by_key[f"throughput.{stat}"]["baseline"] == a.summary.throughput[stat]
    assert by_key["ttft.mean"]["baseline"] == 100.0


def test_check_and_compare_read_the_reported_statistics() -> None:
    """metric_value (check, compare) and the analysis summary (analyze's JSON) are one
    computation: the same bits for every statistic they share."""
    a = synthetic(150, cancelled=4)
    for metric in ("ttft", "itl", "tpot", "e2e"):
        reported = a.summary.metrics[metric]
        for stat in ("mean", "std", "p50", "p99", "max"):
            assert metric_value(a, metric, stat) == reported[stat], (metric, stat)
