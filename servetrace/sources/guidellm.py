"""GuideLLM benchmark reports: ``benchmarks.json``.

The file is one JSON object with ``benchmarks[]``; each benchmark has its aggregates in
``metrics`` and its requests in ``requests.successful``, ``requests.incomplete``
(cancelled, possibly with partial output) and ``requests.errored``. Per request GuideLLM
keeps times as Unix **seconds** (floats): since 0.4 under ``info.timings``
(``request_start``, ``first_token_iteration``, ``last_token_iteration``, ``request_end``,
``token_iterations``), before that as ``start_time``, ``first_token_time``,
``last_token_time``, ``end_time``. It keeps no per-token timestamps.

This makes a **request-level** trace (``ticks_available=False``):

- arrival = ``request_start`` (the send; GuideLLM's TTFT counts from it);
- ``first_token`` at ``first_token_iteration`` with ``tokens=1`` — the only tick: the
  importer does not invent the ones in between;
- ``completion`` at ``request_end`` (the stream closing, where GuideLLM's request latency
  ends) with ``output_tokens`` = GuideLLM's count; the last token's time is kept in the
  ``last_token_ns`` attribute, so decode = last_token_ns - first token and TPOT =
  decode / (output_tokens - 1) can be computed, but there is no ITL distribution;
- incomplete requests end with ``cancellation`` at ``request_end`` and errored ones with
  ``error`` (errored, not cancelled) plus their ``error`` text (its last line is the
  ``error_type`` they are counted under); both keep their partial ``output_tokens``
  (on the cancellation row) and their first token when they got one.

GuideLLM's own definitions differ from servetrace's: its ``time_per_output_token_ms`` is
(last token - start) / output_tokens, so it includes TTFT; its ``inter_token_latency_ms``
is (last token - first token) / (output_tokens - 1), our ``tpot``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.events import (
    ImportResult,
    Notes,
    count_phrase,
    error_type_of,
    import_result,
)
from servetrace.sources.fields import Fields
from servetrace.sources.reading import holds_blocks, load_document
from servetrace.sources.times import checked_ns
from servetrace.units import NS_PER_S as _NS_PER_S

FORMAT = "guidellm"
_STATUSES = ("successful", "incomplete", "errored")
_ATTRIBUTES = (
    "status",
    "error_type",
    "benchmark",
    "conversation_id",
    "last_token_ns",
    "token_iterations",
    "targeted_start_ns",
)
# (new name under info.timings, old top-level name)
_TIMES = {
    "start": ("request_start", "start_time"),
    "first": ("first_token_iteration", "first_token_time"),
    "last": ("last_token_iteration", "last_token_time"),
    "end": ("request_end", "end_time"),
    "resolve_start": ("resolve_start", None),
    "resolve_end": ("resolve_end", None),
    "targeted": ("targeted_start", None),
}

# The columns ``_collect`` fills, one value per request.
_SCHEMA = {
    "request_id": pl.Utf8,
    "status": pl.Utf8,
    "benchmark": pl.Int64,
    "conversation_id": pl.Utf8,
    "error": pl.Utf8,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "token_iterations": pl.Int64,
    **dict.fromkeys(_TIMES, pl.Float64),
}


def sniff(doc: Any) -> bool:
    """True for a GuideLLM report."""
    return holds_blocks(doc, "benchmarks", "requests")


def read(path: str | Path) -> ImportResult:
    path = Path(path)
    doc = load_document(
        path, sniff, "a GuideLLM report", "a JSON object with 'benchmarks[].requests'"
    )
    fields = Fields(path, "GuideLLM")
    notes = Notes()
    columns: dict[str, list[Any]] = {name: [] for name in _SCHEMA}
    summaries: list[dict[str, Any]] = []
    wheres: list[str] = []
    for b_index, benchmark in enumerate(doc["benchmarks"]):
        b_where = f"benchmarks[{b_index}]"
        benchmark = fields.record(benchmark, b_where)
        metrics = benchmark.get("metrics")
        summaries.append(metrics if isinstance(metrics, dict) else {})
        groups = fields.mapping(benchmark, "requests", b_where)
        assert groups is not None
        for status in _STATUSES:
            records = fields.array(groups, status, f"{b_where}.requests", required=False) or []
            for r_index, record in enumerate(records):
                where = f"{b_where}.requests.{status}[{r_index}]"
                record = fields.record(record, where)
                _collect(fields, record, where, status, b_index, columns)
                wheres.append(where)
    if not columns["request_id"]:
        raise InputError(f"{path}: no requests in 'benchmarks[].requests'")

    frame = pl.DataFrame(columns, schema=_SCHEMA, strict=False)
    duplicated = frame["request_id"].is_duplicated()
    if duplicated.any():
        frame = frame.with_columns(
            request_id=pl.when(duplicated)
            .then(pl.format("{}:{}", pl.col("benchmark"), pl.col("request_id")))
            .otherwise(pl.col("request_id"))
        )
    frame = frame.with_columns(
        checked_ns(frame[name], _NS_PER_S, lambda i: f"{path}: {wheres[i]}", field=field)
        for name, field in {n: f"info.timings.{new}" for n, (new, _) in _TIMES.items()}.items()
    )
    ns = {name: pl.col(name) for name in _TIMES}
    completed = pl.col("status") == "successful"
    requests = (
        frame.with_columns(
            arrival_ns=pl.coalesce(ns["start"], ns["resolve_start"]),
            first_ns=ns["first"],
            last_token_ns=ns["last"],
            end_ns=pl.coalesce(ns["end"], ns["resolve_end"]),
            targeted_start_ns=ns["targeted"],
        )
        .with_columns(
            ticks_ns=pl.when(pl.col("first_ns").is_not_null()).then(pl.concat_list("first_ns")),
            terminal=pl.when(completed)
            .then(pl.lit("completion"))
            .when(pl.col("status") == "errored")
            .then(pl.lit("error"))
            .otherwise(pl.lit("cancellation")),
            terminal_ns=pl.max_horizontal(
                pl.coalesce("end_ns", "last_token_ns", "first_ns", "arrival_ns"),
                pl.col("first_ns"),
            ),
            terminal_known=pl.col("end_ns").is_not_null(),
            error=pl.when(completed)
            .then(None)
            .otherwise(
                pl.col("error").fill_null(
                    pl.when(pl.col("status") == "incomplete")
                    .then(pl.lit("incomplete (cancelled)"))
                    .otherwise(pl.lit("errored"))
                )
            ),
            status=pl.col("status").replace({"successful": "completed", "incomplete": "cancelled"}),
        )
        .with_columns(
            error_type=pl.when(pl.col("status") == "errored").then(error_type_of(pl.col("error")))
        )
    )

    notes.add(
        "GuideLLM keeps no per-token timestamps: this is a request-level trace with one tick "
        "(the first token) per request; TTFT, decode (last_token_ns - first token) and TPOT "
        "are available, the ITL distribution is not"
    )
    for status, label, event in (
        ("cancelled", "incomplete (cancelled)", "a 'cancellation'"),
        ("errored", "errored", "an 'error' (errored, not cancelled)"),
    ):
        count = requests.filter(pl.col("status") == status).height
        if count:
            notes.add(
                f"{count_phrase(count, 'request')} {label}: each ends with {event} "
                "and keeps its partial output_tokens and first token when it had one"
            )
    unknown_end = requests.filter(~pl.col("terminal_known")).height
    if unknown_end:
        notes.add(
            f"{count_phrase(unknown_end, 'request')} have no end time; their terminal event is "
            "placed at their last known time (terminal_known=False)"
        )
    if len(summaries) > 1:
        notes.add(
            f"the file holds {len(summaries)} benchmarks; the 'benchmark' column tells them apart"
        )

    summary: dict[str, Any] | None = (
        (summaries[0] or None) if len(summaries) == 1 else {"benchmarks": summaries}
    )
    return import_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=frame.height,
        tool_summary=summary,
        ticks_available=False,
        arrival_known=True,
        attributes=_ATTRIBUTES,
    )


def _collect(
    fields: Fields,
    record: Mapping[str, Any],
    where: str,
    status: str,
    benchmark: int,
    columns: dict[str, list[Any]],
) -> None:
    info = fields.mapping(record, "info", where, required=False) or {}
    timings = fields.mapping(info, "timings", where + ": info", required=False) or {}
    for name, (new, old) in _TIMES.items():
        value = fields.number(timings, new, where + ": info.timings", required=False)
        if value is None and old is not None:
            value = fields.number(record, old, where, required=False)
        columns[name].append(value)
    if columns["start"][-1] is None and columns["resolve_start"][-1] is None:
        raise fields.error(
            where, "missing field 'info.timings.request_start' (or 'start_time'): the send time"
        )
    if status == "successful" and columns["first"][-1] is None:
        raise fields.error(
            where,
            "missing field 'info.timings.first_token_iteration' (or 'first_token_time') "
            "in a successful request",
        )
    request_id = fields.get(record, "request_id") or fields.get(info, "request_id")
    columns["request_id"].append(str(request_id) if request_id is not None else where)
    columns["status"].append(status)
    columns["benchmark"].append(benchmark)
    columns["conversation_id"].append(fields.text(info, "conversation_id"))
    error = fields.get(info, "error") or fields.get(record, "error")
    columns["error"].append(None if error is None else str(error))
    columns["prompt_tokens"].append(
        fields.first_integer(
            where, (record, "prompt_tokens"), (record, "input_metrics.total_tokens")
        )
    )
    iterations = fields.integer(
        timings, "token_iterations", where + ": info.timings", required=False
    )
    columns["token_iterations"].append(iterations)
    output = fields.first_integer(
        where, (record, "output_tokens"), (record, "output_metrics.total_tokens")
    )
    # GuideLLM's own fallback when the server sent no usage: one token per iteration.
    columns["output_tokens"].append(output if output is not None else iterations)
