"""Run the engine model: `simulate(workload, config)` replays a workload (see
`servetrace.sim.workloads`) through one engine replica (`servetrace.sim.engine`) and
returns the **canonical event log** (docs/design.md §2) a real engine would have written.
It exists to make sample traces and controlled experiments (the same workload under
several schedulers), not to predict production latencies.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.sim.config import EngineConfig
from servetrace.sim.engine import _Engine
from servetrace.sim.eventlog import Simulation
from servetrace.sim.readers import read_workload
from servetrace.sim.synthetic import synthetic_workload
from servetrace.sim.workloads import head, scale_rate, validate_workload

__all__ = ["run_simulation", "simulate", "workload_for"]


def simulate(workload: pl.DataFrame, config: EngineConfig | None = None) -> pl.DataFrame:
    """Replay ``workload`` through the engine model and return its canonical event log.

    ``workload`` has columns ``request_id, arrival_ns, prompt_tokens, output_tokens``
    (`servetrace.sim.workloads`). The result has one row per event with columns
    ``request_id`` (Utf8), ``event`` (Utf8), ``ts`` (Int64 ns from the first arrival),
    ``tokens`` (Int64, on ``first_token``/``token``), ``prompt_tokens`` (on ``arrival``),
    ``output_tokens`` (on ``completion``) and ``policy`` (Utf8), sorted by ``ts`` with
    events at equal times in the order the engine emitted them. Deterministic: the same
    workload and config give a byte-identical frame. Raises `InputError` for a malformed
    workload and `UsageError` (from `EngineConfig`) for an impossible configuration.
    """
    return run_simulation(workload, config).events


def run_simulation(workload: pl.DataFrame, config: EngineConfig | None = None) -> Simulation:
    """Like `simulate`, but also return the per-step and per-request accounting."""
    cfg = config if config is not None else EngineConfig()
    wl = validate_workload(workload)
    return _Engine(wl, cfg).run()


def workload_for(
    path: Path | None,
    requests: int,
    rate: float,
    seed: int,
    burstiness: float = 1.0,
    limit: int | None = None,
    speed: float = 1.0,
) -> pl.DataFrame:
    """What ``servetrace simulate`` replays: the workload file at ``path``, else ``requests``
    seeded synthetic ones at ``rate``; its first ``limit`` requests, ``speed`` times as fast."""
    if path is not None:
        load = read_workload(path)
    else:
        load = synthetic_workload(requests, rate, seed=seed, burstiness=burstiness)
    if limit is not None:
        load = head(load, limit)
    return load if speed == 1.0 else scale_rate(load, speed)
