"""Trace-level summary, hand-computed on a four-request trace (times in ms).

```
r1  arrival 0    admission 10   first 30   ticks 40 50        complete 50    prompt 100
r2  arrival 20   admission 40   first 100  ticks 120 140 160  complete 170   prompt 50
r3  arrival 30   (queued)                                     cancel 60      prompt 10
r4  arrival 100  admission 110  first 130  (in flight at the end, 170)       prompt 5
```
"""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.result import AnalysisOptions
from servetrace.analysis.summary import GoodputTarget, Summary, summarize
from servetrace.errors import UsageError
from tests.conftest import MS, events, make_request

TARGETS = (GoodputTarget("ttft", "<=", 50 * MS), GoodputTarget("tpot", "<=", 25 * MS))


def four_requests() -> pl.DataFrame:
    return events(
        make_request(
            "r1", arrival=0, admission=10, first=30, ticks=[40, 50], complete=50, prompt_tokens=100
        ),
        make_request(
            "r2",
            arrival=20,
            admission=40,
            first=100,
            ticks=[120, 140, 160],
            complete=170,
            prompt_tokens=50,
        ),
        make_request("r3", arrival=30, cancel=60, prompt_tokens=10),
        make_request("r4", arrival=100, admission=110, first=130, prompt_tokens=5),
    )


@pytest.fixture(scope="module")
def summary() -> Summary:
    return analyze_events(four_requests(), AnalysisOptions(goodput=TARGETS)).summary


def test_outcomes_and_accounting(summary: Summary) -> None:
    assert summary.outcomes == {"completed": 2, "cancelled": 1, "in_flight": 1, "errored": 0}
    assert summary.cancelled_in == {
        "queued": 1,
        "prefill": 0,
        "decode": 0,
        "before_first_token": 0,
        "unknown": 0,
    }
    a = summary.accounting
    assert (a.rows, a.rows_analyzed, a.rows_quarantined) == (18, 18, 0)
    assert (a.requests, a.requests_valid, a.requests_invalid) == (4, 4, 0)
    assert summary.violations == {} and summary.leaked_state is None


def test_latencies_describe_completed_requests_only(summary: Summary) -> None:
    # ttft of r1, r2: 30, 80 ms (r4's 30 ms is in flight: censored, not counted)
    ttft = summary.metrics["ttft"]
    assert (ttft["count"], ttft["mean"], ttft["min"], ttft["max"]) == (2, 55 * MS, 30 * MS, 80 * MS)
    assert ttft["p90"] == pytest.approx(75 * MS)  # 30 + 0.9 · 50
    # itl pools r1's gaps 10, 10 and r2's 20, 20, 20: mean 16, p50 20
    itl = summary.metrics["itl"]
    assert (itl["count"], itl["mean"], itl["p50"]) == (5, 16 * MS, 20 * MS)
    assert itl["std"] == pytest.approx(24**0.5 * MS)  # deviations −6,−6,4,4,4 → var 24
    assert summary.metrics["tpot"]["mean"] == 15 * MS  # (10 + 20) / 2
    assert summary.metrics["delivery_tail"]["max"] == 10 * MS  # r2: 170 − 160
    assert summary.tokens["output_tokens"]["mean"] == 3.5  # 3 and 4
    assert summary.tokens["prompt_tokens"]["mean"] == 75  # 100 and 50


def test_throughput_window_is_first_arrival_to_last_terminal(summary: Summary) -> None:
    t = summary.throughput
    assert t["window_s"] == pytest.approx(0.170)  # 0 → 170 ms
    assert t["requests_per_s"] == pytest.approx(2 / 0.17)  # completed only
    assert t["output_tokens_per_s"] == pytest.approx(7 / 0.17)  # 3 + 4
    assert t["total_tokens_per_s"] == pytest.approx((7 + 150) / 0.17)  # + prompts 100, 50
    assert t["goodput_requests_per_s"] == pytest.approx(1 / 0.17)


def test_goodput_and_attainment_by_target(summary: Summary) -> None:
    """r1 meets both (ttft 30, tpot 10); r2 misses ttft (80) but meets tpot (20)."""
    g = summary.goodput
    assert g is not None
    assert g["targets"] == ["ttft<=50ms", "tpot<=25ms"]
    assert (g["requests_met"], g["requests_completed"], g["fraction"]) == (1, 2, 0.5)
    assert g["attainment_by_target"] == {"ttft<=50ms": 0.5, "tpot<=25ms": 1.0}


def test_goodput_ops_and_missing_metric() -> None:
    trace = four_requests()
    strict = (GoodputTarget("ttft", "<", 30 * MS),)  # r1's ttft is exactly 30: not < 30
    g = analyze_events(trace, AnalysisOptions(goodput=strict)).summary.goodput
    assert g is not None and g["requests_met"] == 0
    above = (GoodputTarget("ttft", ">=", 80 * MS),)
    g = analyze_events(trace, AnalysisOptions(goodput=above)).summary.goodput
    assert g is not None and g["requests_met"] == 1
    over = (GoodputTarget("ttft", ">", 30 * MS),)  # only r2 (80 ms); r1's 30 is not > 30
    g = analyze_events(trace, AnalysisOptions(goodput=over)).summary.goodput
    assert g is not None and g["requests_met"] == 1 and g["targets"] == ["ttft>30ms"]
    one_token = events(make_request("a", admission=1, first=2, complete=2))
    with pytest.raises(UsageError, match="no completed request has a tpot"):
        analyze_events(one_token, AnalysisOptions(goodput=(TARGETS[1],)))


def test_concurrency_is_time_weighted_over_the_trace(summary: Summary) -> None:
    """Over 0 → 170 ms. in system: r1 50 + r2 150 + r3 30 + r4 70 = 300 ms·req, peak 3
    (30–50: r1, r2, r3). queued: 10 + 20 + 30 + 10 = 70, peak 2 (30–40: r2, r3).
    running: r1 40 + r2 130 + r4 60 = 230, peak 2."""
    c = summary.concurrency
    assert c["in_system_mean"] == pytest.approx(300 / 170)
    assert c["queued_mean"] == pytest.approx(70 / 170)
    assert c["running_mean"] == pytest.approx(230 / 170)
    assert (c["in_system_peak"], c["queued_peak"], c["running_peak"]) == (3, 2, 2)


def test_cancelled_and_in_flight_are_described_apart(summary: Summary) -> None:
    cancelled = summary.cancelled
    assert (cancelled["count"], cancelled["with_error"]) == (1, 0)
    assert cancelled["output_tokens_delivered"] == 0
    assert cancelled["time_to_cancel_ns"]["mean"] == 30 * MS  # 60 − 30
    assert cancelled["examples"] == ["r3"]
    flying = summary.in_flight
    assert (flying["count"], flying["output_tokens_delivered"]) == (1, 1)
    assert flying["age_at_end_ns"]["max"] == 70 * MS  # trace end 170 − arrival 100
    assert flying["examples"] == ["r4"]


def test_with_error_counts_failures_not_client_cancellations() -> None:
    trace = events(
        make_request("ok", admission=1, first=2, complete=3),
        make_request("gave_up", arrival=1, cancel=4, error_code="499"),
        make_request("limited", arrival=2, cancel=5, error_code="429"),
        make_request("plain", arrival=3, cancel=6),
    ).with_columns(pl.col("error_code").cast(pl.Int64))
    cancelled = analyze_events(trace).summary.cancelled
    assert (cancelled["count"], cancelled["with_error"]) == (3, 1)


def test_throughput_needs_known_arrivals_and_a_window() -> None:
    instant = events(make_request("a", admission=0, first=0, complete=0))
    t = analyze_events(instant).summary.throughput
    assert t == dict.fromkeys(t)  # zero-length window: no rate, never a division by 0
    unknown = four_requests().with_columns(pl.lit(False).alias("arrival_known"))
    s = analyze_events(unknown).summary
    assert s.throughput["requests_per_s"] is None
    assert s.concurrency["in_system_mean"] is None
    assert any("send times are unknown" in w for w in s.warnings)


def test_leaked_state_and_small_sample_warning() -> None:
    trace = events(
        make_request("kept", admission=1, first=2, complete=3, release=4),
        make_request("leak", admission=1, first=2, complete=5),
    )
    s = analyze_events(trace).summary
    assert s.leaked_state == {"requests": 1, "examples": ["leak"]}
    assert "only 2 completed requests: p99 and p99.9 are unreliable" in s.warnings


def test_a_metric_a_request_cannot_have_does_not_fail_it() -> None:
    """A one-token answer has no TPOT: it meets a TPOT target (vLLM's goodput does too)."""
    trace = events(
        make_request("one", admission=0, first=5, complete=5),
        make_request("slow", admission=0, first=5, ticks=[105], complete=105),  # tpot 100
    )
    g = analyze_events(trace, AnalysisOptions(goodput=(TARGETS[1],))).summary.goodput
    assert g is not None
    assert (g["requests_met"], g["fraction"]) == (1, 0.5)
    assert g["attainment_by_target"] == {"tpot<=25ms": 0.5}


def test_violations_count_requests_and_rows_and_show_the_earliest_five() -> None:
    """Seven requests complete without a token (3 rows each), written out of arrival
    order; the examples are the first five by arrival, ties by id (b and a both at 5)."""
    arrivals = {"d": 20, "b": 5, "e": 0, "a": 5, "g": 1, "c": 9, "f": 3}
    trace = events(
        *(make_request(r, arrival=t, admission=t + 1, complete=t + 2) for r, t in arrivals.items())
    )
    violations = analyze_events(trace).summary.violations
    assert violations == {
        "completion_without_tokens": {
            "requests": 7,
            "rows": 21,
            "examples": ["e", "g", "f", "a", "b"],
        }
    }


def test_row_violations_have_rows_but_no_requests_or_examples() -> None:
    """Rows without a request id cannot name a request: 2 rows, 0 requests, no examples."""
    good = make_request("ok", admission=1, first=2, complete=3)
    orphans = [{"request_id": None, "event": "token", "ts": t * MS, "tokens": 1} for t in (4, 5)]
    violations = analyze_events(events(good, orphans)).summary.violations
    assert violations == {"missing_request_id": {"requests": 0, "rows": 2, "examples": []}}


def test_a_streamed_itl_distribution_is_taken_as_it_is() -> None:
    """A streamed trace hands the summary its merged ITL distribution, not a gap frame."""
    analysis = analyze_events(four_requests())
    merged = {"count": 99, "mean": 1.0}
    summary = summarize(analysis.timeline, analysis.per_request, merged)
    assert summary.metrics["itl"] is merged
    assert summary.metrics["ttft"] == analysis.summary.metrics["ttft"]
    assert summary.intervals["itl"]["unavailable"] == "streamed"


def test_a_target_no_request_can_have_is_refused_with_what_it_needs() -> None:
    """No completed request has a queue wait without admissions: exit 2, with the hint."""
    client_side = events(make_request("a", first=20, ticks=[30], complete=30))
    targets = (GoodputTarget("queue_wait", "<=", 10 * MS),)
    with pytest.raises(UsageError, match="queue_wait<=10ms: no completed request") as refused:
        analyze_events(client_side, AnalysisOptions(goodput=targets))
    assert refused.value.hint == (
        "queue_wait and prefill need admission events (client-side tools have none); "
        "tpot needs outputs of 2+ tokens"
    )


def test_goodput_of_a_trace_where_nothing_completed() -> None:
    """Targets given, no completed request: nothing met, no fraction, no attainment."""
    trace = events(make_request("gone", arrival=0, cancel=5))
    g = analyze_events(trace, AnalysisOptions(goodput=TARGETS[:1])).summary.goodput
    assert g == {
        "targets": ["ttft<=50ms"],
        "requests_met": 0,
        "requests_completed": 0,
        "fraction": None,
        "attainment_by_target": {"ttft<=50ms": None},
    }


def test_summarize_defaults_are_the_analysis_defaults() -> None:
    """``summarize`` without a tolerance checks the formula at 1 ms / 1 %, as analyze does."""
    analysis = analyze_events(four_requests())
    alone = summarize(analysis.timeline, analysis.per_request, analysis.gaps)
    assert (alone.formula.abs_tol_ns, alone.formula.rel_tol) == (1_000_000, 0.01)
    assert alone == analysis.summary


def test_the_formula_check_takes_the_tolerance_given() -> None:
    options = AnalysisOptions(formula_abs_tol_ns=5 * MS, formula_rel_tol=0.5)
    formula = analyze_events(four_requests(), options).summary.formula
    assert (formula.abs_tol_ns, formula.rel_tol) == (5 * MS, 0.5)


def test_a_known_trace_has_no_unknown_arrival_warning_and_a_trace_window(
    summary: Summary,
) -> None:
    assert summary.warnings == ("only 2 completed requests: p99 and p99.9 are unreliable",)
    assert summary.window_source == "trace"
    assert summary.arrival_known is True and summary.ticks_available is True
    instant = events(make_request("a", admission=0, first=0, complete=0))
    assert analyze_events(instant).summary.window_source is None  # no window, no source


def test_survival_censors_the_unfinished_requests(summary: Summary) -> None:
    """ttft: r1 30 and r4 30 observed, r3 censored at 30 (cancelled 30 ms after
    arriving), r2 80 observed. At 30 ms: 4 at risk, 2 events, S = 0.5 → p50 = 30 ms;
    at 80 ms: 1 at risk (r3 left at 30), 1 event, S = 0 → p90 = 80 ms."""
    survival = summary.survival
    assert survival is not None and "queue_wait" in survival  # the trace has admissions
    ttft = survival["ttft"]
    assert (ttft["events"], ttft["censored"], ttft["censored_cancelled"]) == (3, 1, 1)
    assert (ttft["p50"], ttft["p90"], ttft["floor"]) == (30 * MS, 80 * MS, 0.0)
    e2e = survival["e2e"]  # r4 is in flight at the end: censored, with a known send time
    assert e2e["censored_in_flight"] == 1 and e2e["unavailable"] is None


def test_arrival_known_is_read_per_request_and_unknown_means_known() -> None:
    one = events(make_request("a", admission=1, first=2, complete=3))
    unknown = one.with_columns(pl.lit(False).alias("arrival_known"))
    assert analyze_events(unknown).summary.arrival_known is False  # a single request too
    two = events(one.to_dicts(), make_request("b", arrival=1, admission=2, first=3, complete=4))
    partly = two.with_columns(
        pl.when(pl.col("request_id") == "a").then(True).otherwise(None).alias("arrival_known")
    )
    assert analyze_events(partly).summary.arrival_known is True  # a null is not a False


def test_source_names_every_source_sorted_or_the_server() -> None:
    trace = events(
        make_request("a", admission=1, first=2, complete=3),
        make_request("b", arrival=1, admission=2, first=3, complete=4),
    )
    assert analyze_events(trace).summary.source == "server"  # no source column
    named = trace.with_columns(
        pl.when(pl.col("request_id") == "a")
        .then(pl.lit("vllm"))
        .otherwise(pl.lit("aiperf"))
        .alias("source")
    )
    assert analyze_events(named).summary.source == "aiperf,vllm"
    blank = trace.with_columns(pl.lit(None, pl.String).alias("source"))
    assert analyze_events(blank).summary.source == "server"
