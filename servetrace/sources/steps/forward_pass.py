"""vLLM's forward-pass metrics, as ``servetrace record-steps`` recorded them.

Pinned to vllm-project/vllm ``vllm/v1/metrics/forward_pass_metrics.py`` at
17b07c040e3c491d79eff808edfa5321c7c1cbe7 (vLLM names the message ``ForwardPassMetrics``,
wire version ``FPM_VERSION = 1``):

- publisher ``ZmqForwardPassMetricsPublisher``: a PUB socket bound to
  ``tcp://*:<forward_pass_metrics_port + dp_rank>``; each message is three frames,
  ``b""``, the sequence number (8 bytes big-endian) and the payload, a msgspec
  MessagePack map of ``ForwardPassMetrics``; with nothing to send it publishes a
  default message (a heartbeat) every ``FPM_HEARTBEAT_INTERVAL_SECONDS = 1.0``;
- ``ForwardPassMetrics``: ``version``, ``worker_id``, ``dp_rank``, ``counter_id`` (the
  publisher's sequence, heartbeats included), ``timing_scope``
  (``"execute_model_cuda"``), ``wall_time`` (seconds: CUDA events around
  ``execute_model``, so scheduling and sampling are outside it),
  ``scheduled_requests`` (``ScheduledRequestMetrics``: ``num_prefill_requests``,
  ``sum_prefill_tokens``, ``var_prefill_length``, ``sum_prefill_kv_tokens``,
  ``num_decode_requests``, ``sum_decode_kv_tokens``, ``var_decode_kv_tokens``) and
  ``queued_requests`` (``QueuedRequestMetrics``, the waiting queue *after* the pass:
  ``num_prefill_requests``, ``num_decode_requests`` — preempted requests and those
  waiting for remote KV — and token sums).

Mapping: ``counter_id`` → ``step``; ``dp_rank`` → ``replica``; ``wall_time`` → the
duration; the prefill/decode request counts and ``sum_prefill_tokens`` as named; queued
prefill + decode requests → ``queued_requests``. The message has no clock: the step's
end is the time the recorder received it, later than the true end by the publish delay
(timings are collected without blocking, so possibly by a step or more). Decode tokens
(one per decode request without speculative decoding, more with it), cached tokens, KV
usage, preemptions and batch membership are not in the message (null). Heartbeats
(version 1 defaults: no requests, ``wall_time`` 0) are dropped. SGLang has no equivalent
publisher that this importer reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.sniff import read_all
from servetrace.sources.steps.formats import StepFile
from servetrace.sources.steps.record import RECORD_FORMAT, RECORD_VERSION, require_extra
from servetrace.sources.steps.schema import is_count

FORMAT = "forward-pass"
FPM_VERSION = 1
_SCHEDULED = ("num_prefill_requests", "sum_prefill_tokens", "num_decode_requests")
_QUEUED = ("num_prefill_requests", "num_decode_requests")


def read(path: Path, ticks: pl.Series | None) -> StepFile:
    require_extra("the forward-pass step format", "msgpack")
    import msgpack

    raw = read_all(path, lines=False)
    if not raw:
        raise InputError(f"{path}: file is empty", hint="record with servetrace record-steps")
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(raw)
    rows: list[dict[str, Any]] = []
    heartbeats = 0
    index = 0
    try:
        for index, item in enumerate(unpacker):
            if index == 0:
                _check_header(path, item)
                continue
            row = _row(path, index, item)
            if row is None:
                heartbeats += 1
            else:
                rows.append(row)
    except (msgpack.UnpackException, ValueError) as error:
        raise InputError(
            f"{path}: record {index + 1}: not MessagePack ({error}): the file is damaged "
            "or not written by servetrace record-steps"
        ) from None
    if not rows:
        raise InputError(
            f"{path}: no forward-pass messages ({heartbeats} heartbeats)",
            hint="record while the engine serves requests",
        )
    # Every value is checked (`_row`); `read_steps` gives the columns their step types.
    frame = pl.DataFrame(rows, infer_schema_length=None)
    notes = [
        "forward-pass: a step ends when servetrace received its message (the message has "
        "no clock), later than the true end by the publish delay; decode tokens, cached "
        "tokens, KV usage and batch membership are not in the message (unavailable)",
    ]
    if heartbeats:
        notes.append(f"forward-pass: {heartbeats} heartbeat messages (no step) dropped")
    if ticks is not None:
        notes.append("forward-pass: steps are not aligned to the trace's ticks")
    return StepFile(frame, tuple(notes))


def _check_header(path: Path, item: Any) -> None:
    if not isinstance(item, dict) or item.get("format") != RECORD_FORMAT:
        raise InputError(
            f"{path}: record 1: not a servetrace record-steps file (no '{RECORD_FORMAT}' header)",
            hint="record the engine's publisher with servetrace record-steps",
        )
    if item.get("version") != RECORD_VERSION:
        raise InputError(
            f"{path}: record 1: recording version {item.get('version')!r}; servetrace "
            f"reads version {RECORD_VERSION}"
        )


def _row(path: Path, index: int, item: Any) -> dict[str, Any] | None:
    """One message as a row; None for a heartbeat."""
    import msgpack

    where = f"{path}: record {index + 1}"
    if (
        not isinstance(item, list)
        or len(item) != 2
        or not is_count(item[0])
        or not isinstance(item[1], list)
        or not item[1]
        or not all(isinstance(frame, bytes) for frame in item[1])
    ):
        raise InputError(f"{where}: not [received_ns, [frames]] as record-steps writes")
    try:
        message = msgpack.unpackb(item[1][-1], raw=False, strict_map_key=False)
    except (msgpack.UnpackException, ValueError) as error:
        raise InputError(f"{where}: the payload frame is not MessagePack ({error})") from None
    if not isinstance(message, dict):
        raise InputError(f"{where}: the payload is not a ForwardPassMetrics map")
    version = message.get("version", FPM_VERSION)
    if version != FPM_VERSION:
        raise InputError(
            f"{where}: ForwardPassMetrics version {version!r}; servetrace reads version "
            f"{FPM_VERSION}"
        )
    scheduled = _map(where, message, "scheduled_requests")
    queued = _map(where, message, "queued_requests")
    wall = message.get("wall_time", 0.0)
    if not isinstance(wall, (int, float)) or isinstance(wall, bool) or not 0 <= wall < 1e6:
        raise InputError(f"{where}: 'wall_time' must be seconds ≥ 0, got {wall!r}")
    counts = {name: _count(where, scheduled, "scheduled_requests", name) for name in _SCHEDULED}
    waiting = {name: _count(where, queued, "queued_requests", name) for name in _QUEUED}
    if wall == 0 and not any(counts.values()):
        return None
    dp_rank = message.get("dp_rank")
    counter = message.get("counter_id")
    return {
        "step": counter if is_count(counter) else None,
        "replica": str(dp_rank) if is_count(dp_rank) else None,
        "ts_end": item[0],
        "duration": round(wall * 1e9),
        "prefill_requests": counts["num_prefill_requests"],
        "prefill_tokens": counts["sum_prefill_tokens"],
        "decode_requests": counts["num_decode_requests"],
        "queued_requests": waiting["num_prefill_requests"] + waiting["num_decode_requests"],
    }


def _map(where: str, message: dict[str, Any], name: str) -> dict[str, Any]:
    value = message.get(name, {})
    if not isinstance(value, dict):
        raise InputError(f"{where}: '{name}' must be a map, got {type(value).__name__}")
    return value


def _count(where: str, parent: dict[str, Any], parent_name: str, name: str) -> int:
    value = parent.get(name, 0)
    if not is_count(value):
        raise InputError(f"{where}: '{parent_name}.{name}' must be a count, got {value!r}")
    return int(value)
