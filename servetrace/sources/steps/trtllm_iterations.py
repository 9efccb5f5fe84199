"""TensorRT-LLM iteration statistics: ``trtllm-serve``'s ``/metrics`` JSON.

Pinned to NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/executor/jsonSerialization.cpp`` at
092229bb6e1ce6e7f0db2ba010b7fdaf654e1549, which names every field
(``NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE``):

- ``IterationStats``: ``timestamp``, ``iter``, ``iterLatencyMS``,
  ``newActiveRequestsQueueLatencyMS``, ``numNewActiveRequests``, ``numActiveRequests``,
  ``numQueuedRequests``, ``numCompletedRequests``, ``maxNumActiveRequests``, …,
  ``gpuMemUsage``, ``cpuMemUsage``, ``pinnedMemUsage``, ``kvCacheStats``,
  ``staticBatchingStats``, ``inflightBatchingStats``, ``specDecodingStats``;
- ``InflightBatchingStats``: ``numScheduledRequests``, ``numContextRequests``,
  ``numGenRequests``, ``numPausedRequests``, ``numCtxTokens``, ``microBatchId``,
  ``avgNumDecodedTokensPerIter``;
- ``KvCacheStats``: ``maxNumBlocks``, ``freeNumBlocks``, ``usedNumBlocks``,
  ``tokensPerBlock``, ``allocTotalBlocks``, ``allocNewBlocks``, ``reusedBlocks``,
  ``missedBlocks``, ``cacheHitRate``.

``/metrics`` returns a JSON list of these records and empties its queue on each poll,
so a recording is several lists; the file may be one list, or one list or record per
line. The PyTorch backend adds fields of its own (e.g. ``prevDeviceStepTimeMS``, the
*previous* iteration's device time, one iteration late); they are not read.

Mapping: ``iter`` → ``step``; ``iterLatencyMS`` → the duration (the executor's whole
iteration, which under the PyTorch backend's overlap scheduler spans more than one
forward pass); ``staticBatchingStats`` (static batching) is not read; ``timestamp`` (the
executor's local wall time, ``MM-DD-YYYY HH:MM:SS.ffffff``, read as UTC; ISO 8601 also
read) → ``ts_end``; ``numContextRequests``/``numCtxTokens`` →
``prefill_requests``/``prefill_tokens``; ``numGenRequests`` → ``decode_requests``;
``numPausedRequests`` → ``preempted``; ``numQueuedRequests`` → ``queued_requests``;
``usedNumBlocks / maxNumBlocks`` → ``kv_usage``. Decode tokens (``avgNumDecodedTokensPerIter``
does not say over which requests it averages), cached tokens (``reusedBlocks`` counts
blocks), replica and batch membership are not in the record (null).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.reading import json_lines
from servetrace.sources.sniff import read_all
from servetrace.sources.steps.formats import StepFile
from servetrace.sources.steps.schema import is_count

FORMAT = "trtllm-iterations"
# A poll without a `timestamp` leaves its iteration's end unknown (`validate`).
ENDS_KNOWN = False
_BATCHING = {
    "prefill_requests": "numContextRequests",
    "prefill_tokens": "numCtxTokens",
    "decode_requests": "numGenRequests",
    "preempted": "numPausedRequests",
}


def read(path: Path, ticks: pl.Series | None) -> StepFile:
    rows = [_row(f"{path}: {where}", record) for where, record in _records(path)]
    if not rows:
        raise InputError(f"{path}: no iteration records", hint="poll /metrics while serving")
    # Every value is checked (`_row`); `read_steps` gives the columns their step types.
    frame = pl.DataFrame(rows, infer_schema_length=None)
    stamps = frame["timestamp"].cast(pl.String())
    parsed = pl.coalesce(
        stamps.str.to_datetime("%m-%d-%Y %H:%M:%S%.f", time_unit="ns", strict=False),
        stamps.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", time_unit="ns", strict=False),
        stamps.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="ns", strict=False),
    ).dt.epoch("ns")
    bad = frame.with_columns(parsed=parsed).filter(
        pl.col("timestamp").is_not_null() & pl.col("parsed").is_null()
    )
    if bad.height:
        at, text = bad["at"][0], bad["timestamp"][0]
        raise InputError(
            f"{at}: 'timestamp' {text!r} is not TensorRT-LLM's 'MM-DD-YYYY HH:MM:SS.ffffff'"
        )
    frame = frame.with_columns(ts_end=parsed).drop("at", "timestamp")
    notes = (
        "trtllm-iterations: a step ends at its record's 'timestamp' (the executor's local "
        "time read as UTC, µs resolution) and lasts 'iterLatencyMS' (the executor's whole "
        "iteration: under the overlap scheduler not one forward pass); decode tokens, cached "
        "tokens and batch membership are not in the record (unavailable)",
    )
    return StepFile(frame, notes)


def _records(path: Path) -> list[tuple[str, Any]]:
    """Each record with where it is (``record 3 (line 2)``)."""
    text = read_all(path, lines=False).decode("utf-8", errors="replace")
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    else:
        items = whole if isinstance(whole, list) else [whole]
        return [(f"record {i}", item) for i, item in enumerate(items, 1)]
    found: list[tuple[str, Any]] = []
    for line_no, line in enumerate(json_lines(text), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}: line {line_no}: not JSON: {error.msg}") from None
        for item in value if isinstance(value, list) else [value]:
            found.append((f"record {len(found) + 1} (line {line_no})", item))
    return found


def _row(at: str, record: Any) -> dict[str, Any]:
    """One record as a row; ``at`` names the file and the record."""
    if not isinstance(record, dict):
        raise InputError(f"{at}: not an iteration-stats object")
    step = _int(at, record, "iter", required=True)
    latency = record.get("iterLatencyMS")
    if latency is not None and (
        not isinstance(latency, (int, float)) or isinstance(latency, bool) or not 0 <= latency < 1e9
    ):
        raise InputError(f"{at}: 'iterLatencyMS' must be milliseconds ≥ 0, got {latency!r}")
    stamp = record.get("timestamp")
    if stamp is not None and not isinstance(stamp, str):
        raise InputError(f"{at}: 'timestamp' must be a string, got {stamp!r}")
    batching = _object(at, record, "inflightBatchingStats")
    kv = _object(at, record, "kvCacheStats")
    counts = {
        column: _int(at, batching, name, parent="inflightBatchingStats")
        for column, name in _BATCHING.items()
    }
    queued = _int(at, record, "numQueuedRequests")
    used = _int(at, kv, "usedNumBlocks", parent="kvCacheStats")
    blocks = _int(at, kv, "maxNumBlocks", parent="kvCacheStats")
    return {
        "at": at,
        "step": step,
        "duration": None if latency is None else round(latency * 1e6),
        "timestamp": stamp,
        **counts,
        "queued_requests": queued,
        "kv_usage": used / blocks if used is not None and blocks else None,
    }


def _object(at: str, record: dict[str, Any], name: str) -> dict[str, Any]:
    value = record.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{at}: '{name}' must be an object, got {value!r}")
    return value


def _int(
    at: str, record: dict[str, Any], name: str, required: bool = False, parent: str | None = None
) -> int | None:
    value = record.get(name)
    dotted = f"{parent}.{name}" if parent else name
    if value is None:
        if required:
            raise InputError(
                f"{at}: no '{dotted}' (TensorRT-LLM writes it in every iteration record)"
            )
        return None
    if not is_count(value):
        raise InputError(f"{at}: '{dotted}' must be a count ≥ 0, got {value!r}")
    return value
