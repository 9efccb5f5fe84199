"""Every lifecycle rule (DESIGN §3) with a small named case, and the quarantine."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.analysis.lifecycle import RULES
from servetrace.analysis.memory import analyze_events
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
    quarantine = analysis.quarantine()
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
    assert analysis.quarantine().filter(pl.col("rule") == rule).height == 1
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
