"""Whether a workload overloads the engine model: offered load against capacity.

A request costs the engine at least this much step time (the linear step model of
``servetrace.sim.config``, at the most favourable batching):

- its prefill: ``step_prefill_token_ns · prompt`` plus its share of the fixed cost of the
  steps that prefill it (``step_base_ns · prompt / max_batch_tokens``: a step takes at
  most ``max_batch_tokens`` tokens);
- each of its ``output − 1`` decode steps: ``step_decode_seq_ns`` plus
  ``step_context_token_ns`` per token of context it reads (``prompt + k`` at the k-th),
  plus its share ``step_base_ns / B`` of the step's fixed cost, where ``B`` is the largest
  batch the engine can run: ``max_running``, the token budget, and the KV cache divided
  by the tokens a request holds on average (``prompt + output / 2``).

A request longer than the engine takes (``EngineConfig.max_context_tokens``) is rejected
and costs nothing. The mean over the workload is its *work* per request; ``1 / work`` is the most
requests per second the engine can serve, and ``arrival rate × work`` the offered load
(utilisation). Near or above 1 the queue grows for as long as the arrivals keep coming:
a queue wait then measures the backlog of the replay, not the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from servetrace.sim.config import EngineConfig
from servetrace.units import NS_PER_S

# The full Azure conversation trace offers 0.98 of the fcfs engine's best-case capacity
# (1.04 of the step time it actually took) and queues for 113 s at the median.
SATURATED = 0.95


@dataclass(frozen=True)
class OfferedLoad:
    """``arrival_rate_per_s`` over the workload's span (None with fewer than two arrivals
    or all at once), ``work_s`` the mean engine time a request needs at least,
    ``capacity_per_s = 1 / work_s`` and ``utilisation = rate × work``."""

    requests: int
    arrival_rate_per_s: float | None
    work_s: float | None
    batch_limit: int | None

    @property
    def capacity_per_s(self) -> float | None:
        return 1 / self.work_s if self.work_s else None

    @property
    def utilisation(self) -> float | None:
        if self.arrival_rate_per_s is None or self.work_s is None:
            return None
        return self.arrival_rate_per_s * self.work_s

    @property
    def saturated(self) -> bool:
        """At or above what the engine can serve: the utilisation is a lower bound (the
        work at the best batching), and a queue's wait grows without bound as the true
        one nears 1, so ``SATURATED`` of it already saturates the engine."""
        return (self.utilisation or 0.0) >= SATURATED


def offered_load(workload: pl.DataFrame, config: EngineConfig) -> OfferedLoad:
    """The offered load of ``workload`` (``sim.workloads`` columns) on ``config``."""
    n = workload.height
    if n == 0:
        return OfferedLoad(0, None, None, None)
    # A request longer than the engine takes is rejected at once: it costs nothing.
    fits = (pl.col("prompt_tokens") + pl.col("output_tokens") - 1) <= config.max_context_tokens
    stats = workload.select(
        span=pl.col("arrival_ns").max() - pl.col("arrival_ns").min(),
        held=(pl.col("prompt_tokens") + pl.col("output_tokens") / 2).filter(fits).mean(),
    ).row(0, named=True)
    fitting = config.kv_tokens // stats["held"] if stats["held"] else config.max_running
    batch = max(1, min(config.max_running, config.max_batch_tokens, int(fitting)))
    prompt = pl.col("prompt_tokens").cast(pl.Float64)
    decodes = (pl.col("output_tokens") - 1).cast(pl.Float64)
    # Σ_{k=1}^{o−1} (prompt + k) = (o−1)·prompt + (o−1)·o/2
    context = decodes * prompt + decodes * (decodes + 1) / 2
    work_ns = (
        config.step_prefill_token_ns * prompt
        + config.step_base_ns * prompt / config.max_batch_tokens
        + decodes * (config.step_decode_seq_ns + config.step_base_ns / batch)
        + config.step_context_token_ns * context
    )
    work = float(workload.select(pl.when(fits).then(work_ns).otherwise(0.0).mean()).item())
    work /= NS_PER_S
    span_s = stats["span"] / NS_PER_S
    rate = (n - 1) / span_s if n > 1 and span_s > 0 else None
    return OfferedLoad(n, rate, work, batch)
