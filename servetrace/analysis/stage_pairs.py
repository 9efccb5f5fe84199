"""inference-perf's client and server summaries of each load stage side by side, each pair
with the definitional difference that separates them named, never averaged away (design
§11). Values stay in the tools' units (s, tokens, requests); words and ms are ``render``'s.

Differences (``DIFFERENCES``): the two count over different windows (the client its sends,
the server from the stage start to its end plus the scrape interval plus 2 s, which is
``count ÷ rate`` of its success counter); the server's rates sum every series the stage's
Prometheus filter matches; its TTFT is from the request's arrival at the engine and its
percentiles are interpolated in vLLM's histogram buckets; its TPOT is per engine output
step (a speculative-decoding step emits several tokens), the client's per token; its
``prompt_len.mean`` is no per-request mean, so tokens per request are its token rate over
its success rate. A server quantity that is 0 in every statistic may be a query that
failed (inference-perf writes 0.0 then): it is listed as unavailable, not as a zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

DIFFERENCES = {
    "window": "counts over different windows: the client's sends vs the server's stage "
    "window plus scrape interval plus 2 s",
    "rate": "server: rate() of its success counter over its window, summed over every series "
    "the stage's filter matches; client: completions over its own window",
    "tokens": "server: its token rate ÷ its success rate (its prompt_len/output_len mean is "
    "not a per-request mean)",
    "ttft": "server: from arrival at the engine, percentiles interpolated in histogram "
    "buckets; client: from its send, exact",
    "tpot": "server: per engine output step (a speculative step emits several tokens); "
    "client: per output token",
    "e2e": "server: the engine's arrival to its last token; client: its send to the last byte",
}
# Each latency pair's name (its difference) and the quantity both sides report it under.
LATENCIES = (
    ("ttft", "time_to_first_token"),
    ("tpot", "time_per_output_token"),
    ("e2e", "request_latency"),
)
SERVER_GAUGES = (
    "kv_cache_usage_percentage",
    "queue_len",
    "num_preemptions_total",
    "num_requests_swapped",
    "prefix_cache_hit_percent",
)


@dataclass(frozen=True)
class StagePairs:
    path: str
    stages: list[dict[str, Any]]


def _lookup(frame: pl.DataFrame) -> dict[tuple[int, str, str, str], float | None]:
    return {
        (r[0], r[1], r[2], r[3]): r[4]
        for r in frame.select("stage", "side", "quantity", "stat", "value").iter_rows()
    }


def _ratio(server: float | None, client: float | None) -> float | None:
    return None if server is None or not client else server / client


def _pair(
    name: str, stat: str, unit: str, client: float | None, server: float | None, why: str
) -> dict[str, Any]:
    return {
        "quantity": name,
        "stat": stat,
        "unit": unit,
        "client": client,
        "server": server,
        "ratio": _ratio(server, client),
        "difference": why,
    }


def _all_zero(got: dict[tuple[int, str, str, str], float | None], stage: int, q: str) -> bool:
    values = [v for k, v in got.items() if k[:3] == (stage, "server", f"successes.{q}")]
    return bool(values) and all((v or 0) == 0 for v in values)


def stage_pairs(frame: pl.DataFrame, path: str) -> StagePairs:
    got = _lookup(frame)
    out: list[dict[str, Any]] = []
    for stage in sorted(set(frame["stage"].to_list())):

        def c(q: str, s: str, stage: int = stage) -> float | None:
            return got.get((stage, "client", q, s))

        def sv(q: str, s: str, stage: int = stage) -> float | None:
            return got.get((stage, "server", q, s))

        pairs: list[dict[str, Any]] = []

        rate = sv("successes", "rate")
        count = sv("successes", "count")
        server_window = count / rate if count is not None and rate else None
        pairs.append(
            _pair("successes", "count", "requests", c("successes", "count"), count, "window")
        )
        client_rate = c("successes.throughput", "requests_per_sec")
        pairs.append(_pair("throughput", "requests_per_s", "req/s", client_rate, rate, "rate"))
        for side_name in ("prompt_len", "output_len"):
            tokens = sv(f"successes.{side_name}", "rate")
            per_request = tokens / rate if tokens is not None and rate else None
            name = "prompt_tokens" if side_name == "prompt_len" else "output_tokens"
            client_tokens = c(f"successes.{side_name}", "mean")
            pairs.append(_pair(name, "mean", "tokens", client_tokens, per_request, "tokens"))
        for name, quantity in LATENCIES:
            for stat in ("mean", "median", "p90", "p99"):
                client = c(f"successes.latency.{quantity}", stat)
                server = sv(f"successes.{quantity}", stat)
                pairs.append(_pair(name, stat, "s", client, server, name))
        zero = [q for q in SERVER_GAUGES if _all_zero(got, stage, q)]
        out.append(
            {
                "stage": stage,
                "requested_rate_per_s": c("load_summary", "requested_rate"),
                "client_window_s": c("load_summary", "send_duration"),
                "server_window_s": server_window,
                "excess_rate_factor": _ratio(rate, client_rate),
                "pairs": pairs,
                "server_unavailable": {
                    q: "0 in every statistic: inference-perf writes 0.0 when its query fails "
                    "or matches no series"
                    for q in zero
                },
            }
        )
    return StagePairs(path, out)
