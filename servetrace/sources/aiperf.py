"""AIPerf per-request exports: ``profile_export.jsonl`` and ``profile_export_raw.jsonl``.

``profile_export.jsonl`` has one JSON object per request: ``metadata`` (ids; the start as
Unix epoch ns: ``request_start_ns`` since AIPerf 0.2, ``timestamp_ns`` before; end and
cancellation times in newer versions), ``metrics`` (each ``{value, unit}``: ``ttft`` or
``time_to_first_token`` and ``request_latency`` in ms, ``inter_chunk_latency`` as a list of
ms, token counts) and ``error`` (``code`` 499 for a cancelled request). AIPerf's own
aggregates are in ``profile_export_aiperf.json`` beside it.

``profile_export_raw.jsonl`` (``--export-level raw``) has every streamed chunk's
``perf_ns`` (a monotonic clock) and the request's ``start_perf_ns``; a chunk's wall time is
``request_start_ns + (perf_ns - start_perf_ns)``, exact to the nanosecond.

Mapping:

- arrival = the request start (``request_start_ns`` / ``timestamp_ns``): AIPerf's TTFT is
  measured from it;
- first token = start + TTFT; ticks = first token + running sum of the inter-chunk gaps,
  each rounded once to ns and summed in integers, so the last tick is start +
  request_latency. When the raw export is beside the file (or given), ticks are its chunk
  wall times instead (chunks carrying text or reasoning; finish, usage and ``[DONE]``
  chunks are not tokens);
- completion = ``request_end_ns`` / ``max_response_timestamp`` (the stream end);
  ``output_tokens`` = ``output_sequence_length`` (includes reasoning tokens, as AIPerf's
  inter_token_latency does), else ``output_token_count``, else usage;
- a chunk's token count is not recorded: every tick carries ``tokens=1``;
- records with an ``error.code`` other than 499 failed: they end with ``error`` (errored,
  not cancelled) even when ``metadata.was_cancelled`` is set; cancelled ones (499, or
  ``was_cancelled`` without a code) with ``cancellation``, at ``cancellation_time_ns`` /
  ``request_end_ns``. Older AIPerf wrote no end time for them; the end is then placed at
  start + the delay stated in the error message
  (``terminal_known=False``). AIPerf 0.13 stamps a cancelled record's ``request_start_ns``
  when it is cancelled, not when it is sent: the importer detects this (the raw export's
  perf clock, or ``trace_data.request_send_start_ns`` earlier than the start) and moves
  the arrival back by the measured time to cancel, with a warning.

AIPerf records no admission: this is a client-side trace (``source = "client"``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources._common import (
    Fields,
    FormatMismatch,
    ImportResult,
    Notes,
    count_phrase,
    cumulative_ticks,
    describe_json,
    float_to_ns,
    import_result,
    is_content_chunk,
    iter_json_lines,
    load_json,
    read_text,
    sibling,
    sse_payload,
    strip_suffixes,
    usage_count,
)

FORMAT = "aiperf"
_CANCELLED = 499
_ATTRIBUTES = ("conversation_id", "turn_index", "worker_id", "phase", "reasoning_tokens")
# A cancelled record whose stamped start is this much later than its send is mis-stamped.
_LATE_START_NS = 1_000_000
_DELAY_IN_MESSAGE = re.compile(
    r"cancel\w*\s+(?:after\s+)?(?P<seconds>\d+(?:\.\d+)?)\s*s(?:ec(?:ond)?s?)?\b", re.IGNORECASE
)


def sniff_record(obj: Any) -> bool:
    """True for a record of ``profile_export.jsonl``."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("metadata"), dict)
        and ("metrics" in obj or "error" in obj)
        and "responses" not in obj
    )


def sniff_raw_record(obj: Any) -> bool:
    """True for a record of ``profile_export_raw.jsonl``."""
    return isinstance(obj, dict) and "start_perf_ns" in obj and "responses" in obj


def read(
    path: str | Path, raw_path: str | Path | None = None, *, use_raw: bool = True
) -> ImportResult:
    """Import an AIPerf ``profile_export.jsonl`` (gzip allowed).

    ``raw_path`` is the matching ``profile_export_raw.jsonl``; by default it is looked for
    beside ``path`` (``use_raw=False`` ignores it). ``path`` may also be the raw export
    itself: the main export beside it is then used, or, when there is none, the raw export
    alone (token counts from the usage chunks).
    """
    path = Path(path)
    notes = Notes()
    text = read_text(path)
    _reject_single_document(path, text)
    lines = list(iter_json_lines(path, text))
    if not lines:
        raise InputError(f"{path}: no records: the file is empty")
    first = lines[0][1]
    raw_file = Path(raw_path) if raw_path is not None else None
    main_file: Path | None = path
    if sniff_raw_record(first):
        raw_file = path
        main_file = sibling(
            path, strip_suffixes(path, ".gz", ".jsonl").removesuffix("_raw") + ".jsonl"
        )
        if main_file is None:
            notes.add(
                f"{path.name} was read without its profile_export.jsonl: token counts come "
                "from the usage chunks, and requests without usage have no output_tokens"
            )
        else:
            lines = list(iter_json_lines(main_file, read_text(main_file)))
    elif not sniff_record(first):
        raise FormatMismatch(
            f"{path}: line {lines[0][0]}: not an AIPerf profile export record: expected "
            f"'metadata' and 'metrics' ({describe_json(first)})"
        )
    elif raw_file is None:
        raw_file = sibling(path, strip_suffixes(path, ".gz", ".jsonl") + "_raw.jsonl")

    if not use_raw and main_file is not None:
        raw_file = None
    raw = _read_raw(raw_file) if raw_file is not None else None
    if main_file is not None:
        rows = _read_records(main_file, lines)
    elif raw is not None:  # the raw export alone
        rows = raw.select(
            "request_id", "start_ns", "end_ns", "cancel_ns", "error_code", "error", "was_cancelled"
        )
    else:  # unreachable: without a main file, path itself is the raw export
        raise AssertionError("no AIPerf records to read")
    requests = _requests(rows, raw, notes)
    summary_file = sibling(
        main_file or path, strip_suffixes(main_file or path, ".gz", ".jsonl") + "_aiperf.json"
    )
    return import_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=rows.height,
        tool_summary=_summary(summary_file) if summary_file is not None else None,
        ticks_available=True,
        arrival_known=True,
        attributes=_ATTRIBUTES,
    )


def _reject_single_document(path: Path, text: str) -> None:
    """A pretty-printed JSON document is not JSON Lines: say "wrong format", not "line 1
    is broken"."""
    head = text.lstrip()
    first_line = head.split("\n", 1)[0]
    try:
        json.loads(first_line)
    except json.JSONDecodeError:
        try:
            doc = json.loads(head)
        except json.JSONDecodeError:
            return  # a broken JSON Lines file: iter_json_lines reports the line
        raise FormatMismatch(
            f"{path}: one JSON document, not AIPerf's JSON Lines ({describe_json(doc)})"
        ) from None


# --------------------------------------------------------------------------------------
# profile_export.jsonl
# --------------------------------------------------------------------------------------

_ROW_SCHEMA: dict[str, pl.DataType] = {
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


def _read_records(path: Path, lines: list[tuple[int, Any]]) -> pl.DataFrame:
    fields = Fields(path, "AIPerf")
    columns: dict[str, list[Any]] = {name: [] for name in _ROW_SCHEMA}
    icl_values: list[list[Any] | None] = []
    wheres: list[str] = []

    for index, (line, obj) in enumerate(lines):
        where = f"record {index} (line {line})"
        wheres.append(where)
        if not isinstance(obj, dict):
            raise fields.error(where, f"expected a JSON object, got {describe_json(obj)}")
        fields.mapping(obj, "metadata", where)
        metrics = fields.mapping(obj, "metrics", where, required=False) or {}
        start = _first_integer(
            fields, obj, where, "metadata.request_start_ns", "metadata.timestamp_ns"
        )
        if start is None:
            start = _metric_ns(fields, metrics, "min_request_timestamp", where)
        if start is None:
            raise fields.error(
                where,
                "missing field 'metadata.request_start_ns' (or 'metadata.timestamp_ns'): "
                "the request's start time",
            )
        end = fields.integer(obj, "metadata.request_end_ns", where, required=False)
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
        error = fields.mapping(obj, "error", where, required=False)
        error_code = (
            fields.integer(error, "code", where + ": error", required=False) if error else None
        )
        error_text = _error_text(error) if error else None

        columns["request_id"].append(
            fields.string(obj, "metadata.x_request_id", where, required=False) or str(index)
        )
        columns["start_ns"].append(start)
        columns["end_ns"].append(end)
        columns["cancel_ns"].append(
            fields.integer(obj, "metadata.cancellation_time_ns", where, required=False)
        )
        columns["send_start_ns"].append(
            fields.integer(obj, "trace_data.request_send_start_ns", where, required=False)
        )
        was_cancelled = fields.get(obj, "metadata.was_cancelled")
        columns["was_cancelled"].append(was_cancelled is True or error_code == _CANCELLED)
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
        columns["conversation_id"].append(_text(fields.get(obj, "metadata.conversation_id")))
        columns["turn_index"].append(
            fields.integer(obj, "metadata.turn_index", where, required=False)
        )
        columns["worker_id"].append(_text(fields.get(obj, "metadata.worker_id")))
        columns["phase"].append(
            _text(fields.get(obj, "metadata.benchmark_phase"))
            or _text(fields.get(obj, "metadata.credit_phase"))
        )

    frame = pl.DataFrame(columns, schema=_ROW_SCHEMA, strict=False)
    icl = fields.float_lists(icl_values, "metrics.inter_chunk_latency.value", wheres.__getitem__)
    return frame.with_columns(icl=icl)


def _first_integer(fields: Fields, obj: Any, where: str, *names: str) -> int | None:
    for name in names:
        value = fields.integer(obj, name, where, required=False)
        if value is not None:
            return value
    return None


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
        if value is not None:
            fields.check_time(value, scale, f"metrics.{name}.value", where)
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


def _error_text(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    message = error.get("message")
    parts = [str(part) for part in (kind, message) if part]
    return ": ".join(parts) if parts else f"error {error.get('code')}"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


# --------------------------------------------------------------------------------------
# profile_export_raw.jsonl
# --------------------------------------------------------------------------------------

_RESPONSES = pl.List(
    pl.Struct(
        {
            "perf_ns": pl.Int64(),
            "packets": pl.List(pl.Struct({"name": pl.Utf8(), "value": pl.Utf8()})),
            "text": pl.Utf8(),
        }
    )
)


def _read_raw(path: Path) -> pl.DataFrame:
    """One row per raw record: ids, clocks and the content chunks' wall times (``ticks_raw``),
    plus usage counts from the stream."""
    fields = Fields(path, "AIPerf raw")
    columns: dict[str, list[Any]] = {
        "request_id": [],
        "start_ns": [],
        "start_perf_ns": [],
        "end_ns": [],
        "cancel_ns": [],
        "was_cancelled": [],
        "error_code": [],
        "error": [],
        "responses": [],
    }
    wheres: list[str] = []
    for index, (line, obj) in enumerate(iter_json_lines(path)):
        where = f"record {index} (line {line})"
        if not sniff_raw_record(obj):
            raise FormatMismatch(
                f"{path}: {where}: not an AIPerf raw export record: expected "
                f"'start_perf_ns' and 'responses' ({describe_json(obj)})"
            )
        error = fields.mapping(obj, "error", where, required=False)
        code = fields.integer(error, "code", where + ": error", required=False) if error else None
        columns["request_id"].append(
            fields.string(obj, "metadata.x_request_id", where, required=False) or str(index)
        )
        columns["start_ns"].append(
            _first_integer(fields, obj, where, "metadata.request_start_ns", "metadata.timestamp_ns")
        )
        columns["start_perf_ns"].append(fields.integer(obj, "start_perf_ns", where))
        columns["end_ns"].append(
            fields.integer(obj, "metadata.request_end_ns", where, required=False)
        )
        columns["cancel_ns"].append(
            fields.integer(obj, "metadata.cancellation_time_ns", where, required=False)
        )
        columns["was_cancelled"].append(
            fields.get(obj, "metadata.was_cancelled") is True or code == _CANCELLED
        )
        columns["error_code"].append(code)
        columns["error"].append(_error_text(error) if error else None)
        columns["responses"].append(fields.array(obj, "responses", where))
        wheres.append(where)
    if None in columns["start_ns"]:
        index = columns["start_ns"].index(None)
        raise fields.error(f"record {index}", "missing field 'metadata.request_start_ns'")

    frame = pl.DataFrame(
        {key: value for key, value in columns.items() if key != "responses"},
        schema_overrides={
            "start_ns": pl.Int64,
            "start_perf_ns": pl.Int64,
            "end_ns": pl.Int64,
            "cancel_ns": pl.Int64,
            "error_code": pl.Int64,
            "error": pl.Utf8,
        },
    ).with_columns(
        fields.struct_lists(
            columns["responses"],
            _RESPONSES,
            "responses",
            wheres.__getitem__,
            time_fields=("perf_ns",),
        )
    )
    chunks = (
        frame.select("request_id", "start_ns", "start_perf_ns", "responses")
        .explode("responses", keep_nulls=False)
        .unnest("responses")
        .with_columns(pl.int_range(pl.len()).over("request_id").alias("_chunk"))
        .explode("packets", keep_nulls=True)
        .with_columns(
            payload=pl.coalesce(
                pl.when(pl.col("packets").struct.field("name").fill_null("data") == "data").then(
                    sse_payload(pl.col("packets").struct.field("value"))
                ),
                pl.col("text"),
            )
        )
        .with_columns(
            content=is_content_chunk(pl.col("payload")),
            completion_tokens=usage_count(pl.col("payload"), "completion_tokens"),
            prompt_tokens=usage_count(pl.col("payload"), "prompt_tokens"),
        )
        .group_by("request_id", "_chunk", maintain_order=True)
        .agg(
            pl.col("start_ns", "start_perf_ns", "perf_ns").first(),
            pl.col("content").any(),
            pl.col("completion_tokens", "prompt_tokens").drop_nulls().last(),
        )
    )
    per_request = chunks.group_by("request_id", maintain_order=True).agg(
        ticks_raw=(pl.col("start_ns") + (pl.col("perf_ns") - pl.col("start_perf_ns"))).filter(
            pl.col("content")
        ),
        raw_completion_tokens=pl.col("completion_tokens").drop_nulls().last(),
        raw_prompt_tokens=pl.col("prompt_tokens").drop_nulls().last(),
    )
    return (
        frame.drop("responses")
        .join(per_request, on="request_id", how="left")
        .with_columns(pl.col("ticks_raw").list.sort())
    )


# --------------------------------------------------------------------------------------
# Request rows
# --------------------------------------------------------------------------------------


def _requests(rows: pl.DataFrame, raw: pl.DataFrame | None, notes: Notes) -> pl.DataFrame:
    for name, dtype in _ROW_SCHEMA.items():
        if name not in rows.columns:
            rows = rows.with_columns(pl.lit(None, dtype=dtype).alias(name))
    if "icl" not in rows.columns:
        rows = rows.with_columns(pl.lit(None, dtype=pl.List(pl.Float64)).alias("icl"))
    if raw is not None:
        duplicate = (
            raw["request_id"].is_duplicated().any() or rows["request_id"].is_duplicated().any()
        )
        if duplicate:
            notes.add("request ids repeat, so the raw export cannot be matched; it was not used")
            raw = None
    if raw is not None:
        # The wall clock minus the perf clock at the start of every completed request is
        # one constant (AIPerf derives wall times from it); its median is robust.
        clock = (
            raw.filter(~pl.col("was_cancelled") & pl.col("error_code").is_null())
            .select((pl.col("start_ns") - pl.col("start_perf_ns")).median().cast(pl.Int64))
            .item()
        )
        rows = rows.join(
            raw.select(
                "request_id",
                "start_perf_ns",
                "ticks_raw",
                "raw_completion_tokens",
                "raw_prompt_tokens",
            ),
            on="request_id",
            how="left",
        ).with_columns(
            est_start_ns=pl.col("start_perf_ns") + pl.lit(clock, dtype=pl.Int64),
        )
        missing = rows.filter(pl.col("start_perf_ns").is_null()).height
        if missing:
            notes.add(
                f"{count_phrase(missing, 'record')} have no match in the raw export; their "
                "ticks come from the per-request metrics"
            )
    else:
        rows = rows.with_columns(
            start_perf_ns=pl.lit(None, dtype=pl.Int64),
            ticks_raw=pl.lit(None, dtype=pl.List(pl.Int64)),
            raw_completion_tokens=pl.lit(None, dtype=pl.Int64),
            raw_prompt_tokens=pl.lit(None, dtype=pl.Int64),
            est_start_ns=pl.lit(None, dtype=pl.Int64),
        )

    failed = pl.col("error_code").is_not_null() | pl.col("was_cancelled")
    frame = (
        rows.with_columns(
            # Ticks from the metrics: ms → ns once per value, then integer sums.
            first_m=pl.col("start_ns") + float_to_ns(pl.col("ttft"), pl.col("ttft_scale")),
            gaps_m=(pl.col("icl") * pl.col("icl_scale")).list.eval(
                pl.element().round(0).cast(pl.Int64)
            ),
            latency_ns=float_to_ns(pl.col("latency"), pl.col("latency_scale")),
            d_cancel=pl.coalesce("cancel_ns", "end_ns") - pl.col("start_ns"),
        )
        .with_columns(ticks_m=cumulative_ticks(pl.col("first_m"), pl.col("gaps_m")))
        .with_columns(
            raw_chunks=pl.col("ticks_raw").list.len(),
            metric_chunks=pl.col("ticks_m").list.len(),
        )
        .with_columns(
            use_raw=pl.col("ticks_raw").is_not_null()
            & (pl.col("raw_chunks") > 0)
            & (pl.col("ticks_m").is_null() | (pl.col("raw_chunks") == pl.col("metric_chunks"))),
            raw_disagrees=pl.col("ticks_raw").is_not_null()
            & pl.col("ticks_m").is_not_null()
            & (pl.col("raw_chunks") != pl.col("metric_chunks")),
            # AIPerf 0.13 stamps a cancelled record's start at cancellation: the raw perf
            # clock, or a send that precedes the "start", gives it away.
            late_by_raw=failed & (pl.col("start_ns") - pl.col("est_start_ns") > _LATE_START_NS),
            late_by_trace=failed
            & pl.col("est_start_ns").is_null()
            & (pl.col("send_start_ns") < pl.col("start_ns"))
            & pl.col("d_cancel").is_not_null(),
        )
        .with_columns(
            arrival_ns=pl.when(pl.col("late_by_raw"))
            .then(pl.col("est_start_ns"))
            .when(pl.col("late_by_trace"))
            .then(pl.col("start_ns") - pl.col("d_cancel"))
            .otherwise(pl.col("start_ns")),
            ticks_ns=pl.when(pl.col("use_raw"))
            .then(pl.col("ticks_raw"))
            .otherwise(pl.col("ticks_m")),
        )
        .with_columns(
            last_tick=pl.col("ticks_ns").list.last(),
            delay_ns=_message_delay_ns(pl.col("error")),
        )
        .with_columns(
            # The code decides (issue 9): 499 is the client closing the request, any
            # other code a failure, whatever metadata.was_cancelled says.
            terminal=pl.when(pl.col("error_code").is_not_null() & (pl.col("error_code") != 499))
            .then(pl.lit("error"))
            .when(failed)
            .then(pl.lit("cancellation"))
            .otherwise(pl.lit("completion")),
            terminal_ns=pl.max_horizontal(
                pl.when(failed)
                .then(
                    pl.coalesce(
                        pl.col("arrival_ns") + pl.col("d_cancel"),
                        pl.col("arrival_ns") + pl.col("delay_ns"),
                        pl.col("arrival_ns"),
                    )
                )
                .otherwise(
                    pl.coalesce(
                        "end_ns",
                        pl.col("start_ns") + pl.col("latency_ns"),
                        "last_tick",
                        "start_ns",
                    )
                ),
                pl.col("last_tick"),
            ),
            terminal_known=~failed | pl.col("d_cancel").is_not_null(),
            output_tokens=pl.when(failed)
            .then(None)
            .otherwise(
                pl.coalesce(
                    "osl", "output_token_count", "usage_completion_tokens", "raw_completion_tokens"
                )
            ),
            prompt_tokens=pl.coalesce("prompt_tokens", "raw_prompt_tokens"),
        )
    )
    _explain(frame, notes)
    return frame


def _message_delay_ns(message: pl.Expr) -> pl.Expr:
    """The delay a cancellation message states ("cancelled after 0.000 seconds",
    "cancelled 0.200s after being sent"), in ns."""
    seconds = message.str.extract(_DELAY_IN_MESSAGE.pattern, 1).cast(pl.Float64, strict=False)
    return float_to_ns(seconds, 1_000_000_000)


def _explain(frame: pl.DataFrame, notes: Notes) -> None:
    """Warnings for what the importer had to decide."""
    failed = frame.filter(pl.col("terminal").is_in(["cancellation", "error"]))
    completed = frame.filter(pl.col("terminal") == "completion")
    no_ticks = completed.filter(pl.col("ticks_ns").is_null()).height
    if no_ticks:
        notes.add(
            f"{count_phrase(no_ticks, 'completed record')} carry no TTFT (non-streaming?): "
            "they have a completion but no token ticks"
        )
    disagree = int(frame["raw_disagrees"].sum())
    if disagree:
        notes.add(
            f"{count_phrase(disagree, 'record')}: the raw export's content chunks do not match "
            "inter_chunk_latency in number; their ticks come from the per-request metrics"
        )
    counts = (
        completed.filter(pl.col("ticks_ns").is_not_null() & pl.col("osl").is_not_null())
        .select(
            fewer=(pl.col("ticks_ns").list.len() < pl.col("osl")).sum(),
            more=(pl.col("ticks_ns").list.len() > pl.col("osl")).sum(),
        )
        .row(0)
    )
    if counts[0] or counts[1]:
        notes.add(
            f"{count_phrase(counts[0] + counts[1], 'record')} have a chunk count different from "
            f"output_sequence_length ({counts[0]} with fewer chunks, i.e. multi-token chunks; "
            f"{counts[1]} with more): every tick carries tokens=1 and output_tokens is AIPerf's "
            "count"
        )
    missing_otc = completed.filter(
        pl.col("osl").is_not_null()
        & pl.col("output_token_count").is_null()
        & pl.col("reasoning_tokens").is_not_null()
    ).height
    if missing_otc:
        notes.add(
            f"{count_phrase(missing_otc, 'record')} lack output_token_count (all-reasoning "
            "output); output_tokens uses output_sequence_length, which includes reasoning tokens"
        )
    by_raw = int(frame["late_by_raw"].sum())
    by_trace = int(frame["late_by_trace"].sum())
    if by_raw or by_trace:
        how = (
            "the raw export's perf clock"
            if by_raw
            else "their trace_data send time, which precedes the stamped start"
        )
        notes.add(
            f"{count_phrase(by_raw + by_trace, 'cancelled record')} carry a start time stamped "
            f"at cancellation (an AIPerf 0.13 quirk, detected from {how}); their arrival was "
            "moved back by the measured time to cancel"
        )
    errored = frame.filter(pl.col("terminal") == "error")
    if errored.height:
        codes = errored.group_by("error_code").len().sort("error_code")
        notes.add(
            f"{count_phrase(errored.height, 'record')} failed with an error code other than 499 "
            "("
            + ", ".join(f"{n} × {c}" for c, n in codes.iter_rows())
            + "): each ends with an 'error' (errored, not cancelled); 499 stays a cancellation"
        )
    guessed = failed.filter(~pl.col("terminal_known"))
    from_message = guessed.filter(pl.col("delay_ns").is_not_null()).height
    if from_message:
        notes.add(
            f"{count_phrase(from_message, 'cancelled record')} have no end time; the "
            "cancellation is placed at start + the delay stated in the error message "
            "(terminal_known=False; the delay counts from the end of sending, 1 ms resolution)"
        )
    if guessed.height - from_message:
        notes.add(
            f"{count_phrase(guessed.height - from_message, 'failed record')} have no end time; "
            "their end is placed at their last known time (terminal_known=False)"
        )
    phases = frame.filter(pl.col("phase").is_not_null() & (pl.col("phase") != "profiling"))
    if phases.height:
        notes.add(
            f"{count_phrase(phases.height, 'record')} are not from the profiling phase (see the "
            "'phase' column); AIPerf's own summary leaves them out"
        )


# --------------------------------------------------------------------------------------
# profile_export_aiperf.json
# --------------------------------------------------------------------------------------


def _summary(path: Path) -> dict[str, Any] | None:
    """AIPerf's aggregates as ``{metric_tag: {unit, avg, p50, ..., std, count}}``.

    Older AIPerf nests them under ``records``; newer writes them at the top level.
    """
    try:
        doc = load_json(path)
    except InputError:
        return None
    if not isinstance(doc, dict):
        return None
    records = doc.get("records")
    source: dict[str, Any] = records if isinstance(records, dict) else doc
    metrics = {
        key: dict(value)
        for key, value in source.items()
        if isinstance(value, dict) and "unit" in value
    }
    # One name for TTFT across versions.
    if "ttft" in metrics and "time_to_first_token" not in metrics:
        metrics["time_to_first_token"] = metrics["ttft"]
    return metrics or None
