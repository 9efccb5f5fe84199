"""Small writers of the engine formats, for round-trip tests and the fixtures.

Each takes requests whose times we control (``Req``, in ms from an epoch) and writes them
exactly as the engine's source code would (see each importer's docstring for the lines
followed): OTLP JSON spans (vLLM and GenAI dialects), SGLang request-metrics records
(0.5.x and newer spellings), TensorRT-LLM ``/perf_metrics`` polls and the MLCommons
endpoints SQLite database (current and removed schema).

``canonical(reqs)`` gives the same requests as canonical events, so that the analysis of
the written file can be compared with the analysis of the truth.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tests.conftest import MS, events, make_request

S = 1e9  # ns per second


@dataclass(frozen=True)
class Req:
    """One request; times in ms. ``outcome``: completed, cancelled or errored."""

    rid: str
    arrival: float
    admission: float
    first: float | None
    last: float | None
    end: float
    outcome: str = "completed"
    prompt: int = 100
    output: int = 10
    retractions: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ticks(self) -> list[float]:
        """Output ticks evenly spaced from first to last (``output`` of them)."""
        if self.first is None:
            return []
        if self.last is None or self.output <= 1:
            return [self.first]
        step = (self.last - self.first) / (self.output - 1)
        return [self.first + i * step for i in range(self.output)]


# The epoch of the times: Unix ns for wall-clock formats (as integers: ms floats at
# 1.7e12 would lose the ns), a steady-clock reading for TensorRT-LLM.
WALL_NS = 1_765_432_100_123_456_789
STEADY_NS = 86_400_123_456_000
MONOTONIC_NS = 5_123_456_789_012


def sample_requests() -> list[Req]:
    """Completed, cancelled (in decode) and errored requests; ms from the epoch."""
    b = 0.0
    return [
        Req("r1", b + 0.0, b + 30.0, b + 80.0, b + 580.0, b + 580.0, prompt=512, output=101),
        Req("r2", b + 10.0, b + 95.5, b + 250.25, b + 850.75, b + 850.75, prompt=64, output=61),
        Req("r3", b + 20.0, b + 120.0, b + 300.0, b + 390.0, b + 400.0, "cancelled", output=10),
        Req("r4", b + 35.125, b + 150.0, b + 330.0, b + 340.0, b + 361.0, "errored", output=3),
        Req("r5", b + 40.0, b + 41.0, b + 90.0, b + 390.0, b + 390.0, prompt=7, output=2),
    ]


def canonical(reqs: list[Req], base_ns: int, *, admissions: bool = True) -> pl.DataFrame:
    rows = []
    for r in reqs:
        ticks = r.ticks
        done = r.outcome == "completed"
        rows.append(
            make_request(
                r.rid,
                arrival=r.arrival,
                admission=r.admission if admissions else None,
                first=ticks[0] if ticks else None,
                ticks=ticks[1:],
                complete=r.end if done else None,
                cancel=None if done else r.end,
                prompt_tokens=r.prompt,
                output_tokens=r.output if done else None,
            )
        )
    errored = [r.rid for r in reqs if r.outcome == "errored"]
    # An errored request ends with the terminal ``error`` event, not a cancellation.
    return events(*rows).with_columns(
        pl.col("ts") + base_ns,
        pl.when(pl.col("request_id").is_in(errored) & (pl.col("event") == "cancellation"))
        .then(pl.lit("error"))
        .otherwise(pl.col("event"))
        .alias("event"),
    )


def _ns(ms: float, base_ns: int) -> int:
    return base_ns + round(ms * MS)


def _wall_s(ms: float, base_ns: int) -> float:
    """A time point as float seconds (how SGLang and TensorRT-LLM write them)."""
    return _ns(ms, base_ns) / S


def _s(ms: float) -> float:
    """A duration in ms as float seconds, as the engines compute them."""
    return ms / 1e3


# --------------------------------------------------------------------------------------
# OTLP JSON (Collector file exporter)
# --------------------------------------------------------------------------------------


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # proto3 JSON: int64 as a string
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _attrs(mapping: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in mapping.items() if v is not None]


def _export(spans: list[dict[str, Any]], service: str, scope: str) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attrs({"service.name": service})},
                "scopeSpans": [{"scope": {"name": scope}, "spans": spans}],
            }
        ]
    }


def vllm_span(
    r: Req,
    index: int,
    base_ns: int = WALL_NS,
    *,
    finish_reasons: bool = True,
    pre_engine_ms: float = 0.0,
) -> dict[str, Any]:
    """vLLM's do_tracing: start = arrival, durations in float seconds; the engine queues
    the request ``pre_engine_ms`` after the API server's arrival (``queued_ts``)."""
    first = r.first if r.first is not None else r.end
    last = r.last if r.last is not None else first
    attributes: dict[str, Any] = {
        "gen_ai.latency.time_to_first_token": _s(first - r.arrival),
        "gen_ai.latency.e2e": _s(r.end - r.arrival),
        "gen_ai.latency.time_in_queue": _s(r.admission - r.arrival - pre_engine_ms),
        "gen_ai.usage.prompt_tokens": r.prompt,
        "gen_ai.usage.completion_tokens": r.output,
        "gen_ai.latency.time_in_model_prefill": _s(first - r.admission),
        "gen_ai.latency.time_in_model_decode": _s(last - first),
        "gen_ai.latency.time_in_model_inference": _s(last - r.admission),
        "gen_ai.request.id": r.rid,
        "gen_ai.request.max_tokens": 2048,
        "gen_ai.request.temperature": 0.7,
        **r.extra,
    }
    if finish_reasons:
        reason = {"completed": "stop", "cancelled": "abort", "errored": "error"}[r.outcome]
        attributes["gen_ai.response.finish_reasons"] = [reason]
    return {
        "traceId": f"{index + 1:032x}",
        "spanId": f"{index + 1:016x}",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": str(_ns(r.arrival, base_ns)),
        "endTimeUnixNano": str(_ns(r.end, base_ns) + 150_000),  # ended after the e2e stamp
        "attributes": _attrs(attributes),
        "status": {},
    }


def genai_span(r: Req, index: int, base_ns: int = WALL_NS, kind: int = 3) -> dict[str, Any]:
    """A GenAI-conventions chat span: start = send, end = last chunk."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "llama-3.1-8b",
        "gen_ai.response.id": f"chatcmpl-{r.rid}",
        "gen_ai.usage.input_tokens": r.prompt,
        "gen_ai.usage.output_tokens": r.output,
        "gen_ai.response.time_to_first_chunk": (
            _s(r.first - r.arrival) if r.first is not None else None
        ),
        "gen_ai.response.finish_reasons": [
            {"completed": "stop", "cancelled": "cancelled", "errored": "error"}[r.outcome]
        ],
        **({"error.type": "APIConnectionError"} if r.outcome == "errored" else {}),
    }
    end = r.last if r.outcome == "completed" and r.last is not None else r.end
    return {
        "traceId": f"{index + 101:032x}",
        "spanId": f"{index + 101:016x}",
        "name": "chat llama-3.1-8b",
        "kind": kind,
        "startTimeUnixNano": str(_ns(r.arrival, base_ns)),
        "endTimeUnixNano": str(_ns(end, base_ns)),
        "attributes": _attrs(attributes),
        "status": {"code": 2, "message": "connection reset"} if r.outcome == "errored" else {},
    }


def write_otlp(
    path: Path, spans: list[dict[str, Any]], *, per_line: int = 2, service: str = "vllm"
) -> Path:
    """JSON lines, ``per_line`` spans per export request (as the batch processor sends)."""
    lines = [
        json.dumps(_export(spans[i : i + per_line], service, "vllm.llm_engine"))
        for i in range(0, len(spans), per_line)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------
# SGLang --export-metrics-to-file
# --------------------------------------------------------------------------------------


def sglang_record(r: Req, base_ns: int = WALL_NS, *, version: str = "0.5") -> dict[str, Any]:
    """One record: request_parameters + meta_info, wall-clock float seconds."""
    first = r.first

    def ts(ms: float) -> float:
        return _wall_s(ms, base_ns)

    # Tokenised and sent to the scheduler shortly after arrival, before the wait queue.
    to_scheduler = r.arrival + min(1.0, (r.admission - r.arrival) / 2)

    if r.outcome == "completed":
        finish: dict[str, Any] = {"type": "length" if r.output >= 100 else "stop", "matched": 2}
    elif r.outcome == "cancelled":
        finish = {"type": "abort", "message": "The client disconnected", "status_code": 499}
    else:
        finish = {"type": "abort", "message": "Internal server error", "status_code": 500}
    record: dict[str, Any] = {
        "request_parameters": json.dumps({"rid": r.rid, "stream": True, "sampling_params": {}}),
        "id": r.rid,
        "finish_reason": finish,
        "prompt_tokens": r.prompt,
        "weight_version": "default",
        "total_retractions": r.retractions,
        "completion_tokens": r.output,
        "cached_tokens": 32,
        "e2e_latency": _s(r.end - r.arrival),
    }
    if version == "0.5":
        # tokenizer_manager._calculate_timing_metrics; admission from inference_time.
        record.update(
            {
                "queue_time": _s(r.admission - to_scheduler),
                "prefill_launch_delay": 0.0004,
                "prefill_launch_latency": 0.012,
                "request_received_ts": ts(r.arrival),
                "request_sent_to_scheduler_ts": ts(to_scheduler),
                "response_sent_to_client_ts": ts(r.end + 0.3),
                "decode_finished_ts": ts(r.end),
                "inference_time": _s(r.end - r.admission),
                "decode_throughput": 123.4,
            }
        )
        if first is not None:
            record["prefill_finished_ts"] = ts(first)
    else:
        # observability/req_time_stats: forward_entry_time, prefill_finished_time, ...
        record.update(
            {
                "forward_entry_time": ts(r.admission),
                "queue_time": _s(r.admission - to_scheduler),
                "prefill_waiting_latency": 0.0003,
                "prefill_launch_latency": 0.011,
                "request_received_ts": ts(r.arrival),
                "api_server_dispatch_finish_ts": ts(to_scheduler),
                "response_sent_to_client_ts": ts(r.end + 0.3),
                "request_finished_ts": ts(r.end),
                "inference_time": _s(r.end - r.admission),
            }
        )
        if first is not None:
            record["prefill_finished_time"] = ts(first)
            record["first_token_generated_time"] = ts(first)
        if r.last is not None:
            record["scheduler_completion_time"] = ts(r.last)
    record.update(r.extra)
    return record


def write_sglang(
    path: Path, reqs: list[Req], base_ns: int = WALL_NS, *, version: str = "0.5"
) -> Path:
    records = [sglang_record(r, base_ns, version=version) for r in reqs]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


# --------------------------------------------------------------------------------------
# TensorRT-LLM /perf_metrics
# --------------------------------------------------------------------------------------


def trtllm_item(
    r: Req, request_id: int, base_ns: int = STEADY_NS, *, status: str | None = None
) -> dict[str, Any]:
    """One item as get_perf_metrics serialises it: steady-clock seconds (µs resolution)."""
    assert r.first is not None and r.last is not None

    def ts(ms: float) -> float:
        return round(_wall_s(ms, base_ns), 6)

    item: dict[str, Any] = {
        "request_id": request_id,
        "perf_metrics": {
            "first_iter": 10 * request_id,
            "last_iter": 10 * request_id + r.output - 1,
            "timing_metrics": {
                "server_arrival_time": ts(r.arrival - 1.5),
                "arrival_time": ts(r.arrival),
                "first_scheduled_time": ts(r.admission),
                "first_token_time": ts(r.first),
                "server_first_token_time": ts(r.first + 0.8),
                "last_token_time": ts(r.last),
            },
            "kv_cache_metrics": {
                "num_total_allocated_blocks": 8,
                "num_new_allocated_blocks": 2,
                "num_reused_blocks": 6,
                "num_missed_blocks": 2,
            },
        },
    }
    if r.extra.get("spec"):
        item["perf_metrics"]["speculative_decoding"] = {
            "acceptance_rate": 0.65,
            "total_accepted_draft_tokens": 13,
            "total_draft_tokens": 20,
        }
    if status is not None:
        item["status"] = status
    return item


def write_trtllm(path: Path, polls: list[list[dict[str, Any]]]) -> Path:
    """Polls appended, one JSON list per line (``curl /perf_metrics >> file``)."""
    path.write_text("".join(json.dumps(poll) + "\n" for poll in polls))
    return path


# --------------------------------------------------------------------------------------
# MLCommons endpoints events database
# --------------------------------------------------------------------------------------

_CURRENT = (
    "CREATE TABLE events (id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, sample_uuid "
    "VARCHAR NOT NULL, event_type VARCHAR NOT NULL, timestamp_ns BIGINT NOT NULL, "
    "conversation_id VARCHAR NOT NULL, turn INTEGER, data BLOB NOT NULL)"
)
_REMOVED = (
    "CREATE TABLE IF NOT EXISTS events (sample_uuid TEXT, event_type TEXT, "
    "timestamp_ns INTEGER, data BLOB)"
)
_TOPICS = {
    "current": {
        "issued": "sample.issued",
        "first": "sample.recv_first",
        "chunk": "sample.recv_non_first",
        "complete": "sample.complete",
        "error": "error.generic",
        "start": "session.started",
        "end": "session.ended",
    },
    "removed": {
        "issued": "loadgen_issue_called",
        "first": "first_chunk_received",
        "chunk": "non_first_chunk_received",
        "complete": "complete",
        "error": "error",
        "start": "test_started",
        "end": "test_ended",
    },
}


def mlcommons_rows(
    reqs: list[Req], schema: str, base_ns: int = MONOTONIC_NS
) -> list[tuple[str, str, int, bytes]]:
    topics = _TOPICS[schema]
    rows: list[tuple[str, str, int, bytes]] = [("", topics["start"], base_ns - 1, b"null")]
    for r in reqs:
        rows.append((r.rid, topics["issued"], _ns(r.arrival, base_ns), b'["PromptData","hello"]'))
        for i, t in enumerate(r.ticks):
            rows.append((r.rid, topics["first" if i == 0 else "chunk"], _ns(t, base_ns), b"null"))
        if r.outcome != "completed":
            error = (
                b'["ErrorData","asyncio.CancelledError","cancelled by the client"]'
                if r.outcome == "cancelled"
                else b'["ErrorData","aiohttp.ClientResponseError","500 Internal Server Error"]'
            )
            if schema == "removed":
                _, kind, message = json.loads(error)
                error = json.dumps({"error_type": kind, "error_message": message}).encode()
            rows.append((r.rid, topics["error"], _ns(r.end, base_ns), error))
        rows.append((r.rid, topics["complete"], _ns(r.end, base_ns), b'["TextModelOutput","..."]'))
    rows.append(("", topics["end"], _ns(max(r.end for r in reqs), base_ns) + 1, b"null"))
    rows.sort(key=lambda row: row[2])
    return rows


def write_mlcommons(
    path: Path, reqs: list[Req], base_ns: int = MONOTONIC_NS, *, schema: str = "current"
) -> Path:
    connection = sqlite3.connect(path)
    try:
        if schema == "current":
            connection.execute(_CURRENT)
            connection.executemany(
                "INSERT INTO events (sample_uuid, event_type, timestamp_ns, conversation_id, "
                "turn, data) VALUES (?, ?, ?, '', NULL, ?)",
                mlcommons_rows(reqs, schema, base_ns),
            )
        else:
            connection.execute(_REMOVED)
            connection.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?)", mlcommons_rows(reqs, schema, base_ns)
            )
        connection.commit()
    finally:
        connection.close()
    return path


# --------------------------------------------------------------------------------------
# Comparing an imported trace with the truth
# --------------------------------------------------------------------------------------

LATENCIES = ("queue_wait_ns", "prefill_ns", "ttft_ns", "decode_ns", "e2e_ns", "tpot_ns")


def request_metrics(frame: pl.DataFrame) -> pl.DataFrame:
    from servetrace.analysis.memory import analyze_events

    return analyze_events(frame).requests.sort("request_id")


def assert_same_requests(
    imported: pl.DataFrame,
    truth: pl.DataFrame,
    metrics: tuple[str, ...],
    tolerance_ns: float,
    *,
    only: list[str] | None = None,
) -> None:
    """Per request, the imported metrics equal the truth's within ``tolerance_ns``."""
    got, want = request_metrics(imported), request_metrics(truth)
    if only is not None:
        got = got.filter(pl.col("request_id").is_in(only))
        want = want.filter(pl.col("request_id").is_in(only))
    assert got["request_id"].to_list() == want["request_id"].to_list()
    assert got["outcome"].to_list() == want["outcome"].to_list()
    for name in metrics:
        pairs = zip(got[name].to_list(), want[name].to_list(), strict=True)
        for rid, (g, w) in zip(got["request_id"], pairs, strict=True):
            assert (g is None) == (w is None), (rid, name, g, w)
            if g is not None:
                assert abs(g - w) <= tolerance_ns, (rid, name, g, w)


def fixture_requests() -> list[Req]:
    """Eight requests of a small, loaded run: the fixtures' content."""
    return [
        Req("cmpl-7f3a9c01", 0.0, 1.8, 62.4, 1262.4, 1262.4, prompt=812, output=201),
        Req("cmpl-7f3a9c02", 105.2, 106.9, 151.3, 893.5, 893.5, prompt=96, output=128),
        Req("cmpl-7f3a9c03", 230.7, 398.1, 521.6, 2150.0, 2150.0, prompt=2048, output=256),
        Req("cmpl-7f3a9c04", 310.4, 402.2, 460.9, 703.3, 712.0, "cancelled", prompt=300, output=40),
        Req("cmpl-7f3a9c05", 388.0, 560.5, 640.2, 1442.6, 1442.6, prompt=512, output=150),
        Req("cmpl-7f3a9c06", 450.9, 612.0, 700.4, 710.9, 733.5, "errored", prompt=128, output=2),
        Req("cmpl-7f3a9c07", 612.3, 700.0, 751.1, 1120.3, 1120.3, prompt=64, output=64),
        Req("cmpl-7f3a9c08", 790.5, 810.2, 869.9, 1309.9, 1309.9, prompt=256, output=100),
    ]
