"""The batched path's options, refusals and messages, pinned by hand (``streaming.py``):
what a user passes reaches every batch, and what it refuses says exactly why."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from servetrace.analysis.fluidity import FluidityTargets
from servetrace.analysis.memory import analyze_events
from servetrace.analysis.result import AnalysisOptions
from servetrace.analysis.streaming import NotTimeOrdered, analyze_streaming
from servetrace.analysis.summary import GoodputTarget
from servetrace.errors import InputError, UsageError
from servetrace.sources.canonical import read_events
from tests.conftest import MS, events, make_request


def _log(frame: pl.DataFrame, path: Path) -> str:
    frame.sort("ts", maintain_order=True).write_parquet(path)
    return str(path)


def _three() -> pl.DataFrame:
    # a: TTFT 20 ms, gaps 10, 10 ms. b: TTFT 50 ms, gaps 40, 40 ms. c: TTFT 5 ms, 1 gap.
    return events(
        make_request("a", arrival=0, admission=1, first=20, ticks=[30, 40], complete=40),
        make_request("b", arrival=2, admission=3, first=52, ticks=[92, 132], complete=132),
        make_request("c", arrival=4, admission=5, first=9, ticks=[10], complete=10),
    )


def test_streamed_options_reach_every_batch(tmp_path: Path) -> None:
    options = AnalysisOptions(
        goodput=(GoodputTarget("ttft", "<=", 30 * MS),),
        formula_abs_tol_ns=0,
        formula_rel_tol=0.0,
        fluidity=FluidityTargets(ttft_ns=30 * MS, tbt_ns=20 * MS),
    )
    frame = _three()
    path = _log(frame, tmp_path / "t.parquet")
    whole = analyze_events(frame, options)
    for batch_rows in (1, 3, 100):
        streamed = analyze_streaming(read_events([path]), options, batch_rows=batch_rows)
        assert streamed.summary.goodput == whole.summary.goodput
        assert streamed.summary.formula == whole.summary.formula
        columns = [c for c in whole.per_request.columns if c != "_key"]
        assert "fluidity_missed" in columns
        got = streamed.requests.select(columns).sort("request_id")
        assert got.equals(whole.requests.select(columns).sort("request_id")), batch_rows
    # by hand: a (20 ms) and c (5 ms) meet TTFT <= 30 ms, b (50 ms) does not
    assert whole.summary.goodput is not None and whole.summary.goodput["requests_met"] == 2
    # fluidity: a (TTFT 20, gaps 10) and c meet every deadline, b (TTFT 50 > 30) does not
    missed = dict(whole.requests.select("request_id", "fluidity_missed").rows())
    assert missed["a"] == missed["c"] == 0 and missed["b"] > 0
    # tolerance 0: every request here meets the formula exactly (one-token chunks)
    assert whole.summary.formula.abs_tol_ns == 0 and whole.summary.formula.rel_tol == 0.0


def test_an_unknown_by_column_is_a_usage_error_naming_the_columns(tmp_path: Path) -> None:
    plain = _log(_three(), tmp_path / "plain.parquet")
    with pytest.raises(UsageError) as caught:
        analyze_streaming(read_events([plain]), by="policy")
    assert caught.value.message == "--by policy: no such request column"
    assert caught.value.hint == "the trace has none"
    frame = events(
        make_request("a", admission=1, first=2, complete=2, policy="x", tenant="t"),
    )
    tagged = _log(frame, tmp_path / "tagged.parquet")
    with pytest.raises(UsageError) as caught:
        analyze_streaming(read_events([tagged]), by="model")
    assert caught.value.hint == "columns: policy, tenant"


def test_an_empty_trace_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    events().write_parquet(path)
    with pytest.raises(InputError) as caught:
        analyze_streaming(read_events([str(path)]), batch_rows=2)
    assert caught.value.message == f"{path}: the trace has no event rows"
    assert caught.value.hint == "a trace needs at least one row: request_id, event, ts"


def test_late_row_messages_name_the_file_request_event_and_time(tmp_path: Path) -> None:
    good = make_request("a", admission=1, first=2, complete=3)
    late = [{"request_id": "a", "event": "token", "ts": 9 * MS, "tokens": 1}]
    fill = [make_request(f"f{i}", arrival=4 + i, admission=4 + i, first=4 + i) for i in range(4)]
    where = "a row of request 'a' (token at ts 9000000) comes after the request finished"
    path = tmp_path / "sorted.parquet"
    events(good, *fill, late).write_parquet(path)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(path)]), batch_rows=4)
    assert caught.value.message == (
        f"{path}: {where}: the log is in time order, so this request has an event after "
        "its terminal event, which the batched path cannot reopen"
    )
    assert caught.value.hint == (
        "use --no-streaming to analyse it in memory (the request is then quarantined under "
        "event_after_terminal or duplicate_terminal)"
    )
    path = tmp_path / "unsorted.parquet"
    events(good, *fill, late).reverse().write_parquet(path)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(path)]), batch_rows=4)
    # written backwards: a's arrival is read after its completion
    where = "a row of request 'a' (arrival at ts 0) comes after the request finished"
    assert caught.value.message == f"{path}: {where}: the log is not in time order"
    assert caught.value.hint == (
        "batched analysis needs a log in time order; sort it by ts, or use --no-streaming"
    )


def test_the_histogram_warning_in_full(tmp_path: Path) -> None:
    frame = events(make_request("a", admission=0, first=1, ticks=[2, 4], complete=4))
    path = _log(frame, tmp_path / "t.parquet")
    binned = analyze_streaming(read_events([path]), batch_rows=2, exact_gaps=1)
    assert [w for w in binned.summary.warnings if "histogram" in w] == [
        "streamed: more ITL gaps than the 1 kept exactly, so ITL percentiles come from a "
        "log histogram (within ±0.0122%)"
    ]


def test_a_clean_streamed_trace_has_an_empty_typed_quarantine(tmp_path: Path) -> None:
    path = _log(_three(), tmp_path / "t.parquet")
    trace = read_events([path])
    streamed = analyze_streaming(trace, batch_rows=2)
    quarantine = streamed.quarantine
    assert quarantine.height == 0
    assert quarantine.schema == pl.Schema({**trace.events.collect_schema(), "rule": pl.String})


def test_a_late_row_in_a_trace_of_several_files_names_them_all(tmp_path: Path) -> None:
    first, second = tmp_path / "part-0.parquet", tmp_path / "part-1.parquet"
    fill = [make_request(f"f{i}", arrival=4 + i, admission=4 + i, first=4 + i) for i in range(4)]
    events(make_request("a", admission=1, first=2, complete=3), *fill).write_parquet(first)
    events([{"request_id": "a", "event": "token", "ts": 9 * MS, "tokens": 1}]).write_parquet(second)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(first), str(second)]), batch_rows=4)
    assert caught.value.message.startswith(f"{first}, {second}: a row of request 'a' ")


def test_a_streamed_timeline_is_the_in_memory_one_without_its_ticks(tmp_path: Path) -> None:
    # trace from 0 (a's arrival) to 132 ms (b's completion); the ticks are dropped once
    # counted, leaving an empty frame of the same columns, as in memory.
    frame = _three()
    path = _log(frame, tmp_path / "t.parquet")
    whole = analyze_events(frame).timeline
    streamed = analyze_streaming(read_events([path]), batch_rows=2).timeline
    assert (streamed.trace_start_ns, streamed.trace_end_ns) == (0, 132 * MS)
    assert (whole.trace_start_ns, whole.trace_end_ns) == (0, 132 * MS)
    assert streamed.ticks.height == whole.ticks.height == 0
    assert streamed.ticks.schema == whole.ticks.schema
    assert (streamed.has_admissions, streamed.has_releases) == (True, False)


def test_a_streamed_trace_of_31_days_is_flagged_as_in_memory(tmp_path: Path) -> None:
    day_ms = 24 * 3600 * 1000
    frame = events(
        make_request("a", arrival=0, admission=1, first=2, complete=2),
        make_request(
            "b",
            arrival=31 * day_ms,
            admission=31 * day_ms + 1,
            first=31 * day_ms + 2,
            complete=31 * day_ms + 2,
        ),
    )
    path = _log(frame, tmp_path / "t.parquet")
    streamed = analyze_streaming(read_events([path]), batch_rows=2)
    spans = [w for w in streamed.summary.warnings if "spans" in w]
    assert spans == [
        "the trace spans 31 days: are the timestamps in the unit you think? Set it with "
        "--time-unit ns|us|ms|s"
    ]


def test_a_release_before_the_terminal_event_waits_for_it_at_any_batch_size(
    tmp_path: Path,
) -> None:
    # A trace that logs releases; "early" is released at 3 ms, before its completion at 4,
    # and its last token at 4 ms is written after the completion (rows at one time come
    # in any order): it stays open until the log has passed its completion's time, so
    # batching never splits it, and it is quarantined as in memory.
    frame = events(
        make_request("ok", arrival=0, admission=1, first=2, complete=2, release=2),
        make_request("early", arrival=0, admission=1, first=2, complete=4),
        [{"request_id": "early", "event": "release", "ts": 3 * MS}],
        [{"request_id": "early", "event": "token", "ts": 4 * MS, "tokens": 1}],
        make_request("late", arrival=5, admission=6, first=7, complete=7, release=8),
    )
    path = _log(frame, tmp_path / "t.parquet")
    whole = analyze_events(frame)
    assert list(whole.summary.violations) == ["release_before_terminal"]
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        assert streamed.summary.violations == whole.summary.violations, batch_rows
        assert streamed.quarantine.height == 6, batch_rows


def test_a_released_request_is_finished_once_the_log_passes_its_release(
    tmp_path: Path,
) -> None:
    # The trace logs releases: a completes at 3 and is released at 3.5 ms; the log moves
    # on (f0..f3), so a is finished and freed. A token of a at 9 ms then cannot reopen it.
    good = make_request("a", admission=1, first=2, complete=3, release=3.5)
    fill = [
        make_request(f"f{i}", arrival=4 + i, admission=4 + i, first=4 + i, complete=4 + i)
        for i in range(4)
    ]
    late = [{"request_id": "a", "event": "token", "ts": 9 * MS, "tokens": 1}]
    path = tmp_path / "t.parquet"
    events(good, *fill, late).write_parquet(path)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(path)]), batch_rows=4)
    assert "a row of request 'a' (token at ts 9000000)" in caught.value.message


@pytest.mark.slow
def test_a_request_waits_for_its_release_and_rows_at_the_release_time(
    tmp_path: Path,
) -> None:
    # The trace logs releases. "slow" completes at 3 and is released at 5 ms, while "b"
    # writes rows at 4: slow must wait for its release. "dup" is released twice at 7 ms
    # (duplicate_release): it must wait until the log has passed 7 ms to see both.
    frame = events(
        make_request("slow", arrival=0, admission=1, first=2, complete=3, release=5),
        make_request("b", arrival=4, admission=4, first=4, complete=4, release=4),
        make_request("dup", arrival=5, admission=5, first=6, complete=6, release=7),
        [{"request_id": "dup", "event": "release", "ts": 7 * MS}],
        make_request("end", arrival=8, admission=8, first=9, complete=9, release=9),
    )
    path = _log(frame, tmp_path / "t.parquet")
    whole = analyze_events(frame)
    assert list(whole.summary.violations) == ["duplicate_release"]
    assert whole.summary.leaked_state == {"requests": 0, "examples": []}
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        assert streamed.summary.violations == whole.summary.violations, batch_rows
        assert streamed.summary.leaked_state == whole.summary.leaked_state, batch_rows
        assert streamed.summary.accounting == whole.summary.accounting, batch_rows


def test_equal_times_across_a_batch_boundary_are_still_time_order(tmp_path: Path) -> None:
    # Batches of 4 rows: the 4th and 5th rows share ts 3 ms, so the second batch starts at
    # the first one's newest time. The log is in time order, and a's late token is
    # reported as an event after its end, not as an unsorted log.
    def at(rid: str, event: str, t: int) -> dict:
        return {"request_id": rid, "event": event, "ts": t * MS, "tokens": 1}

    rows = [
        at("a", "arrival", 0),
        at("a", "admission", 1),
        at("a", "first_token", 2),
        at("f", "arrival", 3),
        at("a", "completion", 3),  # second batch: starts at the newest time so far
        at("f", "admission", 4),
        at("f", "first_token", 5),
        at("f", "completion", 5),
        at("g", "arrival", 6),
        at("a", "token", 9),  # after a's end
    ]
    path = tmp_path / "t.parquet"
    events(rows).write_parquet(path)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(path)]), batch_rows=4)
    assert "(token at ts 9000000)" in caught.value.message
    assert "the log is in time order" in caught.value.message


def test_deferred_requests_are_queued_when_an_earlier_batch_was_admitted(
    tmp_path: Path,
) -> None:
    # "early" (neither admission nor output) is kept to the end; the only admitted request
    # "s" finished in an earlier batch, and the log ends with a client-side request. As in
    # memory, early was queued (0..1 ms), because a valid request of the trace was admitted.
    frame = events(
        make_request("early", arrival=0, cancel=1),
        make_request("s", arrival=1, admission=2, first=3, complete=3),
        make_request("c", arrival=4, first=5, complete=6),
    )
    path = _log(frame, tmp_path / "t.parquet")
    whole = analyze_events(frame)
    early = whole.requests.filter(pl.col("request_id") == "early").row(0, named=True)
    assert (early["cancelled_in"], early["queue_wait_ns"]) == ("queued", 1 * MS)
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        got = streamed.requests.filter(pl.col("request_id") == "early").row(0, named=True)
        assert (got["cancelled_in"], got["queue_wait_ns"]) == ("queued", 1 * MS), batch_rows


def test_a_streamed_request_still_requeued_waits_until_the_trace_ends(tmp_path: Path) -> None:
    # w is preempted at 5 ms and never re-admitted; d completes at 9 ms, the trace's end:
    # w waited 4 ms, whatever batch it is analysed in.
    frame = events(
        make_request("w", arrival=0, admission=1, first=2, preempt=[5]),
        make_request("d", arrival=0, admission=1, first=2, complete=9),
    )
    path = _log(frame, tmp_path / "t.parquet")
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        got = streamed.requests.filter(pl.col("request_id") == "w").row(0, named=True)
        assert got["requeued_ns"] == 4 * MS, batch_rows


def test_leaks_are_found_in_a_last_batch_without_release_rows(tmp_path: Path) -> None:
    # The trace logs releases (r, released at 3 ms, early on); "leak" and "z" complete but
    # are never released, so they stay open to the end, in a batch with no release row:
    # both are still reported as leaked, as in memory.
    frame = events(
        make_request("r", arrival=0, admission=1, first=2, complete=2, release=3),
        make_request("leak", arrival=4, admission=5, first=6, complete=6),
        make_request("z", arrival=7, admission=8, first=9, complete=9),
    )
    path = _log(frame, tmp_path / "t.parquet")
    whole = analyze_events(frame)
    assert whole.summary.leaked_state == {"requests": 2, "examples": ["leak", "z"]}
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        assert streamed.summary.leaked_state == whole.summary.leaked_state, batch_rows


@pytest.mark.slow
def test_streamed_keys_are_unique_and_each_gap_keeps_its_request(tmp_path: Path) -> None:
    # Pairs of overlapping requests finishing together, in batches of every size: the
    # per-batch keys are renumbered trace-wide, so keys stay unique and the kept gap frame
    # and transitions join back to the right request.
    frame = events(
        make_request("a", arrival=0, admission=1, first=2, ticks=[3], complete=3),
        make_request("b", arrival=0, admission=1, first=2, ticks=[4, 7], complete=7),
        make_request("c", arrival=8, admission=9, first=10, ticks=[14], complete=14),
        make_request("d", arrival=8, admission=9, first=10, ticks=[15, 21], complete=21),
    )
    # A --by column: only then do the kept transitions carry request keys (without --by
    # the batched engine drops them, stream_state.Retained).
    frame = frame.with_columns(pl.lit("t").alias("tenant"))
    path = _log(frame, tmp_path / "t.parquet")
    expected = {"a": [1 * MS], "b": [2 * MS, 3 * MS], "c": [4 * MS], "d": [5 * MS, 6 * MS]}
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows, by="tenant")
        ids = streamed.per_request.select("_key", "request_id")
        assert ids["_key"].n_unique() == 4, batch_rows
        owners = streamed.gaps.join(ids, on="_key")
        got = owners.group_by("request_id").agg(pl.col("itl_ns").sort()).rows()
        assert dict(got) == expected, batch_rows
        # arrival, admission, first token, completion: 4 level changes each, net zero
        moves = streamed.timeline.transitions.join(ids, on="_key").group_by("request_id")
        per_request = moves.agg(pl.len(), pl.col("d_in_system").sum()).sort("request_id")
        assert per_request.rows() == [(r, 4, 0) for r in "abcd"], batch_rows
        # the timeline's requests carry the same trace-wide keys
        timeline_ids = streamed.timeline.requests.select("_key", "request_id").sort("_key")
        assert timeline_ids.equals(ids.sort("_key")), batch_rows


def _at(rid: str, event: str, t: int) -> dict:
    return {"request_id": rid, "event": event, "ts": t * MS, "tokens": 1}


def test_a_batch_out_of_order_inside_makes_the_log_unsorted(tmp_path: Path) -> None:
    # Batches of 4: the first is sorted; the second starts after it (5 ms) but is not
    # sorted inside (4 after 5); the third has a row of a, finished by then. The log is
    # not in time order, and the message says so.
    rows = [
        _at("a", "arrival", 0),
        _at("a", "admission", 1),
        _at("a", "first_token", 2),
        _at("a", "completion", 3),
        _at("f", "arrival", 5),
        _at("f", "admission", 4),
        _at("f", "first_token", 6),
        _at("f", "completion", 7),
        _at("g", "arrival", 8),
        _at("a", "token", 9),
        _at("g", "admission", 10),
        _at("g", "first_token", 11),
    ]
    path = tmp_path / "t.parquet"
    events(rows).write_parquet(path)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(path)]), batch_rows=4)
    assert caught.value.message.endswith("the log is not in time order")


def test_the_newest_time_read_is_kept_across_batches(tmp_path: Path) -> None:
    # Batch 1 reads up to 100 ms (z's arrival); batch 2's newest row is x's completion at
    # 50 ms. The log has moved past 50 ms (to 100), so x is finished after batch 2, and
    # x's token at 60 ms in batch 3 is a row after its end: refused.
    rows = [
        _at("x", "arrival", 0),
        _at("x", "admission", 1),
        _at("x", "first_token", 2),
        _at("z", "arrival", 100),
        _at("y", "arrival", 4),
        _at("x", "completion", 50),
        _at("y", "admission", 5),
        _at("y", "first_token", 6),
        _at("x", "token", 60),
        _at("y", "completion", 110),
    ]
    path = tmp_path / "t.parquet"
    events(rows).write_parquet(path)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(path)]), batch_rows=4)
    assert "a row of request 'x' (token at ts 60000000)" in caught.value.message


def test_streamed_requests_come_in_arrival_order_ties_by_id(tmp_path: Path) -> None:
    # m and z both arrive at 0 (z finishes first, m last), a arrives at 1 ms: the
    # per-request frame is in arrival order, ties by id, whatever order they finished in.
    frame = events(
        make_request("m", arrival=0, admission=1, first=2, ticks=[19], complete=20),
        make_request("z", arrival=0, admission=1, first=2, complete=3),
        make_request("a", arrival=1, admission=2, first=4, complete=5),
    )
    path = _log(frame, tmp_path / "t.parquet")
    assert analyze_events(frame).requests["request_id"].to_list() == ["m", "z", "a"]
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        assert streamed.requests["request_id"].to_list() == ["m", "z", "a"], batch_rows


def test_an_empty_trace_of_two_files_names_both(tmp_path: Path) -> None:
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    events().write_parquet(first)
    events().write_parquet(second)
    with pytest.raises(InputError) as caught:
        analyze_streaming(read_events([str(first), str(second)]), batch_rows=2)
    assert caught.value.message == f"{first}, {second}: the trace has no event rows"


def test_a_streamed_analysis_names_its_inputs_and_attributes(tmp_path: Path) -> None:
    frame = events(
        make_request("a", admission=1, first=2, complete=2, policy="x", tenant="t"),
    )
    path = _log(frame, tmp_path / "t.parquet")
    streamed = analyze_streaming(read_events([path]), batch_rows=2)
    assert streamed.inputs == (path,)
    assert streamed.attributes == ("policy", "tenant")
    assert streamed.gaps.schema == analyze_events(frame).gaps.schema


def test_beyond_the_exact_budget_the_gap_frame_is_empty_but_typed(tmp_path: Path) -> None:
    frame = events(make_request("a", admission=0, first=1, ticks=[2, 4], complete=4))
    path = _log(frame, tmp_path / "t.parquet")
    binned = analyze_streaming(read_events([path]), batch_rows=2, exact_gaps=0)
    assert binned.gaps.height == 0
    assert binned.gaps.schema == analyze_events(frame).gaps.schema
    assert binned.itl_by is None  # no --by: no per-group distributions
    assert binned.summary.metrics["itl"]["count"] == 2
