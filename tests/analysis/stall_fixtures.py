"""A simulated run with injected long prefills, and its steps: the stall tests' oracle."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.sim.config import EngineConfig
from servetrace.sim.eventlog import Simulation
from servetrace.sim.simulate import run_simulation
from servetrace.sim.steps_record import canonical_steps
from servetrace.sources.steps.schema import conform
from tests.conftest import events, make_request

MS = 1_000_000
# Chunked prefill, 512-token steps: a long prompt is prefilled 512 - (decoders) tokens
# per step *beside* the decoding requests, which is what stretches their ITL.
CONFIG = EngineConfig(policy="chunked", max_batch_tokens=512, kv_blocks=8192, seed=1)
# Prefill-first (vLLM v0's default): a step that admits a prompt prefills only, and every
# running request's decode waits it out; the budget fits a whole long prompt.
PREFILL_FIRST = EngineConfig(policy="fcfs", max_batch_tokens=8192, kv_blocks=8192, seed=1)
LONG_PROMPT = 8_000
LONG_IDS = ("long-0", "long-1")


def injected_workload(n: int = 160) -> pl.DataFrame:
    """``n`` short requests, one every 40 ms (prompt 64, output 64), and two requests with
    8,000-token prompts arriving at 2 s and 4 s."""
    short = pl.DataFrame(
        {
            "request_id": [f"r{i:03d}" for i in range(n)],
            "arrival_ns": [i * 40 * MS for i in range(n)],
            "prompt_tokens": [64] * n,
            "output_tokens": [64] * n,
        }
    )
    long = pl.DataFrame(
        {
            "request_id": list(LONG_IDS),
            "arrival_ns": [2000 * MS, 4000 * MS],
            "prompt_tokens": [LONG_PROMPT] * 2,
            "output_tokens": [4] * 2,
        }
    )
    return pl.concat([short, long]).sort("arrival_ns", "request_id")


def injected_run() -> Simulation:
    return run_simulation(injected_workload(), CONFIG)


def write_injected(directory: Path, sim: Simulation | None = None) -> tuple[Path, Path]:
    """The run's events and steps (``injected_run``'s by default) as Parquet files in
    ``directory``."""
    sim = injected_run() if sim is None else sim
    trace, steps = directory / "injected.parquet", directory / "injected_steps.parquet"
    sim.events.write_parquet(trace)
    canonical_steps(sim).write_parquet(steps)
    return trace, steps


def write_hand(directory: Path) -> tuple[Path, Path]:
    """Request a: gaps of 10, 15 (its step carries 300 prefill tokens), 5 and 10 ms; b's
    one gap (55, 60] ms lies after the last step; 3 decode-only steps: no baseline."""
    trace, steps = directory / "t.parquet", directory / "s.parquet"
    events(
        make_request("a", admission=0, first=10, ticks=[20, 35, 40, 50], complete=50),
        make_request("b", admission=0, first=55, ticks=[60], complete=60),
    ).write_parquet(trace)
    conform(
        pl.DataFrame(
            {
                "ts_start": [0, 10 * MS, 20 * MS, 35 * MS, 40 * MS],
                "ts_end": [10 * MS, 20 * MS, 35 * MS, 40 * MS, 50 * MS],
                "prefill_requests": [1, 0, 1, 0, 0],
                "prefill_tokens": [100, 0, 300, 0, 0],
                "decode_requests": [0, 1, 1, 1, 1],
                "decode_tokens": [0, 1, 1, 1, 1],
            }
        )
    ).write_parquet(steps)
    return trace, steps
