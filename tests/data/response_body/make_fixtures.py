"""Regenerate the response-body fixtures: ``python tests/data/response_body/make_fixtures.py``.

Hand-made requests, written in the shape of AIPerf's ``profile_export_raw.jsonl`` and
GenAI-Perf's ``profile_export.json``, whose stream chunks are vLLM's, usage chunk and
per-request ``metrics`` included (PROVENANCE.md cites every field). The same bytes come
out every time; the numbers the tests pin are worked out in PROVENANCE.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MS = 1_000_000
WALL0 = 1_800_000_000_000_000_000  # request starts, Unix epoch ns
PERF0 = 5_000_000_000_000  # AIPerf's perf clock at the first start
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# id, start (ms), content chunks (ms after start, text), the finish chunk (ms), usage,
# vLLM's metrics object (None: a stream cut before its usage chunk).
SPEC_REQUESTS: list[dict[str, Any]] = [
    {
        "id": "a",
        "start": 0,
        "chunks": [(30, "The"), (40, " sky is blue"), (50, " because air"), (60, " scatters.")],
        "finish": 60,
        "usage": {"prompt": 100, "completion": 10, "cached": 32},
        "metrics": {
            "time_to_first_token_ms": 20.0,
            "generation_time_ms": 27.0,
            "queue_time_ms": 5.0,
            "mean_itl_ms": 3.0,
            "tokens_per_second": 212.7659574468085,
            "speculative_decoding": {
                "mean_acceptance_length": 3.0,
                "draft_acceptance_rate": 0.6666666666666666,
                "acceptance_histogram": [0, 1, 1, 1],
                "num_spec_steps": 3,
                "num_accepted_draft_tokens": 6,
                "num_draft_tokens": 9,
                "num_spec_tokens": 3,
            },
        },
    },
    {
        "id": "b",
        "start": 100,
        "chunks": [(72, "Yes"), (84, "."), (96, " It is"), (108, " fine.")],
        "finish": 108,
        "usage": {"prompt": 50, "completion": 7, "cached": 0},
        "metrics": {
            "time_to_first_token_ms": 25.0,
            "generation_time_ms": 33.0,
            "queue_time_ms": 40.0,
            "mean_itl_ms": 5.5,
            "tokens_per_second": 120.6896551724138,
            "speculative_decoding": {
                "mean_acceptance_length": 2.0,
                "draft_acceptance_rate": 0.3333333333333333,
                "acceptance_histogram": [1, 1, 1, 0],
                "num_spec_steps": 3,
                "num_accepted_draft_tokens": 3,
                "num_draft_tokens": 9,
                "num_spec_tokens": 3,
            },
        },
    },
    {
        # The last verify step emits only the end-of-sequence token: no text, so the
        # client sees two chunks after the first for three engine steps.
        "id": "c",
        "start": 200,
        "chunks": [(45, "Hi"), (55, " there,"), (65, " friend")],
        "finish": 75,
        "usage": {"prompt": 128, "completion": 6, "cached": 64},
        "metrics": {
            "time_to_first_token_ms": 30.0,
            "generation_time_ms": 28.0,
            "queue_time_ms": 10.0,
            "mean_itl_ms": 5.6,
            "tokens_per_second": 103.44827586206897,
            "speculative_decoding": {
                "mean_acceptance_length": 1.6666666666666667,
                "draft_acceptance_rate": 0.2222222222222222,
                "acceptance_histogram": [1, 2, 0, 0],
                "num_spec_steps": 3,
                "num_accepted_draft_tokens": 2,
                "num_draft_tokens": 9,
                "num_spec_tokens": 3,
            },
        },
    },
]


def chunk(rid: str, body: dict[str, Any]) -> str:
    return json.dumps(
        {
            "id": f"chatcmpl-{rid}",
            "object": "chat.completion.chunk",
            "created": 1800000000,
            "model": MODEL,
            **body,
        }
    )


def stream(req: dict[str, Any]) -> list[tuple[int, str]]:
    """(ms after start, SSE payload) of vLLM's chat stream: role, content, finish, usage
    with metrics (``exclude_none``: a null field is left out), ``[DONE]``."""
    rid = req["id"]
    first = req["chunks"][0][0]

    def delta(content: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "choices": [{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}]
        }

    out = [(first, chunk(rid, delta({"role": "assistant", "content": ""})))]
    out += [(ms, chunk(rid, delta({"content": text}))) for ms, text in req["chunks"]]
    out.append((req["finish"], chunk(rid, delta({"content": ""}, "stop"))))
    u = req["usage"]
    usage = {
        "prompt_tokens": u["prompt"],
        "total_tokens": u["prompt"] + u["completion"],
        "completion_tokens": u["completion"],
        "prompt_tokens_details": {"cached_tokens": u["cached"]},
    }
    last = {"choices": [], "usage": usage, "metrics": req["metrics"]}
    out.append((req["finish"], chunk(rid, last)))
    out.append((req["finish"], "[DONE]"))
    return out


def aiperf_record(index: int, req: dict[str, Any]) -> dict[str, Any]:
    start = WALL0 + req["start"] * MS
    perf = PERF0 + req["start"] * MS
    events = stream(req) if req["metrics"] is not None else []
    end = start + (req["finish"] if events else req["cancel_after"]) * MS
    metadata: dict[str, Any] = {
        "session_num": index,
        "x_request_id": req["id"],
        "x_correlation_id": f"corr-{req['id']}",
        "conversation_id": f"session_{index:06d}",
        "turn_index": 0,
        "credit_issued_ns": start - MS,
        "request_start_ns": start,
        "request_end_ns": end,
        "worker_id": "worker_0",
        "record_processor_id": "record_processor_0",
        "benchmark_phase": "profiling",
        "phase_index": 0,
        "profiling_index": index,
        "phase_name": "profiling",
        "phase_kind": "profiling",
        "was_cancelled": not events,
        "context_overflow_skip": False,
        "agent_depth": 0,
        "root_correlation_id": f"corr-{req['id']}",
    }
    record: dict[str, Any] = {"metadata": metadata, "start_perf_ns": perf}
    if events:
        record["status"] = 200
    else:
        metadata["cancellation_time_ns"] = end
    record["responses"] = [
        {"perf_ns": perf + ms * MS, "packets": [{"name": "data", "value": payload}]}
        for ms, payload in events
    ]
    if not events:
        record["error"] = {
            "code": 499,
            "type": "RequestCancellationError",
            "message": f"Request cancelled {req['cancel_after'] / 1000:.3f}s after being sent",
        }
    record["payload"] = {
        "messages": [{"role": "user", "content": f"question {req['id']}"}],
        "model": MODEL,
        "stream": True,
        "stream_options": {"include_usage": True},
        "include_metrics": True,
    }
    return record


def genai_request(req: dict[str, Any]) -> dict[str, Any]:
    start = WALL0 + req["start"] * MS
    events = stream(req)
    return {
        "timestamp": start,
        "request_inputs": {
            "payload": json.dumps(
                {
                    "model": MODEL,
                    "messages": [{"role": "user", "content": f"question {req['id']}"}],
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "include_metrics": True,
                }
            )
        },
        "response_timestamps": [start + ms * MS for ms, _ in events],
        "response_outputs": [{"response": f"data: {payload}\n\n"} for _, payload in events],
    }


# No speculative decoding; one single-token answer, whose mean_itl_ms vLLM leaves null
# (so the streamed usage chunk, written with exclude_none, has no such key).
PLAIN_REQUESTS: list[dict[str, Any]] = [
    {
        "id": "p",
        "start": 0,
        "chunks": [(50, "One"), (60, " two"), (70, " three")],
        "finish": 70,
        "usage": {"prompt": 40, "completion": 3, "cached": 16},
        "metrics": {
            "time_to_first_token_ms": 30.0,
            "generation_time_ms": 19.5,
            "queue_time_ms": 12.5,
            "mean_itl_ms": 9.75,
            "tokens_per_second": 60.6060606060606,
        },
    },
    {
        "id": "q",
        "start": 20,
        "chunks": [(40, "Ok")],
        "finish": 40,
        "usage": {"prompt": 24, "completion": 1, "cached": 0},
        "metrics": {
            "time_to_first_token_ms": 22.0,
            "generation_time_ms": 0.0,
            "queue_time_ms": 8.0,
            "tokens_per_second": 45.45454545454545,
        },
    },
]


def main() -> None:
    cancelled = {"id": "d", "start": 300, "metrics": None, "cancel_after": 20}
    spec = HERE / "aiperf_spec_decode"
    spec.mkdir(exist_ok=True)
    records = [aiperf_record(i, r) for i, r in enumerate([*SPEC_REQUESTS, cancelled])]
    (spec / "profile_export_raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    plain = HERE / "genai_perf_metrics"
    plain.mkdir(exist_ok=True)
    doc = {
        "experiments": [
            {
                "experiment": {"mode": "concurrency", "value": 2},
                "requests": [genai_request(r) for r in PLAIN_REQUESTS],
            }
        ],
        "version": "",
        "service_kind": "openai",
        "endpoint": "v1/chat/completions",
    }
    (plain / "profile_export.json").write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
