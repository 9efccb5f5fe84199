"""Real analyses of generated event logs, for the compare, check and render tests.

Every helper here builds canonical events and runs them through
``servetrace.analysis.memory.analyze_events`` (or the streaming engine), so the tests see
exactly the numbers production computes: throughput over the trace window, ITL gaps from
tick times, TPOT from the decode time, outcomes from the lifecycle.

``synthetic`` builds a workload whose request ids, arrivals and lengths depend only on
``workload_seed`` and whose latencies depend on ``latency_seed`` and the scale factors,
so two calls with the same workload and different latencies are a controlled
comparison (the same draws, scaled).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.result import Analysis, AnalysisOptions
from tests.conftest import MS, SCHEMA, events, make_request


def synthetic_events(
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
) -> pl.DataFrame:
    """Events of ``n`` requests; the last ``cancelled`` are cancelled while decoding.

    Per request: arrival, admission after a lognormal queue wait, a prefill proportional
    to the prompt, ``output - 1`` lognormal gaps between ticks, then completion after a
    delivery tail under 1 ms. One request in ten is preempted during its prefill (and
    readmitted), which leaves queue wait, prefill and TTFT as drawn and adds requeued
    time. A cancelled request keeps the first half of its ticks.
    """
    work = np.random.default_rng(workload_seed)
    arrival = np.cumsum(work.exponential(50 * MS, n)).astype(np.int64) + 1_000 * MS
    prompt = work.integers(16, 2048, n)
    output = work.integers(2, 2 * mean_output, n)
    lat = np.random.default_rng(latency_seed)
    queue = (lat.lognormal(np.log(20 * MS), 0.8, n) * queue_scale).astype(np.int64)
    prefill = (prompt * 0.05 * MS * lat.lognormal(0, 0.2, n) * prefill_scale).astype(np.int64)
    owner = np.repeat(np.arange(n), output - 1)
    gaps = (lat.lognormal(np.log(10 * MS), 0.3, owner.size) * itl_scale).astype(np.int64)
    tail = lat.integers(0, MS, n)
    preempted = lat.random(n) < 0.1

    admission = arrival + queue
    first = admission + prefill
    # tick k of a request (k >= 1) is its first token plus the sum of its first k gaps
    start = np.concatenate([[0], np.cumsum(output - 1)[:-1]])
    since_first = np.cumsum(gaps) - np.repeat(np.cumsum(gaps)[start - 1] * (start > 0), output - 1)
    ticks = first[owner] + since_first
    index = np.arange(owner.size) - start[owner]  # 0-based gap number within the request
    is_cancelled = np.arange(n) >= n - cancelled
    kept_gaps = np.where(is_cancelled, (output - 1) // 2, output - 1)
    keep = index < kept_gaps[owner]
    last_tick = first.copy()
    np.maximum.at(last_tick, owner[keep], ticks[keep])
    end = last_tick + tail

    ids = np.array([f"{id_prefix}{i}" for i in range(n)], dtype=object)
    pre = np.flatnonzero(preempted)
    frames = {
        "arrival": (np.arange(n), arrival),
        "admission": (
            np.concatenate([np.arange(n), pre]),
            np.concatenate([admission, admission[pre] + (prefill[pre] * 7) // 10]),
        ),
        "preemption": (pre, admission[pre] + (prefill[pre] * 4) // 10),
        "first_token": (np.arange(n), first),
        "token": (owner[keep], ticks[keep]),
        "completion": (np.flatnonzero(~is_cancelled), end[~is_cancelled]),
        "cancellation": (np.flatnonzero(is_cancelled), end[is_cancelled]),
    }
    parts = []
    for kind, (who, ts) in frames.items():
        count = len(who)
        parts.append(
            pl.DataFrame(
                {
                    "request_id": ids[who].tolist(),
                    "event": [kind] * count,
                    "ts": ts,
                    "tokens": [1] * count if kind in ("first_token", "token") else [None] * count,
                    "prompt_tokens": (
                        prompt[who] if kind == "arrival" and prompt_known else [None] * count
                    ),
                    "output_tokens": output[who] if kind == "completion" else [None] * count,
                },
                schema=SCHEMA,
            )
        )
    return pl.concat(parts).sort("ts", maintain_order=True)


def synthetic(n: int = 200, **options: object) -> Analysis:
    """The in-memory analysis of ``synthetic_events(n, **options)``."""
    return analyze_events(synthetic_events(n, **options))  # type: ignore[arg-type]


def streamed(
    frame: pl.DataFrame,
    folder: Path,
    options: AnalysisOptions | None = None,
    exact_gaps: int = 0,
) -> Analysis:
    """The streamed analysis of the events (written to Parquet, read in batches) past its
    exact-gap budget (``exact_gaps=0``: every gap in the log histogram, as production is
    beyond 4 million gaps): it keeps no per-gap samples, only an ITL histogram."""
    from servetrace.analysis.streaming import analyze_streaming
    from servetrace.sources.canonical import read_events

    path = folder / "trace.parquet"
    frame.sort("ts", maintain_order=True).write_parquet(path)
    return analyze_streaming(read_events([str(path)]), options, exact_gaps=exact_gaps)


def one_request(ttft_ms: float) -> Analysis:
    """One completed request: arrival 0, admission at ttft/2, its only token at ttft."""
    ttft = round(ttft_ms * MS)
    rows = make_request("r1", arrival=0, admission=(ttft // 2) / MS, first=ttft / MS)
    rows.append({"request_id": "r1", "event": "completion", "ts": ttft, "output_tokens": 1})
    return analyze_events(events(rows))


def constant_events(prefill_ms: float, n: int = 20, queue_ms: float = 40) -> pl.DataFrame:
    """n requests with the same latencies (every bootstrap interval collapses): arrivals
    100 ms apart, the given queue wait and prefill, then 9 more ticks 10 ms apart
    (decode 90 ms, 10 output tokens, completion at the last tick); prompts 100, 110, …"""
    requests = []
    for i in range(n):
        arrival = i * 100
        first = arrival + queue_ms + prefill_ms
        ticks = [first + 10 * k for k in range(1, 10)]
        requests.append(
            make_request(
                f"r{i}",
                arrival=arrival,
                admission=arrival + queue_ms,
                first=first,
                ticks=ticks,
                complete=ticks[-1],
                prompt_tokens=100 + 10 * i,
            )
        )
    return events(*requests)


def constant_trace(prefill_ms: float, n: int = 20, queue_ms: float = 40) -> Analysis:
    return analyze_events(constant_events(prefill_ms, n, queue_ms))
