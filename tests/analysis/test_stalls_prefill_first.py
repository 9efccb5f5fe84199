"""Prefill-first scheduling against the simulator, which knows why each decode waited: a
running request sits out every prefill-only step (its time is the prefill's, paused for
it), a preempted one waits for room in the cache (skipped)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest

import servetrace
from servetrace.analysis.stalls import Stalls
from servetrace.sim.eventlog import Simulation
from servetrace.sim.simulate import run_simulation
from tests.analysis.stall_fixtures import LONG_IDS, PREFILL_FIRST, injected_workload, write_injected


def _truth(sim: Simulation) -> pl.DataFrame:
    """Per gap of every request, from the simulator's own batches: the time of the steps
    ending in it that did not run the request, all of it and that of prefill-only steps,
    and whether the request was preempted in it (at ``t``, ``a ≤ t < b``)."""
    ids = sim.workload_ids
    ticks = sim.events.filter(pl.col("event").is_in(["first_token", "token"]))
    gaps = (
        ticks.sort("request_id", "ts")
        .with_columns(a=pl.col("ts").shift(1).over("request_id"))
        .drop_nulls("a")
        .select("request_id", "a", pl.col("ts").alias("b"))
    )
    steps = sim.steps.sort("end_ns").select(
        "step",
        (pl.col("end_ns") - pl.col("start_ns")).alias("ns"),
        ((pl.col("decode_seqs") == 0) & (pl.col("prefill_tokens") > 0)).alias("prefill_only"),
    )
    ends = sim.steps["end_ns"].sort()
    ran = sim.members.select(
        "step", ids.gather(sim.members["request"]).cast(pl.String).alias("request_id")
    )
    covering = (  # the steps ending in (a, b], without those that ran the request
        gaps.with_columns(
            at=pl.int_ranges(
                ends.search_sorted(gaps["a"], "right"), ends.search_sorted(gaps["b"], "right")
            )
        )
        .explode("at")
        .drop_nulls("at")
        .join(steps.with_row_index("at").with_columns(pl.col("at").cast(pl.Int64)), on="at")
        .join(ran, on=["step", "request_id"], how="anti")
    )
    sat_out = covering.group_by("request_id", "a").agg(
        pl.col("ns").sum().alias("sat_out_ns"),
        pl.col("ns").filter("prefill_only").sum().alias("prefill_only_ns"),
    )
    preemptions = sim.events.filter(pl.col("event") == "preemption").select(
        "request_id", pl.col("ts").alias("t")
    )
    preempted = (
        gaps.join(preemptions, on="request_id")
        .filter((pl.col("t") >= pl.col("a")) & (pl.col("t") < pl.col("b")))
        .select("request_id", "a", pl.lit(True).alias("was_preempted"))
        .unique()
    )
    return (
        gaps.join(sat_out, on=["request_id", "a"], how="left")
        .join(preempted, on=["request_id", "a"], how="left")
        .with_columns(
            pl.col("sat_out_ns", "prefill_only_ns").fill_null(0),
            pl.col("was_preempted").fill_null(False),
        )
    )


def _checked(sim: Simulation, stalls: Stalls) -> pl.DataFrame:
    truth = _truth(sim).rename({"a": "gap_start_ns"})
    checked = stalls.gaps.join(truth, on=["request_id", "gap_start_ns"], how="inner")
    assert checked.height == stalls.gaps.height
    return checked


def _analysed(sim: Simulation, directory: Path, **options: object) -> Stalls:
    trace, steps = write_injected(directory, sim)
    stalls = servetrace.analyze(trace, steps=steps, **options).stalls  # type: ignore[arg-type]
    assert stalls is not None
    return stalls


@pytest.fixture(scope="module")
def long_prefills(tmp_path_factory: pytest.TempPathFactory) -> tuple[Simulation, Stalls]:
    sim = run_simulation(injected_workload(), PREFILL_FIRST)
    return sim, _analysed(sim, tmp_path_factory.mktemp("prefill_first"))


def test_a_decode_waiting_out_prefill_steps_is_paused_for_prefill(
    long_prefills: tuple[Simulation, Stalls],
) -> None:
    sim, stalls = long_prefills
    checked = _checked(sim, stalls)
    assert not checked["was_preempted"].any()  # the cache is large: nobody was preempted
    # every step a gap's request sat out was a prefill-only step, and all of its time is
    # named as that: the prefill it waited for, none a generic skip
    assert (checked["sat_out_ns"] == checked["prefill_only_ns"]).all()
    assert (checked["paused_for_prefill_ns"] == checked["prefill_only_ns"]).all()
    assert (checked["skipped_ns"] == 0).all()
    assert checked["paused_for_prefill_ns"].sum() > 0
    tail = stalls.tail_shares()
    assert (tail["tail_gaps"], tail["prefill_fraction"]) == (113, 1.0)
    assert tail["paused_for_prefill_share"] == pytest.approx(0.98973, abs=1e-5)
    assert tail["skipped_share"] == tail["prefill_share"] == 0.0
    assert stalls.tail["cause"].unique().to_list() == ["paused_for_prefill"]
    # ...and the prefill-only steps inside each tail gap hold an injected long prompt
    members = sim.members.with_columns(
        request_id=sim.workload_ids.gather(sim.members["request"]).cast(pl.String)
    )
    long_steps = members.filter(pl.col("request_id").is_in(list(LONG_IDS)))["step"]
    holds_long = stalls.tail.select(
        pl.int_ranges("first_step", pl.col("last_step") + 1)
        .list.eval(pl.element().is_in(long_steps.implode()))
        .list.any()
    ).to_series()
    assert holds_long.all()


def test_a_preempted_request_is_skipped_not_paused(tmp_path: Path) -> None:
    # A small cache, no long prompts: requests are preempted and wait for room; some of
    # the steps they sit out meanwhile are others' prefill-only steps.
    workload = injected_workload().filter(~pl.col("request_id").is_in(list(LONG_IDS)))
    sim = run_simulation(
        workload.with_columns(output_tokens=pl.lit(256)),
        dataclasses.replace(PREFILL_FIRST, kv_blocks=300),
    )
    stalls = _analysed(sim, tmp_path)
    checked = _checked(sim, stalls)
    # the batched engine keeps no transitions by request: it reads the preemptions
    batched = _analysed(sim, tmp_path, streaming=True, batch_rows=5000)
    assert batched.gaps["preempted"].equals(stalls.gaps["preempted"])
    preempted = checked.filter("was_preempted")
    assert preempted.height == 252
    assert (preempted["prefill_only_ns"] > 0).any()  # prefill steps ran meanwhile...
    assert (preempted["paused_for_prefill_ns"] == 0).all()  # ...but it waited for room
    assert (preempted["skipped_ns"] == preempted["sat_out_ns"]).all()
    running = checked.filter(~pl.col("was_preempted"))
    assert (running["paused_for_prefill_ns"] == running["prefill_only_ns"]).all()
    assert (running["skipped_ns"] == running["sat_out_ns"] - running["prefill_only_ns"]).all()
