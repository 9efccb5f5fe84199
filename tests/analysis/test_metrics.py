"""Per-request metrics pinned with hand-computed numbers (DESIGN §4)."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.analysis.memory import analyze_events
from tests.conftest import MS, events, make_request


def one(frame: pl.DataFrame) -> dict:
    analysis = analyze_events(frame)
    assert analysis.requests.height == 1
    return analysis.requests.row(0, named=True)


def test_worked_example_by_hand(worked_example: pl.DataFrame) -> None:
    # arrival 0, admission 30, first token 80, 100 more tokens 5 ms apart, last at 580.
    r = one(worked_example)
    assert r["outcome"] == "completed"
    assert r["queue_wait_ns"] == 30 * MS
    assert r["prefill_ns"] == 50 * MS
    assert r["ttft_ns"] == 80 * MS
    assert r["decode_ns"] == 500 * MS
    assert r["response_ns"] == 580 * MS
    assert r["e2e_ns"] == 580 * MS
    assert r["delivery_tail_ns"] == 0
    assert r["itl_mean_ns"] == 5 * MS
    assert r["itl_max_ns"] == 5 * MS
    assert r["tpot_ns"] == 5 * MS  # 500 ms / (101 - 1)
    assert r["output_tokens"] == 101
    assert r["ticks"] == 101
    assert r["prompt_tokens"] == 512
    # T_response = TTFT + (N-1)·ITL = 80 + 100·5 = 580: the formula holds exactly.
    assert r["formula_residual_ns"] == 0


def test_worked_example_summary(worked_example: pl.DataFrame) -> None:
    summary = analyze_events(worked_example).summary
    itl = summary.metrics["itl"]
    assert itl["count"] == 100
    assert itl["p50"] == itl["p99"] == 5 * MS
    assert summary.metrics["ttft"]["mean"] == 80 * MS
    # window 0..580 ms: 1 request, 101 tokens
    assert summary.throughput["window_s"] == pytest.approx(0.58)
    assert summary.throughput["requests_per_s"] == pytest.approx(1 / 0.58)
    assert summary.throughput["output_tokens_per_s"] == pytest.approx(101 / 0.58)
    assert summary.throughput["total_tokens_per_s"] == pytest.approx((101 + 512) / 0.58)
    # queued 0..30, running 30..580 over a 580 ms window
    assert summary.concurrency["queued_mean"] == pytest.approx(30 / 580)
    assert summary.concurrency["running_mean"] == pytest.approx(550 / 580)
    assert summary.concurrency["in_system_peak"] == 1
    assert summary.formula.per_request.within_tolerance == 1
    assert summary.formula.fleet_itl_ns == pytest.approx(5 * MS)


def test_multi_token_chunks_break_the_formula_by_the_missing_steps() -> None:
    # 3 ticks carrying 1, 2, 2 tokens: N = 5, ticks 10 ms apart.
    frame = events(
        make_request("a", admission=0, first=10, ticks=[20, 30], tokens=[1, 2, 2], complete=31)
    )
    r = one(frame)
    assert r["output_tokens"] == 5
    assert r["itl_mean_ns"] == 10 * MS  # gap between chunks
    assert r["tpot_ns"] == pytest.approx(20 * MS / 4)  # decode / (N - 1)
    assert r["delivery_tail_ns"] == 1 * MS
    # response 30 = ttft 10 + (5-1)·10 + residual  →  residual = -20 ms
    assert r["formula_residual_ns"] == pytest.approx(-20 * MS)


def test_reported_output_tokens_are_authoritative() -> None:
    frame = events(
        make_request("a", admission=0, first=10, ticks=[20], complete=20, output_tokens=7)
    )
    r = one(frame)
    assert r["output_tokens"] == 7
    assert r["ticks"] == 2
    assert r["tpot_ns"] == pytest.approx(10 * MS / 6)


def test_single_token_output_has_no_itl_or_tpot() -> None:
    r = one(events(make_request("a", admission=5, first=10, complete=10)))
    assert r["ttft_ns"] == 10 * MS
    assert r["decode_ns"] == 0
    assert r["tpot_ns"] is None
    assert r["itl_mean_ns"] is None
    assert r["itl_max_ns"] is None
    assert r["formula_residual_ns"] == 0


def test_preemption_and_requeue() -> None:
    # queued 0-10, running 10-20 (first token 15), preempted at 20, re-admitted at 50,
    # tokens 60 and 70, done at 70.
    frame = events(
        make_request("p", admission=[10, 50], preempt=[20], first=15, ticks=[60, 70], complete=70)
    )
    r = one(frame)
    assert r["preemptions"] == 1
    assert r["requeued_ns"] == 30 * MS
    assert r["queue_wait_ns"] == 10 * MS  # first admission only
    assert r["ttft_ns"] == 15 * MS
    assert r["itl_max_ns"] == 45 * MS
    summary = analyze_events(frame).summary
    # queued 0-10 and 20-50 = 40 of 70 ms; running 10-20 and 50-70 = 30 of 70.
    assert summary.concurrency["queued_mean"] == pytest.approx(40 / 70)
    assert summary.concurrency["running_mean"] == pytest.approx(30 / 70)


@pytest.mark.parametrize(
    ("name", "request_rows", "state", "reached"),
    [
        ("cancel_while_queued", make_request("c", cancel=40), "queued", "queue_wait"),
        ("cancel_in_prefill", make_request("c", admission=10, cancel=40), "prefill", "prefill"),
        (
            "cancel_in_decode",
            make_request("c", admission=10, first=20, ticks=[30], cancel=40),
            "decode",
            "ttft",
        ),
        (
            "cancel_while_requeued",
            make_request("c", admission=10, first=20, preempt=[25], cancel=40),
            "queued",
            "ttft",
        ),
    ],
)
def test_cancellation_reports_its_state(name, request_rows, state, reached) -> None:
    # A second, completed request keeps the trace from being only a cancellation.
    frame = events(request_rows, make_request("ok", admission=1, first=2, complete=2))
    analysis = analyze_events(frame)
    r = analysis.requests.filter(pl.col("request_id") == "c").row(0, named=True)
    assert r["outcome"] == "cancelled"
    assert r["cancelled_in"] == state
    assert r["e2e_ns"] == 40 * MS
    if state == "queued" and reached == "queue_wait":
        # DESIGN §4: cancelled while queued has a queue wait (arrival → cancel), no TTFT
        assert r["queue_wait_ns"] == 40 * MS and r["ttft_ns"] is None
    if state == "prefill":
        assert r["queue_wait_ns"] == 10 * MS and r["ttft_ns"] is None
    if reached == "ttft":
        assert r["ttft_ns"] == 20 * MS
    summary = analysis.summary
    assert summary.cancelled_in[state] == 1
    assert summary.outcomes == {"completed": 1, "cancelled": 1, "in_flight": 0, "errored": 0}
    # latency statistics describe completed requests only
    assert summary.metrics["ttft"]["count"] == 1


def test_in_flight_requests_are_censored_not_invalid() -> None:
    frame = events(
        make_request("done", admission=0, first=5, complete=5),
        make_request("busy", admission=1, first=10, ticks=[20]),
    )
    analysis = analyze_events(frame)
    busy = analysis.requests.filter(pl.col("request_id") == "busy").row(0, named=True)
    assert busy["outcome"] == "in_flight"
    assert busy["e2e_ns"] is None
    assert busy["ttft_ns"] == 10 * MS
    assert analysis.summary.accounting.requests_invalid == 0
    assert analysis.summary.in_flight["count"] == 1
    assert analysis.summary.in_flight["output_tokens_delivered"] == 2


def test_client_trace_without_admissions_has_no_queue_wait() -> None:
    frame = events(make_request("a", first=40, ticks=[48, 56], complete=56))
    r = one(frame)
    assert r["queue_wait_ns"] is None and r["prefill_ns"] is None
    assert r["ttft_ns"] == 40 * MS
    summary = analyze_events(frame).summary
    assert summary.concurrency["queued_mean"] is None
    assert summary.concurrency["in_system_mean"] == pytest.approx(1.0)


def test_request_level_import_uses_completion_as_last_token() -> None:
    frame = events(make_request("a", first=40, complete=240, output_tokens=11)).with_columns(
        pl.lit(False).alias("ticks_available")
    )
    r = one(frame)
    assert r["decode_ns"] == 200 * MS
    assert r["tpot_ns"] == pytest.approx(20 * MS)
    assert r["itl_mean_ns"] is None and r["itl_max_ns"] is None
    analysis = analyze_events(frame)
    assert analysis.gaps.height == 0
    assert analysis.summary.metrics["itl"]["count"] == 0


def test_attributes_are_carried_to_requests() -> None:
    frame = events(make_request("a", admission=0, first=1, complete=1, policy="fcfs"))
    assert one(frame)["policy"] == "fcfs"


def test_goodput_counts_requests_meeting_every_target() -> None:
    from servetrace.analysis.result import AnalysisOptions
    from servetrace.analysis.summary import GoodputTarget

    frame = events(
        make_request("fast", admission=0, first=100, ticks=[110], complete=110),
        make_request("slow", admission=0, first=300, ticks=[310], complete=310),
        make_request("choppy", admission=0, first=100, ticks=[200], complete=200),
    )
    targets = (GoodputTarget("ttft", "<=", 200 * MS), GoodputTarget("tpot", "<=", 50 * MS))
    summary = analyze_events(frame, AnalysisOptions(goodput=targets)).summary
    assert summary.goodput is not None
    assert summary.goodput["requests_met"] == 1
    assert summary.goodput["fraction"] == pytest.approx(1 / 3)
    assert summary.throughput["goodput_requests_per_s"] == pytest.approx(1 / 0.310)


def test_cancelled_after_a_preemption_and_readmission_was_in_decode() -> None:
    # Tokens at 20 and 30, preempted at 40, admitted again at 50, cancelled at 60 before
    # its next token: it had reached its first token, so it was cancelled in decode (not
    # prefill, though it was running without a token since its re-admission).
    frame = events(
        make_request("r", admission=[10, 50], first=20, ticks=[30], preempt=[40], cancel=60)
    )
    r = one(frame)
    assert r["outcome"] == "cancelled"
    assert r["cancelled_in"] == "decode"
    assert r["preemptions"] == 1 and r["requeued_ns"] == 10 * MS


def test_a_request_without_a_ticks_available_value_has_real_ticks() -> None:
    # A request-level import (ticks_available false) joined with a canonical log whose
    # rows carry no value: the canonical request keeps its per-tick figures.
    frame = events(
        make_request("imported", first=10, complete=50, output_tokens=5),
        make_request("canonical", arrival=100, first=110, ticks=[120, 140], complete=140),
    ).with_columns(pl.when(pl.col("request_id") == "imported").then(False).alias("ticks_available"))
    rows = {r["request_id"]: r for r in analyze_events(frame).requests.iter_rows(named=True)}
    assert rows["canonical"]["itl_mean_ns"] == 15 * MS  # (140 - 110) / 2 gaps
    assert rows["canonical"]["itl_max_ns"] == 20 * MS
    assert rows["imported"]["itl_mean_ns"] is None and rows["imported"]["itl_max_ns"] is None


def test_a_request_level_import_reads_its_last_token_time() -> None:
    # Stream closed at 90 ms, last token logged at 70: response and decode end at the
    # last token, and the 20 ms between it and the close is the delivery tail.
    frame = events(make_request("a", first=10, complete=90, output_tokens=4)).with_columns(
        pl.lit(False).alias("ticks_available"), pl.lit(70 * MS).alias("last_token_ns")
    )
    r = one(frame)
    assert r["response_ns"] == 70 * MS
    assert r["decode_ns"] == 60 * MS
    assert r["delivery_tail_ns"] == 20 * MS
    assert r["tpot_ns"] == 20 * MS  # 60 ms over N - 1 = 3


def test_every_duration_is_measured_from_the_request_own_arrival() -> None:
    # Arrival at 1000 ms (not 0, where "- arrival" and "+ arrival" agree): admission
    # 1030, first token 1080, ticks 1090 and 1100, completion 1110.
    r = one(
        events(
            make_request(
                "a", arrival=1000, admission=1030, first=1080, ticks=[1090, 1100], complete=1110
            )
        )
    )
    assert r["queue_wait_ns"] == 30 * MS
    assert r["prefill_ns"] == 50 * MS
    assert r["ttft_ns"] == 80 * MS
    assert r["decode_ns"] == 20 * MS
    assert r["response_ns"] == 100 * MS
    assert r["e2e_ns"] == 110 * MS
    assert r["delivery_tail_ns"] == 10 * MS
    # nothing preempted: counted as 0 and 0 ns requeued, not unknown
    assert r["preemptions"] == 0 and r["requeued_ns"] == 0


def test_a_request_cancelled_in_the_queue_has_no_ticks_counted_as_zero() -> None:
    frame = events(
        make_request("q", arrival=500, cancel=540),
        make_request("s", arrival=0, admission=1, first=2, complete=2),
    )
    rows = {r["request_id"]: r for r in analyze_events(frame).requests.iter_rows(named=True)}
    q = rows["q"]
    assert q["outcome"] == "cancelled" and q["cancelled_in"] == "queued"
    assert q["queue_wait_ns"] == 40 * MS  # waited from 500 until its cancellation at 540
    assert q["ticks"] == 0 and q["output_tokens"] == 0 and q["preemptions"] == 0


def test_a_request_level_import_has_no_longest_gap() -> None:
    # Two tick rows of an export without per-token times (first token, then the other 3
    # tokens at stream close): the 40 ms between them is not an inter-token gap.
    frame = events(
        make_request("a", first=10, ticks=[50], tokens=[1, 3], complete=50, output_tokens=4)
    ).with_columns(pl.lit(False).alias("ticks_available"))
    r = one(frame)
    assert r["itl_max_ns"] is None and r["itl_mean_ns"] is None
    assert r["decode_ns"] == 40 * MS and r["tpot_ns"] == pytest.approx(40 * MS / 3)


def test_a_trace_without_output_token_counts_counts_its_ticks() -> None:
    frame = events(make_request("a", first=10, ticks=[20], tokens=[1, 2], complete=20))
    r = one(frame.drop("output_tokens"))
    assert r["output_tokens"] == 3 and r["ticks"] == 2


def test_a_two_token_answer_meets_the_formula_exactly() -> None:
    # TTFT 10 ms, one gap of 30 ms: T_response = TTFT + (2 - 1) · 30 = 40, residual 0.
    r = one(events(make_request("a", first=10, ticks=[40], complete=40)))
    assert r["output_tokens"] == 2 and r["itl_mean_ns"] == 30 * MS
    assert r["formula_residual_ns"] == 0


def test_a_trace_without_prompt_lengths_has_a_typed_empty_column() -> None:
    analysis = analyze_events(
        events(make_request("a", first=10, complete=10)).drop("prompt_tokens")
    )
    assert analysis.requests["prompt_tokens"].to_list() == [None]
    assert analysis.requests.schema["prompt_tokens"] == pl.Int64


def test_requests_come_in_arrival_order_ties_by_id() -> None:
    frame = events(
        make_request("c", arrival=10, first=11, complete=11),
        make_request("b", arrival=0, first=1, complete=1),
        make_request("a", arrival=10, first=12, complete=12),
    )
    assert analyze_events(frame).requests["request_id"].to_list() == ["b", "a", "c"]


def test_only_completed_requests_gaps_are_pooled_into_itl() -> None:
    # Completed: gaps 10 and 20 ms. Cancelled after ticks 5 ms apart: not in the pool.
    frame = events(
        make_request("done", first=10, ticks=[20, 40], complete=40),
        make_request("gone", arrival=0, first=10, ticks=[15, 20], cancel=25),
    )
    itl = analyze_events(frame).summary.metrics["itl"]
    assert itl["count"] == 2
    assert itl["min"] == 10 * MS and itl["max"] == 20 * MS


def test_the_gap_frame_is_the_completed_requests_gaps_in_tick_order() -> None:
    from dataclasses import replace

    from servetrace.analysis.lifecycle import KEY, build_timeline
    from servetrace.analysis.metrics import gap_frame, request_metrics
    from servetrace.dtypes import EVENT_DTYPE

    # Interleaved: a completed request (gaps 10, 20 ms), a cancelled one between two
    # completed ones in key order, and a one-token answer (no gap).
    frame = events(
        make_request("a", first=10, ticks=[20, 40], complete=40),
        make_request("b", first=12, ticks=[15, 18], cancel=25),
        make_request("c", arrival=1, first=11, ticks=[16], complete=16),
        make_request("d", arrival=2, first=30, complete=30),
    ).with_columns(pl.col("event").cast(EVENT_DTYPE))
    timeline = build_timeline(frame, [])
    requests = request_metrics(timeline, [])
    gaps = gap_frame(timeline, requests)
    ids = dict(timeline.requests.select(KEY, "request_id").iter_rows())
    assert [(ids[k], v) for k, v in gaps.iter_rows()] == [
        ("a", 10 * MS),
        ("a", 20 * MS),
        ("c", 5 * MS),
    ]
    # A timeline whose requests are not in key order takes the per-tick lookup: same rows.
    shuffled = replace(timeline, requests=timeline.requests.reverse())
    assert gap_frame(shuffled, requests).rows() == gaps.rows()
