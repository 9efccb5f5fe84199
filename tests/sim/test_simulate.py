"""The continuous-batching simulator: determinism, lifecycle sanity, budgets, samples."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
from pathlib import Path
from types import ModuleType

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servetrace.errors import InputError, UsageError
from servetrace.schema import EVENT_KINDS
from servetrace.sim import engine as simulate_module
from servetrace.sim.config import EngineConfig
from servetrace.sim.eventlog import EVENT_COLUMNS, Simulation
from servetrace.sim.simulate import run_simulation, simulate
from servetrace.sim.synthetic import synthetic_workload
from servetrace.sim.workloads import validate_workload

MS = 1_000_000
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"

# A smaller cousin of sample_traces' realistic config: load, a tight KV cache, impatient
# clients, bundled chunks, releases with a few leaks, and a horizon.
REALISTIC = EngineConfig(
    policy="fcfs",
    kv_blocks=1536,
    cancel_fraction=0.15,
    bundle_prob=0.08,
    release_delay_ns=1 * MS,
    leak_fraction=0.01,
    seed=7,
)


def _realistic_run(policy: str = "fcfs", seed: int = 7) -> Simulation:
    wl = synthetic_workload(1200, 4.5, seed=2024, burstiness=0.5)
    cfg = dataclasses.replace(
        REALISTIC,
        policy=policy,
        max_batch_tokens=512 if policy == "chunked" else 4096,
        seed=seed,
        horizon_ns=int(wl["arrival_ns"][-1]),
    )
    return run_simulation(wl, cfg)


@pytest.fixture(scope="module")
def realistic() -> Simulation:
    return _realistic_run()


@pytest.fixture(scope="module")
def realistic_chunked() -> Simulation:
    return _realistic_run("chunked")


# --------------------------------------------------------------------------- helpers

RANK = {kind: i for i, kind in enumerate(EVENT_KINDS)}
TERMINAL = ("completion", "cancellation")


def annotate(events: pl.DataFrame) -> pl.DataFrame:
    """Per-request running counts in file order, to state lifecycle rules as filters."""
    rid = "request_id"
    ev = events.with_row_index("row").with_columns(
        rank=pl.col("event").replace_strict(RANK, return_dtype=pl.Int64)
    )
    is_ = {kind: (pl.col("event") == kind).cast(pl.Int64) for kind in EVENT_KINDS}
    before = {
        kind: (is_[kind].cum_sum().over(rid, order_by="row") - is_[kind])
        for kind in ("arrival", "admission", "preemption", "first_token", "token")
    }
    terminal = pl.col("event").is_in(TERMINAL).cast(pl.Int64)
    return ev.with_columns(
        pos=pl.int_range(pl.len()).over(rid, order_by="row"),
        adm_before=before["admission"],
        pre_before=before["preemption"],
        first_before=before["first_token"],
        term_before=terminal.cum_sum().over(rid, order_by="row") - terminal,
        prev_ts=pl.col("ts").shift().over(rid, order_by="row"),
        prev_rank=pl.col("rank").shift().over(rid, order_by="row"),
    )


def violations(events: pl.DataFrame) -> dict[str, int]:
    """Lifecycle rules of DESIGN §3, each counted in rows (or requests) that break it."""
    a = annotate(events)
    running = (pl.col("adm_before") - pl.col("pre_before")) == 1
    per = a.group_by("request_id").agg(
        arrivals=(pl.col("event") == "arrival").sum(),
        terminals=pl.col("event").is_in(TERMINAL).sum(),
        releases=(pl.col("event") == "release").sum(),
        firsts=(pl.col("event") == "first_token").sum(),
        completed=(pl.col("event") == "completion").any(),
        ticks_tokens=pl.col("tokens").filter(pl.col("event").is_in(["first_token", "token"])).sum(),
        output=pl.col("output_tokens").filter(pl.col("event") == "completion").first(),
        admissions=(pl.col("event") == "admission").sum(),
        preemptions=(pl.col("event") == "preemption").sum(),
    )
    rules = {
        "arrival_not_first": a.filter((pl.col("event") == "arrival") & (pl.col("pos") != 0)),
        "admission_while_not_queued": a.filter(
            (pl.col("event") == "admission") & (pl.col("adm_before") != pl.col("pre_before"))
        ),
        "first_token_while_not_running": a.filter((pl.col("event") == "first_token") & ~running),
        "token_before_first_token": a.filter(
            (pl.col("event") == "token") & (pl.col("first_before") == 0)
        ),
        "token_while_not_running": a.filter((pl.col("event") == "token") & ~running),
        "preemption_while_not_running": a.filter((pl.col("event") == "preemption") & ~running),
        "event_after_terminal": a.filter(
            (pl.col("term_before") > 0) & (pl.col("event") != "release")
        ),
        "release_before_terminal": a.filter(
            (pl.col("event") == "release") & (pl.col("term_before") == 0)
        ),
        "ts_decreasing": a.filter(pl.col("ts") < pl.col("prev_ts")),
        "tie_out_of_lifecycle_order": a.filter(
            (pl.col("ts") == pl.col("prev_ts")) & (pl.col("rank") < pl.col("prev_rank"))
        ),
        "not_one_arrival": per.filter(pl.col("arrivals") != 1),
        "duplicate_terminal": per.filter(pl.col("terminals") > 1),
        "duplicate_release": per.filter(pl.col("releases") > 1),
        "duplicate_first_token": per.filter(pl.col("firsts") > 1),
        "completion_without_tokens": per.filter(pl.col("completed") & (pl.col("firsts") == 0)),
        "tokens_differ_from_output": per.filter(
            pl.col("completed") & (pl.col("ticks_tokens") != pl.col("output"))
        ),
        "completed_not_readmitted": per.filter(
            pl.col("completed") & (pl.col("admissions") != pl.col("preemptions") + 1)
        ),
    }
    return {name: frame.height for name, frame in rules.items() if frame.height}


def cancel_states(events: pl.DataFrame) -> dict[str, int]:
    """The state each cancelled request was in, derived from the events alone."""
    a = annotate(events).filter(pl.col("event") == "cancellation")
    state = (
        pl.when(pl.col("adm_before") == pl.col("pre_before"))
        .then(pl.lit("queued"))
        .when(pl.col("first_before") == 0)
        .then(pl.lit("prefill"))
        .otherwise(pl.lit("decode"))
    )
    return dict(a.group_by(state.alias("state")).len().iter_rows())


def parquet_bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf, compression="zstd")
    return buf.getvalue()


# --------------------------------------------------------------------------- schema


@pytest.mark.slow
def test_event_log_has_the_canonical_columns(realistic: Simulation) -> None:
    ev = realistic.events
    assert ev.schema == pl.Schema(EVENT_COLUMNS)
    # every kind but ``error``: the simulated server never fails a request
    assert set(ev["event"].unique()) == set(EVENT_KINDS) - {"error"}
    assert ev["policy"].unique().to_list() == ["fcfs"]
    assert ev["ts"].is_sorted()
    ticks = ev.filter(pl.col("event").is_in(["first_token", "token"]))
    assert ticks["tokens"].null_count() == 0 and ticks["tokens"].min() >= 1
    others = ev.filter(~pl.col("event").is_in(["first_token", "token"]))
    assert others["tokens"].null_count() == others.height
    arrivals = ev.filter(pl.col("event") == "arrival")
    assert arrivals["prompt_tokens"].null_count() == 0
    assert ev.filter(pl.col("event") != "arrival")["prompt_tokens"].null_count() == (
        ev.height - arrivals.height
    )
    completions = ev.filter(pl.col("event") == "completion")
    assert completions["output_tokens"].null_count() == 0
    assert ev["output_tokens"].null_count() == ev.height - completions.height


def test_events_interleave_requests_in_time_order(realistic: Simulation) -> None:
    # A real log: not grouped by request, one clock.
    first_rows = realistic.events.head(2_000)["request_id"]
    assert first_rows.n_unique() > 20
    assert (first_rows != first_rows.shift()).sum() > 500


# --------------------------------------------------------------------------- determinism


@pytest.mark.slow
def test_same_seed_gives_a_byte_identical_log(realistic: Simulation) -> None:
    again = _realistic_run(seed=7)
    assert again.events.equals(realistic.events)
    assert parquet_bytes(again.events) == parquet_bytes(realistic.events)
    assert again.steps.equals(realistic.steps)


@pytest.mark.slow
def test_another_seed_gives_another_log(realistic: Simulation) -> None:
    other = _realistic_run(seed=8)
    assert not other.events.equals(realistic.events)
    # ... but the workload part is the same.
    arrivals = pl.col("event") == "arrival"
    assert (
        other.events.filter(arrivals)
        .drop("policy")
        .equals(realistic.events.filter(arrivals).drop("policy"))
    )


# --------------------------------------------------------------------------- lifecycle


@pytest.mark.slow
@pytest.mark.parametrize("run", ["realistic", "realistic_chunked"])
def test_every_request_follows_the_lifecycle(run: str, request: pytest.FixtureRequest) -> None:
    sim: Simulation = request.getfixturevalue(run)
    assert violations(sim.events) == {}


def test_realistic_run_has_every_feature(realistic: Simulation) -> None:
    req, ev = realistic.requests, realistic.events
    outcomes = dict(req.group_by("outcome").len().iter_rows())
    assert outcomes["completed"] > 0.8 * req.height
    assert outcomes["in_flight"] > 0  # the horizon cuts the log
    assert outcomes.get("rejected", 0) == 0
    assert (req["preemptions"] > 0).sum() > 5
    assert ev.filter(pl.col("tokens") > 1).height > 100  # bundled chunks
    assert ev.filter(pl.col("event") == "release").height > 0
    # Queueing under load: some requests wait a long time.
    assert realistic.steps["queued"].max() >= 10


@pytest.mark.parametrize("run", ["realistic", "realistic_chunked"])
def test_cancellations_happen_in_each_state(run: str, request: pytest.FixtureRequest) -> None:
    sim: Simulation = request.getfixturevalue(run)
    from_events = cancel_states(sim.events)
    assert set(from_events) == {"queued", "prefill", "decode"}
    assert min(from_events.values()) >= 3
    # The engine's own accounting agrees with what the log shows.
    engine = dict(
        sim.requests.filter(pl.col("outcome") == "cancelled")
        .group_by("cancel_state")
        .len()
        .iter_rows()
    )
    assert engine == from_events


def test_preempted_requests_come_back_and_keep_their_first_token(realistic: Simulation) -> None:
    a = annotate(realistic.events)
    preempted = realistic.requests.filter(
        (pl.col("preemptions") > 0) & (pl.col("outcome") == "completed")
    )["request_id"]
    assert len(preempted) > 0
    per = (
        a.filter(pl.col("request_id").is_in(preempted.implode()))
        .group_by("request_id")
        .agg(
            admissions=(pl.col("event") == "admission").sum(),
            preemptions=(pl.col("event") == "preemption").sum(),
            firsts=(pl.col("event") == "first_token").sum(),
            last_preemption=pl.col("row").filter(pl.col("event") == "preemption").max(),
            last_admission=pl.col("row").filter(pl.col("event") == "admission").max(),
        )
    )
    assert (per["admissions"] == per["preemptions"] + 1).all()
    assert (per["last_admission"] > per["last_preemption"]).all()
    assert (per["firsts"] == 1).all()


def test_completed_requests_deliver_exactly_their_output(realistic: Simulation) -> None:
    ev = realistic.events
    delivered = (
        ev.filter(pl.col("event").is_in(["first_token", "token"]))
        .group_by("request_id")
        .agg(pl.col("tokens").sum().alias("delivered"))
    )
    done = ev.filter(pl.col("event") == "completion").join(delivered, on="request_id")
    assert done.height == realistic.requests.filter(pl.col("outcome") == "completed").height
    assert (done["delivered"] == done["output_tokens"]).all()
    # Cancelled requests deliver fewer tokens than they would have generated.
    cancelled = realistic.requests.filter(pl.col("outcome") == "cancelled")
    assert (cancelled["tokens_delivered"] < cancelled["output_tokens"]).all()


def test_first_token_carries_one_token(realistic: Simulation) -> None:
    firsts = realistic.events.filter(pl.col("event") == "first_token")
    assert firsts["tokens"].unique().to_list() == [1]


def test_horizon_cuts_the_log_but_keeps_releases(realistic: Simulation) -> None:
    horizon = realistic.config.horizon_ns
    assert horizon is not None
    late = realistic.events.filter(pl.col("ts") > horizon)
    assert set(late["event"].unique()) <= {"release"}
    in_flight = realistic.requests.filter(pl.col("outcome") == "in_flight")["request_id"]
    ended = realistic.events.filter(
        pl.col("request_id").is_in(in_flight.implode()) & pl.col("event").is_in(TERMINAL)
    )
    assert ended.height == 0


def test_releases_follow_terminal_events_except_leaks(realistic: Simulation) -> None:
    ev = realistic.events
    terminal = ev.filter(pl.col("event").is_in(TERMINAL)).select("request_id", term="ts")
    release = ev.filter(pl.col("event") == "release").select("request_id", rel="ts")
    joined = terminal.join(release, on="request_id", how="left")
    delay = REALISTIC.release_delay_ns
    assert delay is not None
    assert (joined.drop_nulls()["rel"] >= joined.drop_nulls()["term"] + delay).all()
    leaked = joined["rel"].null_count()
    assert 0 < leaked < 0.05 * joined.height


# --------------------------------------------------------------------------- budgets


@pytest.mark.parametrize("run", ["realistic", "realistic_chunked"])
def test_budgets_are_never_exceeded(run: str, request: pytest.FixtureRequest) -> None:
    sim: Simulation = request.getfixturevalue(run)
    steps, cfg = sim.steps, sim.config
    assert steps["kv_blocks_used"].max() <= cfg.kv_blocks
    assert steps["kv_blocks_used"].max() > 0.9 * cfg.kv_blocks  # the cache was under pressure
    assert steps["batch_tokens"].max() <= cfg.max_batch_tokens
    assert steps["running"].max() <= cfg.max_running
    assert (steps["end_ns"] > steps["start_ns"]).all()
    assert (steps["start_ns"] >= steps["end_ns"].shift().fill_null(0)).all()


@pytest.mark.slow
def test_kv_pressure_preempts_and_still_finishes_everyone() -> None:
    wl = synthetic_workload(300, 50.0, seed=3)  # all but simultaneous
    cfg = EngineConfig(kv_blocks=400, block_size=16, max_running=64)
    sim = run_simulation(wl, cfg)
    assert sim.steps["kv_blocks_used"].max() <= 400
    assert sim.requests["preemptions"].sum() > 10
    assert (sim.requests["outcome"] == "completed").all()
    assert violations(sim.events) == {}


class _CheckedEngine(simulate_module._Engine):
    """White-box: re-derive the KV accounting from per-request state at every step."""

    def _schedule(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        decoders, pre, chunks, preempted = super()._schedule(t)
        run = np.array(self.running, dtype=np.int64)
        assert int(self.blocks[run].sum()) == self.used_blocks <= self.cfg.kv_blocks
        block = self.cfg.block_size
        # Every request's blocks hold what it will have cached at the end of the step.
        assert (
            self.blocks[decoders] * block >= self.prompt[decoders] + self.generated[decoders]
        ).all()
        assert (self.blocks[pre] * block >= self.computed[pre] + chunks).all()
        assert self.blocks[self.state == simulate_module._QUEUED].sum() == 0
        return decoders, pre, chunks, preempted


@pytest.mark.parametrize("policy", ["fcfs", "chunked", "sjf"])
def test_kv_accounting_matches_per_request_state(policy: str) -> None:
    wl = synthetic_workload(400, 8.0, seed=5, burstiness=0.5)
    cfg = EngineConfig(
        policy=policy,
        max_batch_tokens=512 if policy == "chunked" else 4096,
        kv_blocks=700,
        cancel_fraction=0.2,
        release_delay_ns=0,
        seed=5,
    )
    sim = _CheckedEngine(validate_workload(wl), cfg).run()
    assert sim.requests["preemptions"].sum() > 0
    assert violations(sim.events) == {}


def test_step_time_follows_the_documented_model() -> None:
    cfg = EngineConfig()
    assert cfg.step_time_ns(512, 0, 0) == 10_000_000 + 512 * 80_000
    assert cfg.step_time_ns(0, 64, 64_000) == 10_000_000 + 64 * 100_000 + 64_000 * 250
    wl = pl.DataFrame(
        {"request_id": ["a"], "arrival_ns": [0], "prompt_tokens": [512], "output_tokens": [3]}
    )
    ev = simulate(wl, cfg)
    ticks = ev.filter(pl.col("event").is_in(["first_token", "token"]))["ts"].to_list()
    assert ticks[0] == cfg.step_time_ns(512, 0, 0)
    assert ticks[1] - ticks[0] == cfg.step_time_ns(0, 1, 513)
    assert ticks[2] - ticks[1] == cfg.step_time_ns(0, 1, 514)


# --------------------------------------------------------------------------- policies


def _same_time_workload(prompts: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "request_id": [f"q{i}" for i in range(len(prompts))],
            "arrival_ns": [0] * len(prompts),
            "prompt_tokens": prompts,
            "output_tokens": [4] * len(prompts),
        }
    )


def _admission_order(events: pl.DataFrame) -> list[str]:
    return events.filter(pl.col("event") == "admission")["request_id"].to_list()


def test_sjf_admits_the_shortest_prompt_first_and_fcfs_the_oldest() -> None:
    wl = _same_time_workload([900, 100, 500, 300])
    fcfs = simulate(wl, EngineConfig(policy="fcfs", max_running=1))
    sjf = simulate(wl, EngineConfig(policy="sjf", max_running=1))
    assert _admission_order(fcfs) == ["q0", "q1", "q2", "q3"]
    assert _admission_order(sjf) == ["q1", "q3", "q2", "q0"]


def test_chunked_prefill_splits_long_prompts_and_keeps_decoding() -> None:
    wl = pl.DataFrame(
        {
            "request_id": ["short", "long"],
            "arrival_ns": [0, 30 * MS],
            "prompt_tokens": [100, 2000],
            "output_tokens": [40, 2],
        }
    )
    cfg = EngineConfig(policy="chunked", max_batch_tokens=512)
    sim = run_simulation(wl, cfg)
    long_first = sim.events.filter(
        (pl.col("request_id") == "long") & (pl.col("event") == "first_token")
    )["ts"][0]
    long_admit = sim.events.filter(
        (pl.col("request_id") == "long") & (pl.col("event") == "admission")
    )["ts"][0]
    during = sim.steps.filter((pl.col("start_ns") >= long_admit) & (pl.col("end_ns") <= long_first))
    assert during.height == 4  # 2000 prompt tokens at <= 511 per step
    assert (during["decode_seqs"] == 1).all()  # the short request never paused
    assert (during["batch_tokens"] <= 512).all()
    # Under fcfs the short request pauses for one long prefill step instead.
    fcfs = run_simulation(wl, EngineConfig(policy="fcfs"))
    gaps = (
        fcfs.events.filter((pl.col("request_id") == "short") & (pl.col("event") == "token"))["ts"]
        .diff()
        .drop_nulls()
    )
    assert gaps.max() >= EngineConfig().step_time_ns(2000, 0, 0)


@pytest.mark.slow
def test_policies_share_the_workload_and_differ_in_latency() -> None:
    wl = synthetic_workload(400, 4.5, seed=1)
    runs = {
        name: simulate(wl, EngineConfig(policy=name, max_batch_tokens=budget, kv_blocks=2048))
        for name, budget in (("fcfs", 4096), ("chunked", 512), ("sjf", 4096))
    }
    arrivals = {
        name: ev.filter(pl.col("event") == "arrival").drop("policy") for name, ev in runs.items()
    }
    assert arrivals["fcfs"].equals(arrivals["chunked"]) and arrivals["fcfs"].equals(arrivals["sjf"])

    def max_gap(ev: pl.DataFrame) -> int:
        ticks = ev.filter(pl.col("event").is_in(["first_token", "token"]))
        return int(ticks.select(pl.col("ts").diff().over("request_id").max()).item())

    assert max_gap(runs["chunked"]) < max_gap(runs["fcfs"])


# --------------------------------------------------------------------------- edges


def test_rejects_requests_that_can_never_fit() -> None:
    wl = pl.DataFrame(
        {
            "request_id": ["ok", "huge"],
            "arrival_ns": [0, 5 * MS],
            "prompt_tokens": [100, 5000],
            "output_tokens": [2, 2],
        }
    )
    sim = run_simulation(wl, EngineConfig(max_batch_tokens=4096))
    huge = sim.events.filter(pl.col("request_id") == "huge")
    assert huge["event"].to_list() == ["arrival", "cancellation"]
    assert huge["ts"].to_list() == [5 * MS, 5 * MS]
    assert dict(sim.requests.select("request_id", "outcome").iter_rows())["huge"] == "rejected"
    # Chunked prefill is limited by the KV cache only.
    chunked = run_simulation(wl, EngineConfig(policy="chunked", max_batch_tokens=512))
    assert (chunked.requests["outcome"] == "completed").all()


def test_empty_workload_gives_an_empty_log() -> None:
    wl = synthetic_workload(0, 1.0, seed=0)
    ev = simulate(wl)
    assert ev.height == 0 and ev.schema == pl.Schema(EVENT_COLUMNS)


def test_bad_configs_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown scheduling policy"):
        EngineConfig(policy="lifo")
    with pytest.raises(UsageError, match="max_running"):
        EngineConfig(max_running=256, max_batch_tokens=128)
    with pytest.raises(UsageError, match="cancel_fraction"):
        EngineConfig(cancel_fraction=1.5)
    with pytest.raises(UsageError, match="kv_blocks"):
        EngineConfig(kv_blocks=0)


def test_bad_workload_is_an_input_error() -> None:
    with pytest.raises(InputError, match="missing column"):
        simulate(pl.DataFrame({"request_id": ["a"], "arrival_ns": [0]}))
    dup = pl.DataFrame(
        {
            "request_id": ["a", "a"],
            "arrival_ns": [0, 1],
            "prompt_tokens": [1, 1],
            "output_tokens": [1, 1],
        }
    )
    with pytest.raises(InputError, match="more than once"):
        simulate(dup)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 25),
    rate=st.floats(0.5, 200.0),
    policy=st.sampled_from(["fcfs", "chunked", "sjf"]),
    kv_blocks=st.integers(120, 600),
    budget=st.sampled_from([256, 1024, 4096]),
    cancel=st.sampled_from([0.0, 0.5, 1.0]),
    bundle=st.sampled_from([0.0, 0.5]),
    seed=st.integers(0, 2**16),
)
def test_any_small_run_is_valid(
    n: int,
    rate: float,
    policy: str,
    kv_blocks: int,
    budget: int,
    cancel: float,
    bundle: float,
    seed: int,
) -> None:
    wl = synthetic_workload(n, rate, seed=seed)
    cfg = EngineConfig(
        policy=policy,
        kv_blocks=kv_blocks,
        max_batch_tokens=budget,
        max_running=min(64, budget),
        cancel_fraction=cancel,
        bundle_prob=bundle,
        release_delay_ns=0,
        seed=seed,
    )
    sim = run_simulation(wl, cfg)
    assert violations(sim.events) == {}
    assert sim.steps["kv_blocks_used"].max() is None or (
        sim.steps["kv_blocks_used"].max() <= kv_blocks
    )
    assert sim.steps.height == 0 or sim.steps["batch_tokens"].max() <= budget
    # Every request ends (no horizon): completed, cancelled or rejected, and is released.
    assert (sim.requests["outcome"] != "in_flight").all()
    assert sim.requests["released"].all()


# --------------------------------------------------------------------------- sample traces


def test_worked_example_has_the_lesson_numbers() -> None:
    csv = pl.read_csv(SAMPLES / "worked_example.csv", infer_schema_length=None)
    parquet = pl.read_parquet(SAMPLES / "worked_example.parquet")
    assert csv.equals(parquet)
    assert violations(csv) == {}
    ts = dict(csv.filter(pl.col("event") != "token").select("event", "ts").iter_rows())
    ticks = csv.filter(pl.col("event").is_in(["first_token", "token"]))
    gaps = ticks["ts"].diff().drop_nulls()
    assert ts["admission"] - ts["arrival"] == 30 * MS  # queue wait
    assert ts["first_token"] - ts["admission"] == 50 * MS  # prefill
    assert ts["first_token"] - ts["arrival"] == 80 * MS  # TTFT
    assert ticks["ts"].max() - ts["first_token"] == 500 * MS  # decode
    assert ts["completion"] - ts["arrival"] == 580 * MS  # response
    assert (gaps == 5 * MS).all() and len(gaps) == 100  # ITL
    assert ticks["tokens"].sum() == 101 == csv["output_tokens"].max()  # TPOT 500/100 = 5 ms


@pytest.mark.parametrize(
    "name",
    [
        "realistic.parquet",
        "policy_fcfs.parquet",
        "policy_chunked.parquet",
        "policy_sjf.parquet",
        "different_workload.parquet",
        "azure_conv_replay.parquet",
    ],
)
def test_sample_traces_are_valid_and_small(name: str) -> None:
    path = SAMPLES / name
    assert path.stat().st_size < 5_000_000
    ev = pl.read_parquet(path)
    assert ev.schema == pl.Schema(EVENT_COLUMNS)
    assert violations(ev) == {}


def test_realistic_sample_cancels_in_each_state() -> None:
    ev = pl.read_parquet(SAMPLES / "realistic.parquet")
    assert set(cancel_states(ev)) == {"queued", "prefill", "decode"}


def test_policy_samples_share_their_workload() -> None:
    def workload(name: str) -> pl.DataFrame:
        ev = pl.read_parquet(SAMPLES / name)
        return ev.filter(pl.col("event") == "arrival").select("request_id", "ts", "prompt_tokens")

    base = workload("policy_fcfs.parquet")
    assert base.equals(workload("policy_chunked.parquet"))
    assert base.equals(workload("policy_sjf.parquet"))
    assert not base.equals(workload("different_workload.parquet"))


def _load_make_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_shipped_samples_match_their_recipes() -> None:
    recipes = _load_make_samples()
    assert recipes.worked_example().equals(pl.read_parquet(SAMPLES / "worked_example.parquet"))
    assert recipes.policy("fcfs").events.equals(pl.read_parquet(SAMPLES / "policy_fcfs.parquet"))
