"""Edges of the state machine's rules (``lifecycle_rules``), by hand: which token is
"while queued" at equal timestamps and across requests."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servetrace.analysis.lifecycle_rules import KEY, run_rows, tokens_while_queued
from servetrace.analysis.memory import analyze_events
from servetrace.dtypes import EVENT_DTYPE
from tests.conftest import MS, events, make_request


def test_a_token_at_the_readmission_time_is_after_the_readmission() -> None:
    # preempted at 3 ms, re-admitted at 6 ms, a token at exactly 6 ms: running again.
    rows = make_request("p", admission=[1, 6], preempt=[3], first=2, ticks=[6, 7], complete=7)
    analysis = analyze_events(events(rows))
    assert analysis.summary.violations == {}
    (r,) = analysis.requests.iter_rows(named=True)
    assert (r["preemptions"], r["requeued_ns"]) == (1, 3 * MS)


def test_one_requests_preemption_does_not_queue_another_requests_tokens() -> None:
    # a: preempted at 3, re-admitted at 5. b: preempted at 1, re-admitted at 2, a token at
    # 4 (while a, not b, is queued). Both valid.
    frame = events(
        make_request("a", admission=[1, 5], preempt=[3], first=2, ticks=[6], complete=6),
        make_request("b", admission=[0.5, 2], preempt=[1], first=2.5, ticks=[4], complete=4),
    )
    analysis = analyze_events(frame)
    assert analysis.summary.violations == {}
    got = analysis.requests.select("request_id", "requeued_ns").rows()
    assert got == [("a", 2 * MS), ("b", 1 * MS)]


@pytest.mark.parametrize("queued_token", [False, True])
def test_tokens_before_a_client_side_requests_preemption_are_not_queued(
    queued_token: bool,
) -> None:
    # No admission (client-side): arrival → running; tokens at 1 and 2 ms, preempted at 3,
    # cancelled at 5. A token at 4 ms, after the preemption, would be while queued.
    rows = make_request("c", first=1, ticks=[2, 4] if queued_token else [2], preempt=[3], cancel=5)
    analysis = analyze_events(events(rows, make_request("ok", first=1, complete=1)))
    if queued_token:
        assert list(analysis.summary.violations) == ["token_while_queued"]
    else:
        assert analysis.summary.violations == {}
        c = analysis.requests.filter(analysis.requests["request_id"] == "c").row(0, named=True)
        assert (c["outcome"], c["cancelled_in"]) == ("cancelled", "queued")


def test_a_token_while_queued_is_found_after_another_requests_later_ticks() -> None:
    # a (first in the log) is preempted at 1.5 and re-admitted at 2, its last token at
    # 9 ms. b is preempted at 1, re-admitted at 5, but emits a token at 3 ms: b only is
    # token_while_queued.
    frame = events(
        make_request("a", admission=[1, 2], preempt=[1.5], first=1.2, ticks=[9], complete=9),
        make_request("b", admission=[0.5, 5], preempt=[1], first=0.8, ticks=[3, 6], complete=6),
    )
    summary = analyze_events(frame).summary
    assert summary.violations == {
        "token_while_queued": {"requests": 1, "rows": 8, "examples": ["b"]}
    }


def test_zero_prompt_and_output_counts_are_valid() -> None:
    # An empty prompt (0 tokens) and a cancellation reporting 0 output tokens: both valid.
    frame = events(
        make_request("empty", admission=1, first=2, complete=2, prompt_tokens=0),
        make_request("gone", admission=1, cancel=3, prompt_tokens=7),
        make_request("done", admission=1, first=2, ticks=[3], complete=3),
    )
    frame = frame.with_columns(
        output_tokens=frame["output_tokens"].set(frame["event"] == "cancellation", 0)
    )
    analysis = analyze_events(frame)
    assert analysis.summary.violations == {}
    got = analysis.requests.select("request_id", "prompt_tokens").rows()
    assert got == [("done", None), ("empty", 0), ("gone", 7)]


def test_a_release_at_the_terminal_time_is_after_it() -> None:
    # completion and release both at 3 ms (release written first): valid, and released.
    rows = make_request("a", admission=1, first=2, complete=3, release=3)
    rows = [rows[-1], *rows[:-1]]
    summary = analyze_events(events(rows)).summary
    assert summary.violations == {}
    assert summary.leaked_state == {"requests": 0, "examples": []}


def test_a_token_while_queued_is_found_among_other_requests_ticks() -> None:
    # In key order: a long request never preempted, one with a token while queued, one
    # preempted whose tokens all come while running. Only the middle one breaks the rule.
    rows = [
        *make_request("a", admission=0.5, first=1, ticks=[i + 1.5 for i in range(9)], complete=10),
        *make_request("b", admission=[1, 6], preempt=[3], first=2, ticks=[4, 7], complete=7),
        *make_request("c", admission=[1, 6], preempt=[3], first=2, ticks=[2.5, 7], complete=7),
    ]
    rules = analyze_events(events(rows)).timeline.requests.select("request_id", "rule")
    assert dict(rules.iter_rows()) == {"a": None, "b": "token_while_queued", "c": None}


def _by_hand(ticks: pl.DataFrame, control: pl.DataFrame) -> set[int]:
    """Keys with a tick while queued, tick by tick: the last admission or preemption at or
    before the tick decides, a preemption taking effect 1 ns after its time (lifecycle
    order at equal times: admission < token < preemption)."""
    gates: dict[int, list[tuple[int, int, bool]]] = {}
    for key, kind, ts in control.iter_rows():
        if kind in ("admission", "preemption"):
            queued = kind == "preemption"
            gates.setdefault(key, []).append((ts + queued, ts, queued))
    hits = set()
    for key, ts in ticks.iter_rows():
        before = sorted(g for g in gates.get(key, []) if g[0] <= ts)
        if before and before[-1][2]:
            hits.add(key)
    return hits


_request = st.tuples(
    st.lists(st.integers(0, 12), max_size=6),  # tick times
    st.lists(st.tuples(st.sampled_from(["admission", "preemption"]), st.integers(0, 12))),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_request, min_size=1, max_size=6))
def test_the_runs_of_ticks_find_what_a_check_per_tick_finds(requests: list) -> None:
    ticks = pl.DataFrame(
        [(key, t) for key, (times, _) in enumerate(requests) for t in sorted(times)],
        schema={KEY: pl.Int64, "ts": pl.Int64},
        orient="row",
    )
    control = pl.DataFrame(
        [(key, kind, t) for key, (_, gates) in enumerate(requests) for kind, t in gates],
        schema={KEY: pl.Int64, "event": pl.String, "ts": pl.Int64},
        orient="row",
    ).with_columns(pl.col("event").cast(EVENT_DTYPE))
    runs = ticks.group_by(KEY, maintain_order=True).agg(pl.len().alias("ticks"))
    found = set(tokens_while_queued(ticks, control, runs)[KEY].to_list())
    assert found == _by_hand(ticks, control)


def test_run_rows_gathers_the_chosen_runs_in_order() -> None:
    # Runs of 2, 0, 3 and 1 rows: 0-1, (none), 2-4, 5.
    lengths = np.array([2, 0, 3, 1], dtype=np.uint32)
    assert run_rows(lengths, np.array([True, True, False, True])).tolist() == [0, 1, 5]
    assert run_rows(lengths, np.array([False, False, True, False])).tolist() == [2, 3, 4]
    assert run_rows(lengths, np.zeros(4, dtype=bool)).tolist() == []
