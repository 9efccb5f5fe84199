"""The batched (larger-than-memory) path gives the in-memory answers."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.streaming import NotTimeOrdered, analyze_streaming
from servetrace.sources.canonical import read_events
from tests.analysis.test_lifecycle import CASES
from tests.analysis.test_properties import traces
from tests.conftest import MS, events, make_request


def _as_log(frame: pl.DataFrame, path: Path) -> str:
    """Write rows in time order, as an engine's log would be."""
    frame.sort("ts", maintain_order=True).write_parquet(path)
    return str(path)


def _same_requests(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.drop("_key").sort("request_id").equals(b.drop("_key").sort("request_id"))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(frame=traces())
def test_streaming_matches_in_memory(frame: pl.DataFrame, tmp_path: Path) -> None:
    path = _as_log(frame, tmp_path / "t.parquet")
    whole = analyze_paths([path])
    streamed = analyze_streaming(read_events([path]), batch_rows=3)
    assert _same_requests(whole.requests, streamed.requests)
    assert streamed.summary.accounting == whole.summary.accounting
    assert streamed.summary.concurrency == whole.summary.concurrency
    assert streamed.summary.outcomes == whole.summary.outcomes
    for stat in ("count", "mean", "min", "max"):
        expected = whole.summary.metrics["itl"][stat]
        got = streamed.summary.metrics["itl"][stat]
        assert got == pytest.approx(expected) if expected is not None else got is None


def test_streaming_keeps_quarantine_and_release(tmp_path: Path) -> None:
    frame = events(
        make_request("a", admission=1, first=2, ticks=[3], complete=3, release=9),
        make_request("leak", admission=1, first=2, complete=4),
        CASES["duplicate_first_token"],
    )
    path = _as_log(frame, tmp_path / "t.parquet")
    streamed = analyze_streaming(read_events([path]), batch_rows=2)
    whole = analyze_paths([path])
    assert streamed.summary.violations == whole.summary.violations
    assert streamed.summary.leaked_state == whole.summary.leaked_state
    assert (
        streamed.quarantine().height
        == whole.quarantine().height
        == len(CASES["duplicate_first_token"])
    )


def _equal_time_log() -> pl.DataFrame:
    """A log sorted by ts where rows sharing a timestamp are written against lifecycle
    order: completion before the last token, release before completion, the admission
    before the arrival, a preemption before the token at its time."""
    rows = []
    for rid, t0 in (("a", 0), ("b", 1), ("c", 2)):
        rows += [
            {"request_id": rid, "event": "admission", "ts": t0 * MS},
            {"request_id": rid, "event": "arrival", "ts": t0 * MS},
            {"request_id": rid, "event": "first_token", "ts": (t0 + 3) * MS, "tokens": 1},
            {"request_id": rid, "event": "preemption", "ts": (t0 + 4) * MS},
            {"request_id": rid, "event": "token", "ts": (t0 + 4) * MS, "tokens": 1},
            {"request_id": rid, "event": "admission", "ts": (t0 + 5) * MS},
            {"request_id": rid, "event": "release", "ts": (t0 + 6) * MS},
            {"request_id": rid, "event": "completion", "ts": (t0 + 6) * MS},
            {"request_id": rid, "event": "token", "ts": (t0 + 6) * MS, "tokens": 2},
        ]
    return events(rows).sort("ts", maintain_order=True)


def test_equal_timestamps_never_look_out_of_order_at_any_batch_size(tmp_path: Path) -> None:
    frame = _equal_time_log()
    path = tmp_path / "ties.parquet"
    frame.write_parquet(path)
    whole = analyze_paths([str(path)])
    assert whole.summary.violations == {} and whole.summary.outcomes["completed"] == 3
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([str(path)]), batch_rows=batch_rows)
        assert _same_requests(whole.requests, streamed.requests), batch_rows
        assert streamed.summary.accounting == whole.summary.accounting, batch_rows
        assert streamed.summary.leaked_state == whole.summary.leaked_state, batch_rows


def test_unsorted_log_is_told_to_sort_and_a_sorted_one_is_not(tmp_path: Path) -> None:
    good = make_request("a", admission=1, first=2, complete=3)
    late = [{"request_id": "a", "event": "token", "ts": 9 * MS, "tokens": 1}]
    fill = [make_request(f"f{i}", arrival=4 + i, admission=4 + i, first=4 + i) for i in range(4)]
    sorted_log = tmp_path / "sorted.parquet"
    events(good, *fill, late).write_parquet(sorted_log)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(sorted_log)]), batch_rows=4)
    assert "comes after the request finished" in caught.value.message
    assert "sort" not in caught.value.hint and "--no-streaming" in caught.value.hint
    unsorted_log = tmp_path / "unsorted.parquet"
    events(good, *fill, late).reverse().write_parquet(unsorted_log)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(unsorted_log)]), batch_rows=4)
    assert "sort it by ts" in caught.value.hint


@pytest.mark.parametrize("stray", [False, True])
def test_unadmitted_cancellation_is_placed_as_in_memory_at_any_batch_size(
    tmp_path: Path, stray: bool
) -> None:
    # "early" has neither admission nor output: queued when a valid request was admitted
    # (the server request "s", in another batch), client-side when only a stray one was.
    frame = events(
        make_request("early", arrival=0, cancel=1),
        make_request("c", arrival=2, first=3, ticks=[4], complete=4),
        make_request("s", arrival=5, admission=6, first=7, complete=7)
        if not stray
        else [{"request_id": "stray", "event": "admission", "ts": 6 * MS}],
    )
    path = _as_log(frame, tmp_path / "t.parquet")
    whole = analyze_paths([path])
    expected = "before_first_token" if stray else "queued"
    assert whole.requests.filter(pl.col("request_id") == "early")["cancelled_in"][0] == expected
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        assert _same_requests(whole.requests, streamed.requests), batch_rows
        assert streamed.summary.cancelled_in == whole.summary.cancelled_in, batch_rows
        assert streamed.summary.concurrency == whole.summary.concurrency, batch_rows
