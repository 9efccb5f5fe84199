"""Replay a trace's own requests through the calibrated engine model, and measure how
far a replay is from the trace, request by request.

The workload is the trace's completed requests: their arrivals (relative to the first),
prompt lengths and output lengths (and, for the priority policy, the attribute that
orders the queue: `servetrace.whatif.priority`). A request cancelled in the trace never finished, so
its output length is unknown; it is left out and counted. The replayed log is a trace
like any other (`servetrace analyze` reads it).

Agreement, per metric and paired by request id: the error of the mean and of p50, p90
and p99 (replayed − real, and relative to real), the per-request mean absolute
percentage error, Pearson's r and the bias (mean of replayed − real). A statistic
*agrees* when its error is within ``max(relative × |real|, absolute)``
(`TOLERANCES`): the replay reproduces the trace there, and its error bounds what a
prediction made with the same model can be trusted to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.result import Analysis
from servetrace.sim.config import EngineConfig
from servetrace.sim.simulate import simulate
from servetrace.sim.workloads import PRIORITY
from servetrace.stats.describe import statistic
from servetrace.units import NS_PER_MS
from servetrace.whatif.calibration import Calibration
from servetrace.whatif.priority import priority_values

METRICS = ("ttft", "queue_wait", "e2e", "itl_mean")
STATS = ("mean", "p50", "p90", "p99")
# statistic → (relative, absolute ns): the agreement a replay must reach to be trusted.
TOLERANCES: dict[str, tuple[float, int]] = {
    "mean": (0.10, 5 * NS_PER_MS),
    "p50": (0.10, 5 * NS_PER_MS),
    "p90": (0.15, 10 * NS_PER_MS),
    "p99": (0.25, 20 * NS_PER_MS),
}


@dataclass(frozen=True)
class Workload:
    requests: pl.DataFrame  # request_id, arrival_ns, prompt_tokens, output_tokens[, priority]
    left_out: int  # requests of the trace that did not complete
    priority_by: str | None = None  # the attribute the priority policy orders by
    priority_missing: int = 0  # requests without a value for it: after every level


def workload_of(analysis: Analysis, priority_by: str | None = None) -> Workload:
    requests = analysis.per_request
    done = requests.filter(
        (pl.col("outcome") == "completed")
        & pl.col("prompt_tokens").is_not_null()
        & (pl.col("output_tokens") >= 1)
    )
    extra = []
    if priority_by is not None:
        extra.append(priority_values(done, priority_by, ", ".join(analysis.inputs)))
    table = done.select(
        pl.col("request_id").cast(pl.String),
        *extra,
        arrival_ns=pl.col("arrival_ns") - pl.col("arrival_ns").min(),
        prompt_tokens=pl.col("prompt_tokens").cast(pl.Int64),
        output_tokens=pl.col("output_tokens").cast(pl.Int64),
    ).sort("arrival_ns", "request_id")
    missing = table[PRIORITY].null_count() if extra else 0
    return Workload(table, requests.height - done.height, priority_by, missing)


def engine_config(
    calibration: Calibration, policy: str, limits: dict[str, int | None]
) -> EngineConfig:
    """The simulator's engine for ``policy`` with the calibrated costs; ``limits`` (a
    knob set for the prediction) win over the calibrated ones. A limit no one knows is
    not applied: it is set beyond anything the workload can reach."""
    known = {name: limit.value for name, limit in calibration.limits.items()}
    known.update({k: v for k, v in limits.items() if v is not None})
    budget = int(known["max_batch_tokens"] or 1 << 20)
    running = known.get("max_running") or budget
    kv_tokens = known.get("kv_tokens")
    # The simulator's own KV block and watermark: the budget is in tokens, not blocks.
    block, watermark = EngineConfig.block_size, EngineConfig.watermark
    blocks = math.ceil(kv_tokens / block / (1 - watermark)) if kv_tokens else (1 << 40) // block
    costs = calibration.costs
    return EngineConfig(
        policy=policy,
        max_batch_tokens=budget,
        max_running=min(int(running), budget),
        kv_blocks=int(blocks),
        step_base_ns=round(costs["base_ns"]),
        step_prefill_token_ns=round(costs["prefill_token_ns"]),
        step_decode_seq_ns=round(costs["decode_seq_ns"]),
        step_context_token_ns=round(costs["context_token_ns"]),
    )


def replay(workload: Workload, config: EngineConfig, label: str) -> Analysis:
    """The analysed trace of ``workload`` run on ``config``."""
    events = simulate(workload.requests, config)
    named = workload.priority_by
    if named is not None and named != PRIORITY and named not in events.columns:
        events = events.rename({PRIORITY: named})  # the trace's own name for it
    return analyze_events(events, inputs=(label,))


def agreement(real: Analysis, replayed: Analysis) -> dict[str, dict[str, object]]:
    """Per metric: each statistic's real and replayed value, error and agreement, and the
    per-request MAPE, Pearson r and bias, over the requests both completed."""
    columns = [f"{m}_ns" for m in METRICS]
    paired = (
        real.per_request.select(pl.col("request_id").cast(pl.String), *columns)
        .join(
            replayed.per_request.select(pl.col("request_id").cast(pl.String), *columns),
            on="request_id",
            suffix="_replayed",
        )
        .drop_nulls()
    )
    out: dict[str, dict[str, object]] = {}
    for metric, column in zip(METRICS, columns, strict=True):
        a = paired[column].to_numpy().astype(np.float64)
        b = paired[f"{column}_replayed"].to_numpy().astype(np.float64)
        stats: dict[str, dict[str, float | bool | None]] = {}
        for stat in STATS:
            r, p = statistic(a, stat), statistic(b, stat)
            if r is None or p is None:
                stats[stat] = {"real_ns": r, "replayed_ns": p, "agrees": None}
                continue
            rel, absolute = TOLERANCES[stat]
            error = p - r
            stats[stat] = {
                "real_ns": r,
                "replayed_ns": p,
                "error_ns": error,
                "relative_error": error / r if r else None,
                "agrees": abs(error) <= max(rel * abs(r), absolute),
            }
        positive = a > 0
        out[metric] = {
            "paired": int(a.size),
            "stats": stats,
            "mape": float(np.mean(np.abs(b[positive] - a[positive]) / a[positive]))
            if positive.any()
            else None,
            "pearson_r": float(np.corrcoef(a, b)[0, 1])
            if a.size > 1 and a.std() > 0 and b.std() > 0
            else None,
            "bias_ns": float(np.mean(b - a)) if a.size else None,
        }
    return out


def misses(agreed: dict[str, dict[str, object]]) -> list[str]:
    """The statistics a replay did not reproduce, as ``metric stat``."""
    return [
        f"{metric} {stat}"
        for metric, row in agreed.items()
        for stat, cell in row["stats"].items()  # type: ignore[attr-defined]
        if cell["agrees"] is False
    ]
