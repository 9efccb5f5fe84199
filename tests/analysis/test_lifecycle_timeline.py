"""What ``build_timeline`` makes of a trace, pinned by hand: ticks, their token counts,
request attributes, the row quarantine (``analysis/lifecycle.py``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from servetrace.analysis.lifecycle import build_timeline
from servetrace.analysis.memory import analyze_events
from servetrace.analysis.streaming import analyze_streaming
from servetrace.sources.canonical import normalise, read_events
from tests.conftest import MS, events, make_request


def _canonical(frame: pl.DataFrame) -> pl.DataFrame:
    return normalise(frame.lazy(), "test").collect()


def _one(frame: pl.DataFrame) -> dict:
    (r,) = analyze_events(frame).requests.iter_rows(named=True)
    return r


def test_a_trace_without_a_tokens_column_has_one_token_per_tick() -> None:
    # arrival 0, admission 1, ticks at 2, 4, 7 ms, completion 7: 3 ticks, 3 tokens,
    # TPOT = (7 - 2) / (3 - 1) = 2.5 ms.
    frame = events(make_request("a", admission=1, first=2, ticks=[4, 7], complete=7))
    frame = frame.drop("tokens", "prompt_tokens", "output_tokens")
    assert "tokens" not in _canonical(frame).columns
    r = _one(frame)
    assert (r["ticks"], r["output_tokens"]) == (3, 3)
    assert r["tpot_ns"] == 2.5 * MS and r["formula_residual_ns"] == 0


def test_a_tick_with_an_unknown_token_count_carries_one_token() -> None:
    # chunk sizes 1, null, 3: the null chunk is one token, so N = 5 over 3 ticks.
    frame = events(
        make_request("a", admission=1, first=2, ticks=[4, 7], tokens=[1, 1, 3], complete=7)
    ).with_columns(
        pl.when(pl.col("ts") == 4 * MS).then(None).otherwise(pl.col("tokens")).alias("tokens")
    )
    r = _one(frame)
    assert (r["ticks"], r["output_tokens"]) == (3, 5)
    assert r["tpot_ns"] == 5 * MS / 4  # (7 - 2) ms over N - 1 = 4 tokens


def test_a_clean_trace_has_an_empty_typed_row_quarantine() -> None:
    frame = _canonical(events(make_request("a", admission=1, first=2, complete=2)))
    quarantine = build_timeline(frame, []).row_quarantine
    assert quarantine.height == 0
    assert quarantine.schema == pl.Schema({**frame.schema, "rule": pl.String})


@pytest.mark.parametrize("in_time_order", [True, False])
def test_a_first_token_written_after_a_token_at_its_time_is_still_first(
    in_time_order: bool,
) -> None:
    # Request a's first_token at 2 ms is written after a token at the same 2 ms, and b's
    # ticks interleave with a's: a ticks at 2, 2, 5 ms (gaps 0 and 3 ms), b at 3, 4, 6 ms
    # (gaps 1 and 2 ms). Ticks in time order, or not (b's last token written first): the
    # two ways the ticks are sorted.
    def tick(rid: str, event: str, t: int) -> dict:
        return {"request_id": rid, "event": event, "ts": t * MS, "tokens": 1}

    rows = [
        *[{"request_id": rid, "event": "arrival", "ts": 0} for rid in "ab"],
        *[{"request_id": rid, "event": "admission", "ts": MS} for rid in "ab"],
        tick("a", "token", 2),
        tick("a", "first_token", 2),
        tick("b", "first_token", 3),
        tick("b", "token", 4),
        tick("a", "token", 5),
        {"request_id": "a", "event": "completion", "ts": 5 * MS},
        tick("b", "token", 6),
        {"request_id": "b", "event": "completion", "ts": 6 * MS},
    ]
    if not in_time_order:
        rows = rows[-2:-1] + rows[:-2] + rows[-1:]
    analysis = analyze_events(events(rows))
    assert analysis.summary.violations == {}
    got = analysis.requests.select("request_id", "ttft_ns", "itl_max_ns", "ticks").rows()
    assert got == [("a", 2 * MS, 3 * MS, 3), ("b", 3 * MS, 2 * MS, 3)]
    assert sorted(analysis.gaps["itl_ns"].to_list()) == [0, 1 * MS, 2 * MS, 3 * MS]


def test_attributes_are_carried_without_token_count_columns() -> None:
    # No prompt_tokens/output_tokens columns at all, one attribute: it is still carried,
    # and nothing is invalid.
    frame = events(
        make_request("a", admission=1, first=2, ticks=[4], complete=4, policy="fcfs"),
        make_request("b", admission=1, first=3, complete=3, policy="sjf"),
    ).drop("prompt_tokens", "output_tokens")
    analysis = analyze_events(frame)
    assert analysis.summary.violations == {}
    got = analysis.requests.select("request_id", "policy", "output_tokens").rows()
    assert got == [("a", "fcfs", 2), ("b", "sjf", 1)]


def test_an_attribute_comes_from_the_earliest_kind_before_the_earliest_time() -> None:
    # Neither the arrival nor the first admission carries a policy; a preemption (at 2 ms)
    # does, and so does the later re-admission (at 3 ms). Admission precedes preemption
    # in lifecycle order, so the re-admission's value wins although it is later in time.
    def at(event: str, t: float, **extra: object) -> dict:
        return {"request_id": "a", "event": event, "ts": round(t * MS), **extra}

    rows = [
        at("arrival", 0),
        at("admission", 1),
        at("first_token", 1.5, tokens=1),
        at("preemption", 2, policy="from-preemption"),
        at("admission", 3, policy="from-admission"),
        at("token", 4, tokens=1),
        at("completion", 4),
    ]
    (r,) = analyze_events(events(rows)).requests.iter_rows(named=True)
    assert r["policy"] == "from-admission"


@pytest.mark.parametrize("column", ["prompt_tokens", "output_tokens"])
def test_a_negative_prompt_or_output_count_is_an_invalid_token_count(column: str) -> None:
    count = {column: -1}
    frame = events(
        make_request("good", admission=1, first=2, complete=2),
        make_request("bad", admission=1, first=2, complete=2, **count),  # type: ignore[arg-type]
    )
    summary = analyze_events(frame).summary
    assert summary.violations == {
        "invalid_token_count": {"requests": 1, "rows": 4, "examples": ["bad"]}
    }


def test_a_request_of_ticks_alone_is_quarantined_with_its_rows() -> None:
    # "orphan" has only two token rows (no arrival), in a trace with count columns.
    frame = events(
        make_request("good", admission=1, first=2, complete=2, prompt_tokens=5),
        [
            {"request_id": "orphan", "event": "token", "ts": 3 * MS, "tokens": 1},
            {"request_id": "orphan", "event": "token", "ts": 4 * MS, "tokens": 1},
        ],
    )
    analysis = analyze_events(frame)
    assert analysis.summary.violations == {
        "missing_arrival": {"requests": 1, "rows": 2, "examples": ["orphan"]}
    }
    assert analysis.quarantine["request_id"].to_list() == ["orphan", "orphan"]
    assert analysis.summary.accounting.requests == 2


@pytest.mark.parametrize("missing", ["request_id", "event"])
def test_an_unplaceable_release_row_does_not_make_the_trace_log_releases(
    missing: str, tmp_path: Path
) -> None:
    # The only release-like row has no request id (or no event kind, then a ts-only row):
    # it is quarantined under its row rule, and the trace does not log releases, so no
    # request is reported as leaked, in memory or batched.
    loose = {"request_id": "a", "event": "release", "ts": 9 * MS, missing: None}
    frame = events(
        make_request("a", admission=1, first=2, complete=3),
        make_request("b", admission=1, first=2, ticks=[4], complete=4),
        [loose],
    )
    path = tmp_path / "t.parquet"
    frame.sort("ts", maintain_order=True).write_parquet(path)
    for analysis in (
        analyze_events(frame),
        analyze_streaming(read_events([str(path)]), batch_rows=3),
    ):
        assert analysis.summary.leaked_state is None
        assert analysis.summary.outcomes["completed"] == 2
        assert list(analysis.summary.violations) == [f"missing_{missing}"]


def test_a_request_still_requeued_at_the_end_waits_until_the_trace_ends() -> None:
    # w is preempted at 5 ms and never re-admitted; the trace ends at 9 ms (d completes):
    # w has been waiting again for 9 - 5 = 4 ms.
    frame = events(
        make_request("w", arrival=0, admission=1, first=2, preempt=[5]),
        make_request("d", arrival=0, admission=1, first=2, complete=9),
    )
    got = analyze_events(frame).requests.select("request_id", "outcome", "requeued_ns").rows()
    assert got == [("d", "completed", 0), ("w", "in_flight", 4 * MS)]


def test_a_trace_ending_at_time_zero_has_zero_requeue_time() -> None:
    # Everything at ts 0, including a preemption with nothing after it: requeued 0 ns.
    frame = events(make_request("w", arrival=0, admission=0, preempt=[0]))
    (r,) = analyze_events(frame).requests.iter_rows(named=True)
    assert (r["outcome"], r["preemptions"], r["requeued_ns"]) == ("in_flight", 1, 0)


def test_a_readmitted_request_in_flight_was_requeued_until_its_readmission() -> None:
    # w: preempted at 5 ms, re-admitted at 7, a token at 8, still in flight when the trace
    # ends at 9 (d completes): requeued 7 - 5 = 2 ms (its re-admission is its last control
    # event).
    frame = events(
        make_request("w", arrival=0, admission=[1, 7], first=2, ticks=[8], preempt=[5]),
        make_request("d", arrival=0, admission=1, first=2, complete=9),
    )
    analysis = analyze_events(frame)
    assert analysis.summary.violations == {}
    got = analysis.requests.select("request_id", "outcome", "requeued_ns").rows()
    assert got == [("d", "completed", 0), ("w", "in_flight", 2 * MS)]


def test_a_release_changes_no_level() -> None:
    # arrival 0 (+1 queued, +1 in system), admission 1 (queued → running), first token 2
    # (no level change), completion 3 (−1 running, −1 in system), release 4: all zero.
    frame = _canonical(events(make_request("a", admission=1, first=2, complete=3, release=4)))
    moves = build_timeline(frame, []).transitions.sort("ts")
    got = moves.select("ts", "d_queued", "d_running", "d_in_system").rows()
    assert got == [
        (0, 1, 0, 1),
        (1 * MS, -1, 1, 0),
        (2 * MS, 0, 0, 0),
        (3 * MS, 0, -1, -1),
        (4 * MS, 0, 0, 0),
    ]
