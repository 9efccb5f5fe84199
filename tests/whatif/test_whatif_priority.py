"""``whatif --policy priority``: the queue ordered by a trace attribute, against the
simulator's own run of that policy on the same requests."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.analysis.memory import analyze_events
from servetrace.errors import UsageError
from servetrace.sim.config import EngineConfig
from servetrace.sim.simulate import simulate
from servetrace.sim.synthetic import synthetic_workload
from servetrace.whatif.model import whatif
from servetrace.whatif.replay import workload_of
from tests.whatif.test_whatif import assert_within_band

MS = 1_000_000
# A batch cap that binds: requests queue behind it, and the queue's order matters.
CAPPED = {"max_running": 16}


@pytest.fixture(scope="module")
def tiers() -> tuple[pl.DataFrame, pl.DataFrame]:
    workload = synthetic_workload(n=300, rate_per_s=3.0, seed=3)
    levels = np.random.default_rng(3).integers(0, 3, workload.height)
    workload = workload.with_columns(tier=pl.Series(levels))
    # The trace names the attribute "tier"; the simulator reads it as "priority".
    events = simulate(
        workload.rename({"tier": "priority"}), EngineConfig(policy="fcfs", **CAPPED)
    ).rename({"priority": "tier"})
    return workload, events


@pytest.mark.slow
def test_prediction_lands_on_the_simulators_run_of_priority_by_the_attribute(
    tiers: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    workload, events = tiers
    result = whatif(analyze_events(events), events, [("priority", {})], priority_by="tier")
    assert result.trusted and result.calibration.limits["max_running"].value == 16
    # The truth: the simulator's engine as it was (its own budget), under priority.
    truth = analyze_events(
        simulate(workload.rename({"tier": "priority"}), EngineConfig(policy="priority", **CAPPED))
    )
    predicted = result.predictions[0]
    assert_within_band(predicted, truth)
    # Not vacuous: the levels wait in their order, where first come first served they did not.
    waits = (
        predicted.analysis.per_request.group_by("tier")
        .agg(pl.col("queue_wait_ns").mean())
        .sort("tier")["queue_wait_ns"]
        .to_list()
    )
    assert waits[0] < waits[1] < waits[2] and waits[2] > 4 * waits[0]
    # The predicted trace keeps the attribute under the trace's name.
    assert "tier" in predicted.analysis.per_request.columns


def _requests(tier: list[object]) -> pl.DataFrame:
    n = len(tier)
    return pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(n)],
            "arrival_ns": list(range(n)),
            "prompt_tokens": [4] * n,
            "output_tokens": [2] * n,
            "outcome": ["completed"] * n,
            "tier": tier,
        }
    )


class _Analysis:
    """The two fields `workload_of` reads."""

    def __init__(self, per_request: pl.DataFrame) -> None:
        self.per_request = per_request
        self.inputs = ("t.parquet",)


def test_numbers_written_as_text_order_and_missing_values_are_counted() -> None:
    load = workload_of(_Analysis(_requests([" 2", "0", None, "1.5"])), "tier")  # type: ignore[arg-type]
    assert load.requests["priority"].to_list() == [2.0, 0.0, None, 1.5]
    assert load.priority_by == "tier" and load.priority_missing == 1


@pytest.mark.parametrize(
    ("tier", "by", "words"),
    [
        (["gold", "silver"], "tier", "request 'r0' has tier 'gold', not a number"),
        ([1, 2], "tenant", "the trace has no attribute 'tenant'"),
        ([None, None], "tier", "no completed request has a value for tier"),
    ],
)
def test_an_attribute_that_cannot_order_the_queue_is_refused(
    tier: list[object], by: str, words: str
) -> None:
    with pytest.raises(UsageError, match=words) as caught:
        workload_of(_Analysis(_requests(tier)), by)  # type: ignore[arg-type]
    assert str(caught.value).startswith("t.parquet: --priority-by")


def test_priority_and_its_attribute_come_together(
    tiers: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    _, events = tiers
    real = analyze_events(events)
    with pytest.raises(UsageError, match="needs the attribute"):
        whatif(real, events, [("priority", {})])
    with pytest.raises(UsageError, match="priority policy only"):
        whatif(real, events, [("sjf", {})], priority_by="tier")


@pytest.mark.parametrize(
    ("predictions", "knob"),
    [
        ([("fcfs", {"max_running": 8}), ("fcfs", {"max_running": 16})], "max_running"),
        ([("fcfs", {"max_running": 8, "kv_tokens": None})], None),  # one value: no sweep
        ([("fcfs", {"max_running": 8}), ("sjf", {"max_running": 16})], None),  # two policies
        ([("fcfs", {"max_running": 8}), ("fcfs", {"max_running": None})], None),
        (
            [
                ("fcfs", {"max_running": 8, "kv_tokens": 1}),
                ("fcfs", {"max_running": 9, "kv_tokens": 2}),
            ],
            None,  # two knobs moved at once: not one curve
        ),
    ],
)
def test_a_sweep_is_one_policy_and_one_knob_at_several_values(
    predictions: list[tuple[str, dict[str, int | None]]], knob: str | None
) -> None:
    from dataclasses import replace

    from servetrace.whatif.model import Prediction, WhatIf
    from servetrace.whatif.replay import Workload

    empty = WhatIf("t", None, Workload(pl.DataFrame(), 0), {}, (), False)  # type: ignore[arg-type]
    made = tuple(Prediction(p, limits, None, {}) for p, limits in predictions)  # type: ignore[arg-type]
    assert replace(empty, predictions=made).swept == knob
