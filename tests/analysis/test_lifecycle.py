"""Every lifecycle rule (DESIGN §3) with a small named case, and the quarantine."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.analysis.lifecycle_rules import KEY, RULES
from servetrace.analysis.memory import analyze_events
from servetrace.dtypes import EVENT_DTYPE
from tests.conftest import MS, events, make_request

GOOD = make_request("good", admission=1, first=2, ticks=[3], complete=3)


def row(rid: str, event: str, t: float, **extra) -> dict:
    return {"request_id": rid, "event": event, "ts": round(t * MS), **extra}


# name -> the rows of one request breaking exactly that rule
CASES: dict[str, list[dict]] = {
    "invalid_token_count": make_request(
        "bad", admission=1, first=2, ticks=[3], tokens=[1, 0], complete=3
    ),
    "missing_arrival": make_request("bad", arrival=None, admission=1, first=2, complete=2),
    "duplicate_arrival": [
        *make_request("bad", admission=1, first=2, complete=2),
        row("bad", "arrival", 0.5),
    ],
    "event_before_arrival": make_request("bad", arrival=5, admission=1, first=6, complete=6),
    "duplicate_first_token": [
        *make_request("bad", admission=1, first=2, complete=4),
        row("bad", "first_token", 3),
    ],
    "token_before_first_token": [
        *make_request("bad", admission=1, first=3, complete=3),
        row("bad", "token", 2),
    ],
    "duplicate_terminal": make_request("bad", admission=1, first=2, complete=3, cancel=4),
    "event_after_terminal": [
        *make_request("bad", admission=1, first=2, complete=3),
        row("bad", "token", 5),
    ],
    "admission_while_not_queued": make_request("bad", admission=[1, 1.5], first=2, complete=2),
    "token_before_admission": make_request("bad", admission=5, first=2, complete=6),
    "preemption_while_not_running": make_request(
        "bad", admission=[1, 4], preempt=[0.5, 3], first=2, complete=5
    ),
    "token_while_queued": make_request(
        "bad", admission=[1, 6], preempt=[3], first=2, ticks=[4, 7], complete=7
    ),
    "completion_without_tokens": make_request("bad", admission=1, complete=3),
    "release_before_terminal": [
        *make_request("bad", admission=1, first=2, complete=3),
        row("bad", "release", 2.5),
    ],
    "duplicate_release": [
        *make_request("bad", admission=1, first=2, complete=3, release=4),
        row("bad", "release", 5),
    ],
}


def test_every_request_rule_has_a_case() -> None:
    row_rules = {"missing_request_id", "missing_event", "missing_timestamp"}
    assert set(CASES) | row_rules == set(RULES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_is_reported_alone_and_rows_are_quarantined(rule: str) -> None:
    frame = events(GOOD, CASES[rule])
    analysis = analyze_events(frame)
    summary = analysis.summary
    assert list(summary.violations) == [rule]
    assert summary.violations[rule]["requests"] == 1
    assert summary.violations[rule]["examples"] == ["bad"]
    assert analysis.requests["request_id"].to_list() == ["good"]
    quarantine = analysis.quarantine
    assert set(quarantine["rule"]) == {rule}
    assert quarantine.height == len(CASES[rule])
    a = summary.accounting
    assert a.rows == frame.height == a.rows_analyzed + a.rows_quarantined
    assert (a.requests, a.requests_valid, a.requests_invalid) == (2, 1, 1)


@pytest.mark.parametrize(
    ("column", "rule"),
    [("request_id", "missing_request_id"), ("event", "missing_event"), ("ts", "missing_timestamp")],
)
def test_row_without_required_value_is_quarantined(column: str, rule: str) -> None:
    bad = row("good", "token", 2.5)
    bad[column] = None
    frame = events(GOOD, [bad])
    analysis = analyze_events(frame)
    assert analysis.summary.violations[rule]["rows"] == 1
    assert analysis.quarantine.filter(pl.col("rule") == rule).height == 1
    a = analysis.summary.accounting
    assert a.rows == 6 and a.rows_quarantined == 1 and a.rows_analyzed == 5


def test_equal_timestamps_follow_lifecycle_order() -> None:
    # Everything at t=0, written in reverse order: still a valid request.
    rows = list(reversed(make_request("z", admission=0, first=0, ticks=[0], complete=0)))
    analysis = analyze_events(events(rows))
    assert analysis.summary.accounting.requests_invalid == 0
    r = analysis.requests.row(0, named=True)
    assert r["ttft_ns"] == 0 and r["output_tokens"] == 2


def test_token_at_preemption_time_counts_as_before_it() -> None:
    rows = make_request("p", admission=[1, 6], preempt=[4], first=2, ticks=[4, 7], complete=7)
    assert analyze_events(events(rows)).summary.violations == {}


def test_first_token_event_is_optional() -> None:
    rows = make_request("t", admission=1, ticks=[2, 3], complete=3)
    r = analyze_events(events(rows)).requests.row(0, named=True)
    assert r["ttft_ns"] == 2 * MS and r["ticks"] == 2


def test_release_events_reveal_leaked_state() -> None:
    frame = events(
        make_request("freed", admission=1, first=2, complete=3, release=4),
        make_request("leaked", admission=1, first=2, complete=3),
        make_request("busy", admission=1, first=2),
    )
    summary = analyze_events(frame).summary
    assert summary.leaked_state == {"requests": 1, "examples": ["leaked"]}
    assert summary.violations == {}


def test_no_release_events_means_no_leak_report() -> None:
    assert analyze_events(events(GOOD)).summary.leaked_state is None


def test_integer_request_ids_are_kept() -> None:
    rows = make_request(7, admission=1, first=2, complete=2)
    analysis = analyze_events(events(rows, id_type=pl.Int64))
    assert analysis.requests["request_id"].to_list() == [7]
    assert analysis.requests["request_id"].dtype == pl.Int64


# --- one request cannot change the rules of another -------------------------


def _client_requests(n: int) -> list[list[dict]]:
    """Client-side requests (no admission): arrival, first token, one more, completion."""
    return [
        make_request(f"c{i:03d}", arrival=i, first=i + 5, ticks=[i + 7], complete=i + 7)
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("stray", "rule"),
    [
        # an admission of a request nobody else mentions
        ([row("stray", "admission", 50)], "missing_arrival"),
        # an admission after one client request had already finished
        ([row("c007", "admission", 30)], "event_after_terminal"),
    ],
)
def test_a_stray_admission_does_not_poison_client_requests(stray: list[dict], rule: str) -> None:
    analysis = analyze_events(events(*_client_requests(100), stray))
    summary = analysis.summary
    assert list(summary.violations) == [rule]
    assert summary.violations[rule]["requests"] == 1
    assert summary.accounting.requests_valid == 100 - (rule == "event_after_terminal")
    good = analysis.requests.filter(pl.col("request_id") == "c000").row(0, named=True)
    assert good["ttft_ns"] == 5 * MS
    assert good["queue_wait_ns"] is None and good["prefill_ns"] is None
    # no valid request was admitted: queue wait stays unavailable trace-wide
    assert summary.metrics["queue_wait"]["count"] == 0
    assert summary.concurrency["queued_mean"] is None


def test_mixed_trace_each_request_by_its_own_events() -> None:
    # "s" is server-side (admitted at 3): queued 0..3, prefill 3..5. "c" is client-side:
    # arrival leads straight to running; its queue wait and prefill are unavailable.
    frame = events(
        make_request("s", arrival=0, admission=3, first=5, ticks=[6], complete=6),
        make_request("c", arrival=1, first=4, ticks=[8], complete=8),
        make_request("sc", arrival=2, admission=4, cancel=4.5),  # cancelled in prefill
        # neither admission nor output: in a trace with admitted requests, it was queued
        make_request("cq", arrival=2, cancel=3),
    )
    analysis = analyze_events(frame)
    summary = analysis.summary
    assert summary.violations == {}
    by = {r["request_id"]: r for r in analysis.requests.iter_rows(named=True)}
    assert (by["s"]["queue_wait_ns"], by["s"]["prefill_ns"], by["s"]["ttft_ns"]) == (
        3 * MS,
        2 * MS,
        5 * MS,
    )
    assert (by["c"]["queue_wait_ns"], by["c"]["prefill_ns"], by["c"]["ttft_ns"]) == (
        None,
        None,
        3 * MS,
    )
    assert by["sc"]["cancelled_in"] == "prefill"
    assert by["cq"]["cancelled_in"] == "queued" and by["cq"]["queue_wait_ns"] == 1 * MS
    assert summary.metrics["queue_wait"]["count"] == 1
    (warning,) = [w for w in summary.warnings if "no admission event" in w]
    assert warning.startswith("1 of 4 valid requests")
    # queued: s 0..3, sc 2..4, cq 2..3 → 6 ms of queueing in the 0..8 ms window
    assert summary.concurrency["queued_mean"] == pytest.approx(6 / 8)


def test_a_stray_admission_leaves_early_client_cancellations_unplaced() -> None:
    # Only the stray request was admitted, and it is invalid: the client request cancelled
    # before its first token is client-side, not "queued".
    frame = events(
        *_client_requests(3),
        make_request("early", arrival=1, cancel=2),
        [row("stray", "admission", 50)],
    )
    analysis = analyze_events(frame)
    early = analysis.requests.filter(pl.col("request_id") == "early").row(0, named=True)
    assert early["cancelled_in"] == "before_first_token" and early["queue_wait_ns"] is None
    assert analysis.summary.cancelled_in["queued"] == 0


def test_a_request_with_admissions_still_needs_one_before_its_first_token() -> None:
    frame = events(*_client_requests(3), CASES["token_before_admission"])
    assert list(analyze_events(frame).summary.violations) == ["token_before_admission"]


def test_attributes_come_from_the_arrival_whatever_the_row_order() -> None:
    # policy on arrival, completion and a preemption, disagreeing: the arrival wins; a
    # request whose arrival carries none takes the next kind in lifecycle order.
    rows = [
        row("a", "completion", 9, policy="late", tenant="t-done"),
        row("a", "token", 2, tokens=1),
        row("a", "admission", 1, policy="admitted", tenant="t-adm"),
        row("a", "arrival", 0, policy="fcfs"),
        row("b", "cancellation", 5, policy="cancelled"),
        row("b", "preemption", 3, policy="preempted"),
        row("b", "token", 2.5, tokens=1),
        row("b", "admission", 4, policy="readmitted"),
        row("b", "admission", 1, policy="admitted"),
        row("b", "arrival", 0),
    ]
    frame = events(rows)
    expected = {"a": ("fcfs", "t-adm"), "b": ("admitted", None)}
    for order in (frame, frame.reverse(), frame.sample(fraction=1.0, shuffle=True, seed=3)):
        requests = analyze_events(order).requests
        got = {r["request_id"]: (r["policy"], r["tenant"]) for r in requests.iter_rows(named=True)}
        assert got == expected


# Two requests' ticks: (request, ts ms, event, tokens). Request 1's first_token and a token
# share t=2 (the first_token goes first); request 2 has a 3-token chunk.
_TICKS = [
    (1, 2, "first_token", 1),
    (2, 1, "first_token", 1),
    (1, 2, "token", 1),
    (2, 4, "token", 3),
    (1, 5, "token", 1),
]
# The tick frame every row order must give: by request, then time, first_token first.
_EXPECTED_TICKS = [
    # _key, ts, tokens, is_first, gap_ns
    (1, 2 * MS, 1, True, None),
    (1, 2 * MS, 1, False, 0),
    (1, 5 * MS, 1, False, 3 * MS),
    (2, 1 * MS, 1, True, None),
    (2, 4 * MS, 3, False, 3 * MS),
]


@pytest.mark.parametrize(
    "order",
    [
        [0, 1, 2, 3, 4],  # time order
        [0, 2, 4, 1, 3],  # by request (a request-sorted log): grouped as written
        [4, 3, 2, 1, 0],  # reversed: gaps would be negative, so sorted
        [2, 0, 4, 1, 3],  # the token written before its first_token at the same time
        [1, 3, 4, 0, 2],  # per request in time order, requests interleaved out of time order
    ],
)
def test_ticks_come_by_request_then_time_whatever_the_row_order(order: list[int]) -> None:
    from servetrace.analysis.lifecycle import build_timeline

    rows = [
        {"request_id": rid, "event": kind, "ts": ts * MS, "tokens": tokens}
        for rid, ts, kind, tokens in (_TICKS[i] for i in order)
    ]
    rows += [{"request_id": rid, "event": "arrival", "ts": 0, "tokens": None} for rid in (1, 2)]
    frame = events(rows, id_type=pl.Int64).with_columns(pl.col("event").cast(EVENT_DTYPE))
    ticks = build_timeline(frame, []).ticks
    assert ticks.rows() == _EXPECTED_TICKS
    requests = build_timeline(frame, []).requests.sort(KEY)
    assert requests["itl_max_ns"].to_list() == [3 * MS, 3 * MS]
    assert requests["first_tick_ns"].to_list() == [2 * MS, 1 * MS]
    assert requests["first_is_first"].to_list() == [True, True]
    assert requests["tokens_sum"].to_list() == [3, 4]


def test_request_attributes_come_from_the_arrival_row() -> None:
    rows = make_request("r", admission=1, first=2, complete=3, prompt_tokens=100, policy="fcfs")
    rows[-1] |= {"prompt_tokens": 120, "policy": "sjf"}  # the completion says otherwise
    (request,) = analyze_events(events(rows)).requests.iter_rows(named=True)
    assert (request["prompt_tokens"], request["policy"]) == (100, "fcfs")
