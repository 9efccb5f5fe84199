"""The simulator's trace and its server series written together: agree exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

import servetrace
from servetrace.analysis.result import Analysis
from servetrace.sim.config import EngineConfig
from servetrace.sim.metrics import exposition
from servetrace.sim.simulate import simulate
from servetrace.sim.synthetic import synthetic_workload
from servetrace.sources.server_metrics import read

S = 1_000_000_000


def simulated_pair(
    folder: Path, engine: str = "vllm", **config: Any
) -> tuple[Analysis, pl.DataFrame]:
    """150 requests at 20 req/s, scraped every second; the small KV cache makes the
    engine preempt, so every counter has something to count. ``engine``: whose families
    the series carry; ``config``: more engine settings."""
    settings = EngineConfig(kv_blocks=300, seed=3, **config)
    events = simulate(synthetic_workload(150, 20.0, seed=3), settings)
    trace, prom = folder / "t.parquet", folder / "m.prom"
    events.write_parquet(trace)
    prom.write_text(exposition(events, S, engine))
    return servetrace.analyze(trace), read(prom)
