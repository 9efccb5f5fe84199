"""AIPerf's raw per-chunk export, ``profile_export_raw.jsonl`` (``--export-level raw``).

Every record has the request's ``start_perf_ns`` (a monotonic clock) and every streamed
chunk's ``perf_ns``; a chunk's wall time is ``request_start_ns + (perf_ns -
start_perf_ns)``, exact to the nanosecond. Chunks carrying text or reasoning are output
ticks; finish, usage and ``[DONE]`` chunks are not, but the usage chunks give token counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from servetrace.sources import aiperf_metadata as meta
from servetrace.sources import chunks
from servetrace.sources import response_body as body
from servetrace.sources.chunks import sse_payload
from servetrace.sources.fields import Fields
from servetrace.sources.reading import FormatMismatch, describe_json, iter_json_lines


def sniff_raw_record(obj: Any) -> bool:
    """True for a record of ``profile_export_raw.jsonl``."""
    return isinstance(obj, dict) and "start_perf_ns" in obj and "responses" in obj


# One row per record: what the export's metadata says of the request.
_ROW = {
    "request_id": pl.Utf8,
    "start_ns": pl.Int64,
    "start_perf_ns": pl.Int64,
    "end_ns": pl.Int64,
    "cancel_ns": pl.Int64,
    "was_cancelled": pl.Boolean,
    "error_code": pl.Int64,
    "error": pl.Utf8,
}
_RESPONSES = pl.List(
    pl.Struct(
        {
            "perf_ns": pl.Int64(),
            "packets": pl.List(pl.Struct({"name": pl.Utf8(), "value": pl.Utf8()})),
            "text": pl.Utf8(),
        }
    )
)


def read_raw(path: Path) -> pl.DataFrame:
    """One row per raw record: ids, clocks and the content chunks' wall times (``ticks_raw``),
    plus usage counts from the stream."""
    fields = Fields(path, "AIPerf raw")
    columns: dict[str, list[Any]] = {name: [] for name in _ROW}
    responses: list[list[Any] | None] = []
    wheres: list[str] = []
    for index, (line, obj) in enumerate(iter_json_lines(path)):
        where = f"record {index} (line {line})"
        if not sniff_raw_record(obj):
            raise FormatMismatch(
                f"{path}: {where}: not an AIPerf raw export record: expected "
                f"'start_perf_ns' and 'responses' ({describe_json(obj)})"
            )
        code, error = meta.error_fields(fields, obj, where)
        columns["request_id"].append(meta.record_id(fields, obj, index, where))
        columns["start_ns"].append(meta.start_ns(fields, obj, where))
        columns["start_perf_ns"].append(fields.integer(obj, "start_perf_ns", where))
        columns["end_ns"].append(meta.end_ns(fields, obj, where))
        columns["cancel_ns"].append(meta.cancel_ns(fields, obj, where))
        columns["was_cancelled"].append(meta.was_cancelled(fields, obj, code))
        columns["error_code"].append(code)
        columns["error"].append(error)
        responses.append(fields.array(obj, "responses", where))
        wheres.append(where)
    if None in columns["start_ns"]:
        index = columns["start_ns"].index(None)
        raise fields.error(f"record {index}", "missing field 'metadata.request_start_ns'")

    frame = pl.DataFrame(columns, schema=_ROW).with_columns(
        fields.struct_lists(
            responses, _RESPONSES, "responses", wheres.__getitem__, time_fields=("perf_ns",)
        )
    )
    parts = (
        frame.select("request_id", "start_ns", "start_perf_ns", "responses")
        .explode("responses", keep_nulls=False)
        .unnest("responses")
        .with_columns(
            _chunk=pl.int_range(pl.len()).over("request_id"),
            time_ns=pl.col("start_ns") + (pl.col("perf_ns") - pl.col("start_perf_ns")),
        )
        .explode("packets", keep_nulls=True)
        .with_columns(
            payload=pl.coalesce(
                pl.when(pl.col("packets").struct.field("name").fill_null("data") == "data").then(
                    sse_payload(pl.col("packets").struct.field("value"))
                ),
                pl.col("text"),
            )
        )
    )
    per_request = chunks.per_request(parts).rename(
        {
            "ticks_ns": "ticks_raw",
            "completion_tokens": "raw_completion_tokens",
            "prompt_tokens": "raw_prompt_tokens",
        }
    )
    joined = frame.drop("responses").join(
        per_request, on="request_id", how="left", maintain_order="left"
    )
    return body.typed(joined, lambda row: f"{path}: {wheres[row]}")
