"""The simulator's own steps: canonical schema, exact membership, every token tick at the
end of a step that ran the request."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sim.config import EngineConfig
from servetrace.sim.simulate import run_simulation
from servetrace.sim.steps_record import canonical_steps
from servetrace.sim.synthetic import synthetic_workload
from servetrace.sources.steps.formats import read_steps
from servetrace.sources.steps.schema import STEP_SCHEMA
from tests.sim.test_simulate import REALISTIC

runner = CliRunner()


def _ticks_in_own_steps(events: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    ticks = events.filter(pl.col("event").is_in(["first_token", "token"])).select(
        "request_id", "ts"
    )
    member = steps.select("ts_end", "request_ids").explode("request_ids")
    member = member.rename({"request_ids": "request_id", "ts_end": "ts"}).unique()
    return ticks.join(member, on=["request_id", "ts"], how="anti")


@pytest.mark.slow
def test_every_tick_ends_a_step_containing_its_request() -> None:
    wl = synthetic_workload(400, 6.0, seed=11, burstiness=0.5)
    for policy in ("fcfs", "chunked"):
        cfg = dataclasses.replace(REALISTIC, policy=policy, kv_blocks=500, max_batch_tokens=1024)
        sim = run_simulation(wl, cfg)
        steps = canonical_steps(sim)
        assert steps.schema == pl.Schema(STEP_SCHEMA)
        assert steps.height == sim.steps.height
        assert sim.requests["preemptions"].sum() > 0  # the cache was tight: recomputes ran
        assert _ticks_in_own_steps(sim.events, steps).height == 0
        # the batch's membership is its composition
        sizes = steps["request_ids"].list.len()
        assert (sizes == steps["prefill_requests"] + steps["decode_requests"]).all()


def test_decode_only_steps_follow_the_step_time_model() -> None:
    cfg = EngineConfig(policy="chunked", max_batch_tokens=512, seed=3)
    sim = run_simulation(synthetic_workload(200, 4.0, seed=5), cfg)
    steps = canonical_steps(sim).filter(pl.col("prefill_tokens") == 0)
    model = (
        cfg.step_base_ns
        + cfg.step_decode_seq_ns * steps["decode_requests"]
        + cfg.step_context_token_ns * steps["kv_tokens"]
    )
    assert steps.height > 100
    assert ((steps["ts_end"] - steps["ts_start"]) == model).all()


def test_cli_steps_out_csv_reads_back(tmp_path: Path) -> None:
    trace, csv, parquet = tmp_path / "t.parquet", tmp_path / "s.csv", tmp_path / "s.parquet"
    base = ["simulate", "--requests", "60", "--rate", "5", "-o", str(trace), "--steps-out"]
    for path in (csv, parquet):
        result = runner.invoke(app, [*base, str(path)])
        assert result.exit_code == 0, result.stderr
    from_csv = read_steps(csv, "canonical").frame
    from_parquet = read_steps(parquet, "canonical").frame
    assert from_csv.equals(from_parquet)
    assert _ticks_in_own_steps(pl.read_parquet(trace), from_parquet).height == 0


def test_cli_steps_out_bad_suffix(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["simulate", "-o", str(tmp_path / "t.parquet"), "--steps-out", str(tmp_path / "s.x")]
    )
    assert result.exit_code == 2
    assert "--steps-out" in result.stderr
