"""Censoring-aware latency of a whole trace: the censoring rules, and lifelines' KM."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.result import AnalysisOptions
from servetrace.render.summary import render_json, report_dict
from tests.conftest import MS, events, make_request

lifelines = pytest.importorskip("lifelines")
qth_survival_time = pytest.importorskip("lifelines.utils").qth_survival_time


def _trace(seed: int = 0, n: int = 300):
    """Requests of five fates, with the durations each metric should see (ms)."""
    rng = np.random.default_rng(seed)
    rows, expected = [], {"ttft": [], "e2e": [], "queue_wait": []}
    end = 0.0
    fates = rng.choice(
        ["done", "cancel_queued", "cancel_prefill", "cancel_decode", "flying"],
        n,
        p=[0.6, 0.1, 0.1, 0.1, 0.1],
    )
    arrivals = np.sort(rng.uniform(0, 5000, n)).round(3)
    plan = []
    for i, (fate, a) in enumerate(zip(fates, arrivals, strict=True)):
        q = float(rng.exponential(200)).__round__(3) + 0.5
        p = float(rng.uniform(20, 80)).__round__(3)
        first = a + q + p
        ticks = [first + 10 * (k + 1) for k in range(int(rng.integers(1, 20)))]
        last = ticks[-1]
        rid = f"r{i:03d}"
        if fate == "done":
            rows.append(
                make_request(
                    rid, arrival=a, admission=a + q, first=first, ticks=ticks, complete=last
                )
            )
            plan.append(
                (a, {"ttft": (q + p, True), "e2e": (last - a, True), "queue_wait": (q, True)})
            )
            end = max(end, last)
        elif fate == "cancel_queued":
            c = a + q / 2
            rows.append(make_request(rid, arrival=a, cancel=c))
            plan.append(
                (a, {"ttft": (c - a, False), "e2e": (c - a, False), "queue_wait": (c - a, False)})
            )
            end = max(end, c)
        elif fate == "cancel_prefill":
            c = a + q + p / 2
            rows.append(make_request(rid, arrival=a, admission=a + q, cancel=c))
            plan.append(
                (a, {"ttft": (c - a, False), "e2e": (c - a, False), "queue_wait": (q, True)})
            )
            end = max(end, c)
        elif fate == "cancel_decode":
            c = ticks[0] + 1
            rows.append(
                make_request(
                    rid, arrival=a, admission=a + q, first=first, ticks=ticks[:1], cancel=c
                )
            )
            plan.append(
                (a, {"ttft": (q + p, True), "e2e": (c - a, False), "queue_wait": (q, True)})
            )
            end = max(end, c)
        else:  # in flight: some before their first token, some after, some still queued
            stage = i % 3
            if stage == 0:
                rows.append(make_request(rid, arrival=a))
                plan.append((a, {"ttft": None, "e2e": None, "queue_wait": None}))
            elif stage == 1:
                rows.append(make_request(rid, arrival=a, admission=a + q))
                plan.append((a, {"ttft": None, "e2e": None, "queue_wait": (q, True)}))
                end = max(end, a + q)
            else:
                rows.append(make_request(rid, arrival=a, admission=a + q, first=first))
                plan.append((a, {"ttft": (q + p, True), "e2e": None, "queue_wait": (q, True)}))
                end = max(end, first)
            end = max(end, a)
    for a, durations in plan:  # None: censored at the end of the trace
        for metric, value in durations.items():
            expected[metric].append(value if value is not None else (end - a, False))
    return events(*rows), expected


@pytest.mark.parametrize("seed", [0, 1])
def test_equals_lifelines_on_a_trace_with_cancellations_and_in_flight(seed: int) -> None:
    frame, expected = _trace(seed)
    summary = analyze_events(frame, AnalysisOptions()).summary
    assert summary.outcomes["cancelled"] and summary.outcomes["in_flight"]
    assert summary.survival is not None
    for metric, pairs in expected.items():
        durations = np.array([round(d * MS) for d, _ in pairs], dtype=np.float64)
        observed = np.array([o for _, o in pairs])
        fit = summary.survival[metric]
        assert (fit["events"], fit["censored"]) == (observed.sum(), (~observed).sum()), metric
        kmf = lifelines.KaplanMeierFitter().fit(durations, observed)
        for stat, q in {"p50": 0.5, "p90": 0.9, "p99": 0.99}.items():
            theirs = qth_survival_time(1 - q, kmf.survival_function_)
            if np.isinf(theirs):
                assert fit[stat] is None and stat in fit["unreached"]
            else:
                assert fit[stat] == pytest.approx(theirs, abs=1e-9), (metric, stat)
        assert fit["completed_only"]["p99"] == summary.metrics[metric]["p99"]


def test_json_block_and_the_named_bias() -> None:
    # Fast requests complete; the two slow ones are cancelled while queued: completed-only
    # TTFT p50 (10 ms) understates the censored estimate.
    rows = [
        make_request("a", arrival=0, admission=5, first=10, complete=12),
        make_request("b", arrival=0, admission=5, first=10, complete=12),
        make_request("c", arrival=0, admission=5, first=30, complete=32),
        make_request("d", arrival=0, admission=50, first=60, complete=62),
        make_request("e", arrival=0, cancel=100),
    ]
    summary = analyze_events(events(*rows), AnalysisOptions()).summary
    report = json.loads(render_json(report_dict(summary, ("t",))))
    ttft = report["survival"]["ttft"]
    # S: 10 ms → 3/5, 30 → 2/5, 60 → 1/5; then e censored at 100: p90 and p99 unreachable
    assert ttft["estimator"] == "kaplan-meier" and ttft["unit"] == "ms"
    assert (ttft["events"], ttft["censored"], ttft["censored_cancelled"]) == (4, 1, 1)
    assert (ttft["p50"], ttft["p90"], ttft["p99"]) == (30.0, None, None)
    assert ttft["completed_only"]["p50"] == 20.0  # linear: (10 + 30) / 2
    assert ttft["understatement"]["p50"] == pytest.approx(1 / 3)
    assert "never drops to 0.1: it stops at 0.2" in ttft["null_reasons"]["p90"]
    from servetrace.render.survival import survival_lines

    (line, *_) = survival_lines(summary.survival)
    assert "completed-only ttft p50 understates the censored estimate by 33%" in line


def test_streamed_equals_in_memory(tmp_path) -> None:
    from servetrace.analysis.streaming import analyze_streaming
    from servetrace.sources.canonical import read_events

    frame, _ = _trace(2, n=120)
    path = tmp_path / "t.parquet"
    frame.sort("ts", maintain_order=True).write_parquet(path)
    whole = analyze_events(frame, AnalysisOptions()).summary
    streamed = analyze_streaming(read_events([str(path)]), batch_rows=1000).summary
    assert streamed.survival == whole.survival
    # every gap fits the exact budget: the ITL interval too equals the in-memory one
    assert streamed.intervals == whole.intervals
    assert whole.intervals["itl"]["intervals"]["p50"] is not None


def test_batched_engines_give_the_itl_interval_while_gaps_are_exact(tmp_path) -> None:
    """The streamed and partitioned engines give ITL its order-statistic
    interval whenever their pooled gaps are exact (also per --by group); beyond the
    budget (a log histogram) the interval is null with the reason."""
    from servetrace.analysis import memory
    from servetrace.analysis.partitioned import analyze_partitioned
    from servetrace.analysis.streaming import analyze_streaming
    from servetrace.render.survival import ci95_dict
    from servetrace.sources.canonical import read_events

    frame, _ = _trace(3, n=150)
    frame = frame.with_columns(
        policy=pl.when(pl.col("request_id").str.slice(-1).cast(pl.Int64) % 2 == 0)
        .then(pl.lit("a"))
        .otherwise(pl.lit("b"))
    )
    path = tmp_path / "t.parquet"
    frame.sort("ts", maintain_order=True).write_parquet(path)
    whole = analyze_events(frame, AnalysisOptions())
    gaps = whole.summary.metrics["itl"]["count"]
    assert gaps > 100
    by_memory = memory.summarize_by(whole, "policy")
    for engine in (analyze_streaming, analyze_partitioned):
        got = engine(read_events([str(path)]), batch_rows=200)
        assert got.summary.intervals["itl"] == whole.summary.intervals["itl"], engine
        assert ci95_dict(got.summary.intervals["itl"])["p50"] is not None
        assert got.gaps.height == gaps  # the in-memory gap frame, keyed trace-wide
        by = engine(read_events([str(path)]), batch_rows=200, by="policy")
        for value, summary in memory.summarize_by(by, "policy").items():
            assert summary.intervals["itl"] == by_memory[value].intervals["itl"], value
            assert summary.metrics["itl"] == by_memory[value].metrics["itl"], value
        spilled = engine(read_events([str(path)]), batch_rows=200, exact_gaps=gaps // 2)
        block = ci95_dict(spilled.summary.intervals["itl"])
        assert block is not None and block["p50"] is None
        assert "log histogram" in block["null_reasons"]["p50"]
        assert spilled.gaps.height == 0


def test_a_request_that_errors_before_admission_is_left_out_of_queue_wait() -> None:
    # Only a request still queued at the end ("late") is censored there: one that
    # logged an error before it was admitted is neither observed nor in flight.
    rows = [
        make_request("a", arrival=0, admission=5, first=10, complete=12),
        make_request("b", arrival=0, admission=20, first=30, complete=32),
        [
            *make_request("failed", arrival=1),
            {"request_id": "failed", "event": "error", "ts": 3 * MS},
        ],
        make_request("late", arrival=400),
    ]
    summary = analyze_events(events(*rows), AnalysisOptions()).summary
    assert summary.outcomes["errored"] == 1
    queue = summary.survival["queue_wait"]
    assert (queue["events"], queue["censored"], queue["censored_in_flight"]) == (2, 1, 1)
