"""Analysis-like inputs for the compare/check tests, independent of the pipeline.

``StubAnalysis`` has what ``servetrace.compare.catalog.AnalysisLike`` asks for: a
``requests`` frame, a ``gaps`` frame and ``summary.throughput``. ``synthetic`` builds a
workload whose request ids, arrivals and lengths depend only on ``workload_seed`` and
whose latencies depend on ``latency_seed`` and the scale factors, so two calls with the
same workload and different latencies are a controlled comparison.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

MS = 1_000_000


@dataclass(frozen=True)
class StubSummary:
    throughput: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class StubAnalysis:
    requests: pl.DataFrame
    gaps: pl.DataFrame
    summary: StubSummary


def throughput_of(requests: pl.DataFrame) -> dict[str, float | None]:
    """Throughput over first arrival → last terminal event, as DESIGN §6 defines it."""
    if requests.height == 0:
        return {
            "window_s": None,
            "requests_per_s": None,
            "output_tokens_per_s": None,
            "total_tokens_per_s": None,
            "goodput_requests_per_s": None,
        }
    end = requests.select((pl.col("arrival_ns") + pl.col("e2e_ns")).max()).item()
    start = requests.get_column("arrival_ns").min()
    window = (end - start) / 1e9 if end is not None and end > start else 1.0
    done = requests.filter(pl.col("outcome") == "completed")
    out_tokens = float(requests.get_column("output_tokens").fill_null(0).sum())
    prompt = requests.get_column("prompt_tokens")
    total = None
    if prompt.null_count() < requests.height:
        total = (out_tokens + float(prompt.fill_null(0).sum())) / window
    return {
        "window_s": window,
        "requests_per_s": done.height / window,
        "output_tokens_per_s": out_tokens / window,
        "total_tokens_per_s": total,
        "goodput_requests_per_s": None,
    }


def from_frames(requests: pl.DataFrame, gaps: pl.DataFrame | None = None) -> StubAnalysis:
    if gaps is None:
        gaps = pl.DataFrame(
            schema={"request_id": requests.schema["request_id"], "itl_ns": pl.Int64}
        )
    return StubAnalysis(requests, gaps, StubSummary(throughput_of(requests)))


def synthetic(
    n: int = 200,
    *,
    workload_seed: int = 0,
    latency_seed: int = 1,
    queue_scale: float = 1.0,
    prefill_scale: float = 1.0,
    itl_scale: float = 1.0,
    cancelled: int = 0,
    prompt_known: bool = True,
    id_prefix: str = "r",
    mean_output: int = 16,
) -> StubAnalysis:
    """A trace of ``n`` requests (the last ``cancelled`` cancelled while decoding)."""
    work = np.random.default_rng(workload_seed)
    arrival = np.cumsum(work.exponential(50 * MS, n)).astype(np.int64) + 1_000 * MS
    prompt = work.integers(16, 2048, n)
    output = work.integers(2, 2 * mean_output, n)
    lat = np.random.default_rng(latency_seed)
    queue = (lat.lognormal(np.log(20 * MS), 0.8, n) * queue_scale).astype(np.int64)
    prefill = (prompt * 0.05 * MS * lat.lognormal(0, 0.2, n) * prefill_scale).astype(np.int64)
    gaps_total = int((output - 1).sum())
    owner = np.repeat(np.arange(n), output - 1)
    gap_values = (lat.lognormal(np.log(10 * MS), 0.3, gaps_total) * itl_scale).astype(np.int64)
    decode = np.bincount(owner, weights=gap_values, minlength=n).astype(np.int64)
    itl_max = np.zeros(n, dtype=np.int64)
    np.maximum.at(itl_max, owner, gap_values)
    tail = lat.integers(0, MS, n)
    ttft = queue + prefill
    response = ttft + decode
    ids = [f"{id_prefix}{i}" for i in range(n)]
    outcome = np.array(["completed"] * n, dtype=object)
    if cancelled:
        outcome[n - cancelled :] = "cancelled"
    requests = pl.DataFrame(
        {
            "request_id": ids,
            "outcome": outcome.tolist(),
            "cancelled_in": [None if o == "completed" else "decode" for o in outcome],
            "arrival_ns": arrival,
            "queue_wait_ns": queue,
            "prefill_ns": prefill,
            "ttft_ns": ttft,
            "decode_ns": decode,
            "response_ns": response,
            "e2e_ns": response + tail,
            "delivery_tail_ns": tail,
            "itl_max_ns": itl_max,
            "requeued_ns": [None] * n,
            "itl_mean_ns": decode / (output - 1),
            "tpot_ns": decode / (output - 1),
            "formula_residual_ns": np.zeros(n),
            "output_tokens": output,
            "ticks": output,
            "preemptions": (lat.random(n) < 0.1).astype(np.int64),
            "prompt_tokens": prompt if prompt_known else [None] * n,
        },
        schema_overrides={
            "requeued_ns": pl.Int64,
            "prompt_tokens": pl.Int64,
            "cancelled_in": pl.String,
        },
    )
    done = outcome == "completed"
    keep = done[owner]
    gaps = pl.DataFrame(
        {
            "request_id": [ids[i] for i in owner[keep]],
            "itl_ns": gap_values[keep],
        },
        schema={"request_id": pl.String, "itl_ns": pl.Int64},
    )
    return from_frames(requests, gaps)
