"""Regenerate the engine step fixtures: ``python tests/data/engines/steps/make_fixtures.py``.

Each file is written in its engine's format as the engine's source writes it (cited in
PROVENANCE.md); the same bytes come out every time.

``vllm-aligned.*`` is a simulated two-replica vLLM run whose true step ends are known:
steps run back to back with a scheduling gap between them that the log's elapsed time
does not count, the log rounds each duration to 10 µs and dates each line to the second
in a UTC+1 local time, and the trace's token events sit exactly on the true step ends.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgpack

HERE = Path(__file__).resolve().parent
NS = 1_000_000_000
# The simulated run starts here (UTC); the engine host's clock shows UTC+1.
START_NS = (
    int(datetime(2026, 2, 18, 16, 21, 19, tzinfo=timezone.utc).timestamp()) * NS + 700_000_000
)
LOCAL = timezone(timedelta(hours=1))
# The log line is written this long after the step ends.
LOG_DELAY_NS = 150_000
PROMPT = 512


def _duration(replica: int, index: int, prefill: bool) -> int:
    """A step's true duration (ns): varied, so the steps can be told apart."""
    if prefill:
        return 48_123_457 + replica * 1_000_003
    return 9_500_000 + (index * 7919 + replica * 131) % 1000 * 1000 + (index * 37) % 997


def _gap(index: int) -> int:
    """The scheduling time before a step, which the log's elapsed time does not count."""
    return 40_000 + (index % 3) * 10_000


def _simulate(replica: int, start: int, steps: int, requests: list[str]) -> list[dict]:
    rows = []
    t = start
    for index in range(steps):
        prefill = index == 0
        t += _gap(index)
        begin = t
        t += _duration(replica, index, prefill)
        rows.append(
            {
                "replica": replica,
                "start": begin,
                "end": t,
                "prefill_requests": len(requests) if prefill else 0,
                "prefill_tokens": len(requests) * PROMPT if prefill else 0,
                "decode_requests": 0 if prefill else len(requests),
                "decode_tokens": 0 if prefill else len(requests),
                "requests": requests,
            }
        )
    return rows


def _stamp(ns: int) -> str:
    moment = datetime.fromtimestamp(ns // NS, tz=LOCAL)
    return moment.strftime("%m-%d %H:%M:%S")


def _vllm_line(replica: int, step: int, row: dict, dummy: bool = False) -> str:
    elapsed = round((row["end"] - row["start"]) / 10_000) / 100
    return (
        f"(EngineCore_DP{replica} pid={4100 + replica}) INFO {_stamp(row['end'] + LOG_DELAY_NS)} "
        f"[core.py:421] Iteration({step}): {row['prefill_requests']} context requests, "
        f"{row['prefill_tokens']} context tokens, {row['decode_requests']} generation requests, "
        f"{row['decode_tokens']} generation tokens, iteration elapsed time: {elapsed:.2f} ms"
        + (" (dummy)" if dummy else "")
    )


def write_vllm_aligned() -> None:
    runs = {
        0: _simulate(0, START_NS, 40, ["a0", "b0"]) + _simulate(0, START_NS + 3 * NS, 12, ["c0"]),
        1: _simulate(1, START_NS + 3_300_000, 35, ["a1", "b1"]),
    }
    dummies = [
        {
            "replica": 1,
            "start": START_NS + 3 * NS + k * 11_000_000,
            "end": START_NS + 3 * NS + k * 11_000_000 + 500_000,
            "prefill_requests": 0,
            "prefill_tokens": 0,
            "decode_requests": 0,
            "decode_tokens": 0,
            "requests": [],
        }
        for k in range(3)
    ]
    lines = []
    truth = []
    for replica, rows in runs.items():
        extra = dummies if replica == 1 else []
        for step, row in enumerate(rows + extra):
            lines.append((row["end"] + LOG_DELAY_NS, _vllm_line(replica, step, row, row in extra)))
            truth.append((replica, step, row["end"], 0 if row in extra else 1))
    lines.sort()
    noise = (
        "(APIServer pid=4000) INFO 02-18 17:21:19 [loggers.py:236] Engine 000: Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%"
    )
    (HERE / "vllm-aligned.log").write_text(
        noise + "\n" + "\n".join(text for _, text in lines) + "\n", encoding="utf-8"
    )
    with (HERE / "vllm-aligned-truth.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["replica", "step", "ts_end", "has_tokens"])
        writer.writerows(truth)
    events = []
    for replica, rows in runs.items():
        by_request: dict[str, list[dict]] = {}
        for row in rows:
            for request in row["requests"]:
                by_request.setdefault(request, []).append(row)
        for request, steps in by_request.items():
            first = steps[0]
            events.append((request, "arrival", first["start"] - 5_000_000, "", PROMPT, "", replica))
            events.append((request, "admission", first["start"], "", "", "", replica))
            events.append((request, "first_token", first["end"], 1, "", "", replica))
            events.extend((request, "token", s["end"], 1, "", "", replica) for s in steps[1:])
            events.append((request, "completion", steps[-1]["end"], "", "", len(steps), replica))
    events.sort(key=lambda e: (e[2], e[0]))
    with (HERE / "vllm-aligned-trace.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["request_id", "event", "ts", "tokens", "prompt_tokens", "output_tokens", "replica"]
        )
        writer.writerows(events)


def write_vllm_lines() -> None:
    """The line variants vLLM writes, among other log lines (hand-picked values)."""
    lines = [
        "INFO 02-18 16:21:18 [api_server.py:1200] Starting vLLM API server 0 on http://0.0.0.0:8000",
        "(EngineCore_DP0 pid=2733609) INFO 02-18 16:21:20 [core.py:387] Iteration(188): 0 context "
        "requests, 0 context tokens, 50 generation requests, 50 generation tokens, iteration "
        "elapsed time: 10.25 ms",
        "\x1b[1;36m(EngineCore_DP1 pid=2733610)\x1b[0;0m INFO 02-18 16:21:21 [core.py:387] "
        "Iteration(189): 1 context requests, 7 context tokens, 3 generation requests, 3 "
        "generation tokens, iteration elapsed time: 0.72 ms",
        "(EngineCore_DP1 pid=2733610) INFO 02-18 16:21:21 [core.py:387] Iteration(190): 0 "
        "context requests, 0 context tokens, 0 generation requests, 0 generation tokens, "
        "iteration elapsed time: 3.00 ms (dummy)",
        "(APIServer pid=2733500) INFO 02-18 16:21:22 [loggers.py:310] Engine 002: "
        "Iteration(10): 2 context requests, 4096 context tokens, 0 generation requests, 0 "
        "generation tokens, iteration elapsed time: 41.07 ms, GPU KV cache usage: 5.1%, "
        "encoder inputs: 4, encoder output embeddings: 3520",
    ]
    (HERE / "vllm-lines.log").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_sglang() -> None:
    lines = [
        "[2025-10-08 13:00:00] server_args=ServerArgs(model_path='m', decode_log_interval=40)",
        "[2025-10-08 13:00:05 DP0 TP0] Prefill batch, #new-seq: 2, #new-token: 1024, "
        "#cached-token: 64, token usage: 0.01, #running-req: 0, #queue-req: 3, ",
        "[2025-10-08 13:00:05 DP0 TP1] Prefill batch, #new-seq: 2, #new-token: 1024, "
        "#cached-token: 64, token usage: 0.01, #running-req: 0, #queue-req: 3, ",
        "[2025-10-08 13:00:06 DP1 TP0] Prefill batch [7], #new-seq: 1, #new-token: 300, "
        "#cached-token: 0, full token usage: 0.02, swa token usage: 0.01, #running-req: 2, "
        "#queue-req: 0, ",
        "[2025-10-08 13:00:07 DP0 TP0] Decode batch, #running-req: 2, #token: 1200, token "
        "usage: 0.03, cuda graph: True, gen throughput (token/s): 180.25, #queue-req: 1, ",
        "[2025-10-08 13:00:08 DP0 TP0] Decode batch [92], #running-req: 3, #token: 1500, token "
        "usage: 0.04, accept len: 1.80, accept rate: 0.60, cuda graph: True, gen throughput "
        "(token/s): 210.00, #queue-req: 0, ",
    ]
    (HERE / "sglang.log").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_trtllm() -> None:
    def record(i: int, stamp: str, latency: float, ctx: int, ctx_tokens: int, gen: int) -> dict:
        return {
            "cpuMemUsage": 0,
            "gpuMemUsage": 76665782272,
            "iter": i,
            "iterLatencyMS": latency,
            "kvCacheStats": {
                "allocNewBlocks": 3,
                "allocTotalBlocks": 3,
                "cacheHitRate": 0.0,
                "freeNumBlocks": 90,
                "maxNumBlocks": 100,
                "missedBlocks": 3,
                "reusedBlocks": 0,
                "tokensPerBlock": 32,
                "usedNumBlocks": 10,
            },
            "inflightBatchingStats": {
                "avgNumDecodedTokensPerIter": 1.0,
                "microBatchId": 0,
                "numContextRequests": ctx,
                "numCtxTokens": ctx_tokens,
                "numGenRequests": gen,
                "numPausedRequests": 0,
                "numScheduledRequests": ctx + gen,
            },
            "maxNumActiveRequests": 64,
            "newActiveRequestsQueueLatencyMS": 0.0,
            "numActiveRequests": ctx + gen,
            "numCompletedRequests": 0,
            "numNewActiveRequests": ctx,
            "numQueuedRequests": 2,
            "pinnedMemUsage": 0,
            "prevDeviceStepTimeMS": 0.0,
            "timestamp": stamp,
        }

    first = [
        record(154, "12-03-2026 16:55:49.100000", 31.25, 2, 1024, 0),
        record(155, "12-03-2026 16:55:49.107500", 7.00688362121582, 0, 0, 2),
    ]
    second = [record(156, "12-03-2026 16:55:49.115000", 7.5, 0, 0, 2)]
    # Two polls of /metrics, one JSON list per line.
    (HERE / "trtllm-iterations.jsonl").write_text(
        json.dumps(first, sort_keys=True) + "\n" + json.dumps(second, sort_keys=True) + "\n",
        encoding="utf-8",
    )


def _fpm(counter: int, wall: float, scheduled: dict, queued: dict, dp_rank: int = 0) -> bytes:
    message = {
        "version": 1,
        "worker_id": "instance-7",
        "dp_rank": dp_rank,
        "counter_id": counter,
        "timing_scope": "execute_model_cuda",
        "wall_time": wall,
        "scheduled_requests": {
            "num_prefill_requests": 0,
            "sum_prefill_tokens": 0,
            "var_prefill_length": 0.0,
            "sum_prefill_kv_tokens": 0,
            "num_decode_requests": 0,
            "sum_decode_kv_tokens": 0,
            "var_decode_kv_tokens": 0.0,
            **scheduled,
        },
        "queued_requests": {
            "num_prefill_requests": 0,
            "sum_prefill_tokens": 0,
            "var_prefill_length": 0.0,
            "num_decode_requests": 0,
            "sum_decode_kv_tokens": 0,
            "var_decode_kv_tokens": 0.0,
            **queued,
        },
    }
    return msgpack.packb(message)


def write_forward_pass() -> None:
    base = 1_796_316_949_000_000_000
    header = {
        "format": "servetrace-zmq-record",
        "version": 1,
        "address": "tcp://127.0.0.1:5600",
        "started_ns": base,
    }
    messages = [
        (base + 50_000_000, 0, 0.0, {}, {}),
        (
            base + 90_000_000,
            1,
            0.0312,
            {"num_prefill_requests": 2, "sum_prefill_tokens": 1024, "sum_prefill_kv_tokens": 0},
            {"num_prefill_requests": 3, "sum_prefill_tokens": 1500},
        ),
        (
            base + 99_000_000,
            2,
            0.0071,
            {"num_decode_requests": 2, "sum_decode_kv_tokens": 1026},
            {"num_prefill_requests": 3, "num_decode_requests": 1, "sum_decode_kv_tokens": 40},
        ),
    ]
    with (HERE / "forward-pass.msgpack").open("wb") as out:
        out.write(msgpack.packb(header))
        for received, counter, wall, scheduled, queued in messages:
            frames = [b"", counter.to_bytes(8, "big"), _fpm(counter, wall, scheduled, queued)]
            out.write(msgpack.packb([received, frames]))


def main() -> None:
    write_vllm_aligned()
    write_vllm_lines()
    write_sglang()
    write_trtllm()
    write_forward_pass()


if __name__ == "__main__":
    main()
