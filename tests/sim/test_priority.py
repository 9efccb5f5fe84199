"""The priority policy on tiny workloads whose schedule is computed by hand."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.errors import InputError, UsageError
from servetrace.sim.config import EngineConfig
from servetrace.sim.simulate import simulate
from servetrace.sim.workloads import queue_keys, validate_workload

MS = 1_000_000
# Every step takes exactly 1 ms whatever it holds, and one request runs at a time: the
# schedule is the queue's order, one step per token.
ONE_MS_STEPS = {
    "max_running": 1,
    "step_base_ns": MS,
    "step_prefill_token_ns": 0,
    "step_decode_seq_ns": 0,
    "step_context_token_ns": 0,
}


def _workload(priority: list[float | None] | None = None) -> pl.DataFrame:
    # a holds the engine for two steps (0-2 ms); the others arrive at 0.5 ms, queue,
    # and each takes one step (prefill, whose token is also the last).
    frame = pl.DataFrame(
        {
            "request_id": ["a", "b", "c", "d", "e", "f"],
            "arrival_ns": [0] + [MS // 2] * 5,
            "prompt_tokens": [8, 8, 8, 8, 8, 8],
            "output_tokens": [2, 1, 1, 1, 1, 1],
        }
    )
    if priority is not None:
        frame = frame.with_columns(pl.Series("priority", priority))
    return frame


def _admitted(events: pl.DataFrame) -> dict[str, int]:
    rows = events.filter(pl.col("event") == "admission")
    return dict(zip(rows["request_id"], rows["ts"], strict=True))


def test_lower_priority_runs_first_by_arrival_within_a_level_and_missing_last() -> None:
    # a: 0; then c (0) at 2 ms, d and f (1, d arrived first) at 3 and 4, b (2) at 5,
    # e (no value) at 6 ms.
    events = simulate(
        _workload([0, 2, 0, 1, None, 1]), EngineConfig(policy="priority", **ONE_MS_STEPS)
    )
    assert _admitted(events) == {
        "a": 0,
        "c": 2 * MS,
        "d": 3 * MS,
        "f": 4 * MS,
        "b": 5 * MS,
        "e": 6 * MS,
    }
    # The same requests first come, first served: b, c, d, e, f from 2 ms.
    fcfs = simulate(_workload([0, 2, 0, 1, None, 1]), EngineConfig(policy="fcfs", **ONE_MS_STEPS))
    assert list(_admitted(fcfs)) == ["a", "b", "c", "d", "e", "f"]


def test_the_log_carries_each_requests_priority_on_its_arrival() -> None:
    events = simulate(_workload([0, 2, 0, 1, None, 1]), EngineConfig(**ONE_MS_STEPS))
    arrivals = events.filter(pl.col("event") == "arrival").sort("request_id")
    assert arrivals["priority"].to_list() == [0, 2, 0, 1, None, 1]
    assert events.filter(pl.col("event") != "arrival")["priority"].null_count() == events.height - 6
    # A workload without one writes the log it always did.
    assert "priority" not in simulate(_workload(), EngineConfig(**ONE_MS_STEPS)).columns


def test_fractional_levels_and_nan_order_like_numbers_and_missing() -> None:
    wl = validate_workload(_workload([0.5, -1.0, float("nan"), 0.5, 2.25, None]))
    assert queue_keys(wl, "priority").tolist() == [2, 1, 4, 2, 3, 4]
    assert queue_keys(wl, "sjf").tolist() == [8] * 6  # prompt lengths
    assert queue_keys(wl, "fcfs").tolist() == list(range(6))


def test_a_preempted_request_still_goes_before_a_more_urgent_new_one() -> None:
    # Two requests fill a KV cache of 3 blocks (16 tokens each) until the second must
    # grow: it is preempted, and re-admitted before the urgent one that arrived since.
    wl = pl.DataFrame(
        {
            "request_id": ["old", "young", "urgent"],
            "arrival_ns": [0, 0, 3 * MS // 2],
            "prompt_tokens": [16, 15, 1],
            "output_tokens": [3, 3, 1],
            "priority": [1, 1, 0],
        }
    )
    cfg = EngineConfig(
        policy="priority", kv_blocks=3, watermark=0.0, **{**ONE_MS_STEPS, "max_running": 2}
    )
    events = simulate(wl, cfg)
    order = events.filter(pl.col("event").is_in(["admission", "preemption"]))
    assert list(zip(order["request_id"], order["event"], strict=True))[:4] == [
        ("old", "admission"),
        ("young", "admission"),
        ("young", "preemption"),
        ("young", "admission"),
    ]


def test_the_priority_policy_needs_a_numeric_priority_column() -> None:
    with pytest.raises(UsageError, match="has none"):
        simulate(_workload(), EngineConfig(policy="priority"))
    text = _workload().with_columns(pl.lit("gold").alias("priority"))
    with pytest.raises(InputError, match="'priority' must be numeric"):
        simulate(text, EngineConfig(policy="priority"))
