"""Server-side or client-side, per request (``lifecycle_side``), pinned by hand.

A request with neither an admission nor an output cannot tell which side it is on; the
trace decides (a valid admitted request makes it queued), or the caller does (the
streaming engine, for a batch that cannot know).
"""

from __future__ import annotations

import polars as pl

from servetrace.analysis.lifecycle import build_timeline
from servetrace.analysis.memory import analyze_events
from servetrace.analysis.metrics import request_metrics
from servetrace.sources.canonical import normalise
from tests.conftest import MS, events, make_request


def _by_id(frame: pl.DataFrame) -> dict:
    return {r["request_id"]: r for r in frame.iter_rows(named=True)}


def _canonical(frame: pl.DataFrame) -> pl.DataFrame:
    return normalise(frame.lazy(), "test").collect()


def _clients(n: int) -> list[list[dict]]:
    return [
        make_request(f"c{i}", arrival=i, first=i + 5, ticks=[i + 7], complete=i + 7)
        for i in range(n)
    ]


def test_the_caller_decides_an_unplaced_request_is_queued() -> None:
    # A batch holding only a request cancelled before anything happened to it: alone it is
    # client-side; told that the trace queues (a valid admitted request elsewhere), it
    # waited in the queue from arrival (0) to its cancellation (4 ms).
    frame = _canonical(events(make_request("early", arrival=0, cancel=4)))
    for queued, state, wait in ((True, "queued", 4 * MS), (False, "before_first_token", None)):
        timeline = build_timeline(frame, [], unadmitted_queued=queued)
        (r,) = request_metrics(timeline, []).iter_rows(named=True)
        assert (r["cancelled_in"], r["queue_wait_ns"]) == (state, wait), queued
    # ... and undecided, the batch alone (no admission at all) says client-side
    (r,) = request_metrics(build_timeline(frame, []), []).iter_rows(named=True)
    assert r["cancelled_in"] == "before_first_token" and r["queue_wait_ns"] is None


def test_queued_unplaced_request_is_counted_in_the_queue() -> None:
    # The caller's decision reaches concurrency too: queued 0..4 ms, the only request.
    frame = _canonical(events(make_request("early", arrival=0, cancel=4)))
    timeline = build_timeline(frame, [], unadmitted_queued=True)
    moves = timeline.transitions.sort("ts").select("ts", "d_queued", "d_in_system").rows()
    assert moves == [(0, 1, 1), (4 * MS, -1, -1)]


def test_an_invalid_admitted_request_with_output_does_not_make_the_trace_queue() -> None:
    # The only admission is a stray row after c1 completed (c1: event_after_terminal).
    # No *valid* request was admitted, so the early cancellation is client-side, even
    # though the admitted request has output ticks.
    frame = events(
        *_clients(3),
        make_request("early", arrival=1, cancel=2),
        [{"request_id": "c1", "event": "admission", "ts": 30 * MS}],
    )
    analysis = analyze_events(frame)
    assert list(analysis.summary.violations) == ["event_after_terminal"]
    early = _by_id(analysis.requests)["early"]
    assert early["cancelled_in"] == "before_first_token" and early["queue_wait_ns"] is None
    assert analysis.summary.cancelled_in["queued"] == 0
    assert analysis.summary.concurrency["queued_mean"] is None


def test_a_valid_admitted_request_makes_the_unplaced_one_queued() -> None:
    # Same early cancellation next to one valid admitted request: it was queued 1..2 ms.
    frame = events(
        make_request("s", arrival=0, admission=1, first=3, complete=3),
        make_request("early", arrival=1, cancel=2),
    )
    analysis = analyze_events(frame)
    early = _by_id(analysis.requests)["early"]
    assert early["cancelled_in"] == "queued" and early["queue_wait_ns"] == 1 * MS
    assert analysis.summary.cancelled_in["queued"] == 1


def test_mixed_admissions_warning_counts_the_valid_requests_without_one() -> None:
    # Two admitted requests with output, one client-side request with output, one admitted
    # request cancelled in prefill (no output: not counted as "without"), one invalid
    # client-side request (not counted at all): 1 of 4 valid requests has no admission.
    frame = events(
        make_request("s1", arrival=0, admission=1, first=2, complete=2),
        make_request("s2", arrival=0, admission=1, first=3, ticks=[4], complete=4),
        make_request("sp", arrival=0, admission=1, cancel=2),
        make_request("c", arrival=0, first=5, complete=5),
        make_request("bad", arrival=6, first=5, complete=7),  # event_before_arrival
    )
    summary = analyze_events(frame).summary
    assert list(summary.violations) == ["event_before_arrival"]
    (warning,) = [w for w in summary.warnings if "admission" in w]
    assert warning == (
        "1 of 4 valid requests have no admission event while the others do: they are taken "
        "as client-side (queue wait and prefill unavailable); in a server log this means "
        "lost admission rows"
    )


def test_no_mixed_admissions_warning_when_every_request_with_output_was_admitted() -> None:
    frame = events(
        make_request("s1", arrival=0, admission=1, first=2, complete=2),
        make_request("q", arrival=0, cancel=1),  # unplaced: queued, not "without"
    )
    assert not [w for w in analyze_events(frame).summary.warnings if "admission" in w]
