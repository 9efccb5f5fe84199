"""AIPerf's per-record export, ``profile_export.jsonl``: one row per record.

Each record has ``metadata`` (ids, start, end and cancellation times), ``metrics`` (each
``{value, unit}``: ``ttft`` or ``time_to_first_token`` and ``request_latency``,
``inter_chunk_latency`` as a list, token counts) and ``error``. The row keeps every value
in the record's own unit with its ns-per-unit scale (``ttft``, ``ttft_scale``, ...): the
conversion to ns happens once, in ``aiperf_requests``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.sources import aiperf_metadata as meta
from servetrace.sources.fields import Fields
from servetrace.sources.reading import describe_json
from servetrace.sources.times import checked_ns
from servetrace.units import NS_PER_S


def sniff_record(obj: Any) -> bool:
    """True for a record of ``profile_export.jsonl``."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("metadata"), dict)
        and ("metrics" in obj or "error" in obj)
        and "responses" not in obj
    )


ROW_SCHEMA: dict[str, pl.DataType] = {
    "request_id": pl.Utf8(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "cancel_ns": pl.Int64(),
    "send_start_ns": pl.Int64(),
    "was_cancelled": pl.Boolean(),
    "ttft": pl.Float64(),
    "ttft_scale": pl.Int64(),
    "latency": pl.Float64(),
    "latency_scale": pl.Int64(),
    "icl_scale": pl.Int64(),
    "osl": pl.Int64(),
    "output_token_count": pl.Int64(),
    "usage_completion_tokens": pl.Int64(),
    "reasoning_tokens": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "error_code": pl.Int64(),
    "error": pl.Utf8(),
    "conversation_id": pl.Utf8(),
    "turn_index": pl.Int64(),
    "worker_id": pl.Utf8(),
    "phase": pl.Utf8(),
}
# The metrics' times once in ns (``read_records`` converts them, checked).
NS_SCHEMA: dict[str, pl.DataType] = {
    "ttft_ns": pl.Int64(),
    "latency_ns": pl.Int64(),
    "icl_ns": pl.List(pl.Int64()),
    "delay_ns": pl.Int64(),  # the delay a cancellation message states
}
# "cancelled after 0.000 seconds", "cancelled 0.200s after being sent"
_DELAY_IN_MESSAGE = re.compile(
    r"cancel\w*\s+(?:after\s+)?(?P<seconds>\d+(?:\.\d+)?)\s*s(?:ec(?:ond)?s?)?\b", re.IGNORECASE
)


def read_records(path: Path, lines: list[tuple[int, Any]]) -> pl.DataFrame:
    """One row (the columns of ``ROW_SCHEMA`` plus ``icl``) per record of ``lines``."""
    fields = Fields(path, "AIPerf")
    columns: dict[str, list[Any]] = {name: [] for name in ROW_SCHEMA}
    icl_values: list[list[Any] | None] = []
    wheres: list[str] = []

    for index, (line, obj) in enumerate(lines):
        where = f"record {index} (line {line})"
        wheres.append(where)
        if not isinstance(obj, dict):
            raise fields.error(where, f"expected a JSON object, got {describe_json(obj)}")
        fields.mapping(obj, "metadata", where)
        metrics = fields.mapping(obj, "metrics", where, required=False) or {}
        start = meta.start_ns(fields, obj, where)
        if start is None:
            start = _metric_ns(fields, metrics, "min_request_timestamp", where)
        if start is None:
            raise fields.error(
                where,
                "missing field 'metadata.request_start_ns' (or 'metadata.timestamp_ns'): "
                "the request's start time",
            )
        end = meta.end_ns(fields, obj, where)
        if end is None:
            end = _metric_ns(fields, metrics, "max_response_timestamp", where)
        ttft = _time_metric(fields, metrics, ("time_to_first_token", "ttft"), where)
        latency = _time_metric(fields, metrics, ("request_latency",), where)
        icl_entry = fields.mapping(metrics, "inter_chunk_latency", where, required=False)
        if icl_entry is not None:
            icl_list = fields.array(icl_entry, "value", where + ": metrics.inter_chunk_latency")
            icl_scale = fields.unit_scale(
                icl_entry.get("unit"), "metrics.inter_chunk_latency.unit", where
            )
        else:
            icl_list, icl_scale = None, None
        error_code, error_text = meta.error_fields(fields, obj, where)

        columns["request_id"].append(meta.record_id(fields, obj, index, where))
        columns["start_ns"].append(start)
        columns["end_ns"].append(end)
        columns["cancel_ns"].append(meta.cancel_ns(fields, obj, where))
        columns["send_start_ns"].append(
            fields.integer(obj, "trace_data.request_send_start_ns", where, required=False)
        )
        columns["was_cancelled"].append(meta.was_cancelled(fields, obj, error_code))
        columns["ttft"].append(ttft[0] if ttft else None)
        columns["ttft_scale"].append(ttft[1] if ttft else None)
        columns["latency"].append(latency[0] if latency else None)
        columns["latency_scale"].append(latency[1] if latency else None)
        icl_values.append(icl_list)
        columns["icl_scale"].append(icl_scale)
        columns["osl"].append(_count(fields, metrics, "output_sequence_length", where))
        columns["output_token_count"].append(_count(fields, metrics, "output_token_count", where))
        columns["usage_completion_tokens"].append(
            _count(fields, metrics, "usage_completion_tokens", where)
        )
        columns["reasoning_tokens"].append(_count(fields, metrics, "reasoning_token_count", where))
        columns["prompt_tokens"].append(
            _count(fields, metrics, "input_sequence_length", where)
            or _count(fields, metrics, "usage_prompt_tokens", where)
            or _count(fields, metrics, "error_isl", where)
        )
        columns["error_code"].append(error_code)
        columns["error"].append(error_text)
        columns["conversation_id"].append(fields.text(obj, "metadata.conversation_id"))
        columns["turn_index"].append(
            fields.integer(obj, "metadata.turn_index", where, required=False)
        )
        columns["worker_id"].append(fields.text(obj, "metadata.worker_id"))
        columns["phase"].append(
            fields.text(obj, "metadata.benchmark_phase")
            or fields.text(obj, "metadata.credit_phase")
        )

    frame = pl.DataFrame(columns, schema=ROW_SCHEMA, strict=False)
    icl = fields.float_lists(icl_values, "metrics.inter_chunk_latency.value", wheres.__getitem__)

    def where_of(index: int) -> str:
        return f"{path}: {wheres[index]}"

    return frame.with_columns(
        ttft_ns=checked_ns(
            frame["ttft"], frame["ttft_scale"], where_of, field="metrics.time_to_first_token.value"
        ),
        latency_ns=checked_ns(
            frame["latency"],
            frame["latency_scale"],
            where_of,
            field="metrics.request_latency.value",
        ),
        icl_ns=checked_ns(
            icl, frame["icl_scale"], where_of, field="metrics.inter_chunk_latency.value"
        ),
        delay_ns=checked_ns(
            frame["error"].str.extract(_DELAY_IN_MESSAGE.pattern, 1).cast(pl.Float64, strict=False),
            NS_PER_S,
            where_of,
            field="error.message",
        ),
    )


def _metric(fields: Fields, metrics: Mapping[str, Any], name: str, where: str) -> Any:
    entry = metrics.get(name)
    if entry is None:
        return None
    if not isinstance(entry, Mapping) or "value" not in entry:
        raise fields.error(where, f"field 'metrics.{name}' must be an object with a 'value'")
    return entry


def _time_metric(
    fields: Fields, metrics: Mapping[str, Any], names: tuple[str, ...], where: str
) -> tuple[float, int] | None:
    """``(value, ns per unit)`` of the first present metric among ``names``."""
    for name in names:
        entry = _metric(fields, metrics, name, where)
        if entry is None:
            continue
        # AIPerf's latencies and timestamps are never negative.
        value = fields.number(entry, "value", f"{where}: metrics.{name}", minimum=0)
        scale = fields.unit_scale(entry.get("unit"), f"metrics.{name}.unit", where)
        return float(value) if value is not None else 0.0, scale
    return None


def _metric_ns(fields: Fields, metrics: Mapping[str, Any], name: str, where: str) -> int | None:
    entry = _metric(fields, metrics, name, where)
    if entry is None:
        return None
    scale = fields.unit_scale(entry.get("unit", "ns"), f"metrics.{name}.unit", where)
    value = fields.integer(entry, "value", f"{where}: metrics.{name}", unit_ns=scale)
    return None if value is None else value * scale


def _count(fields: Fields, metrics: Mapping[str, Any], name: str, where: str) -> int | None:
    entry = _metric(fields, metrics, name, where)
    if entry is None:
        return None
    return fields.integer(entry, "value", f"{where}: metrics.{name}")
