"""TensorRT-LLM ``trtllm-serve`` per-request perf metrics: ``GET /perf_metrics`` responses.

Pinned to NVIDIA/TensorRT-LLM ``tensorrt_llm/serve/openai_server.py`` at
e7f7345e31e574b5d0918b756b871882c7346b3c (``OpenAIServer.get_perf_metrics`` and
``_extract_metrics``) and ``cpp/tensorrt_llm/pybind/executor/request.cpp``
(``TimingMetrics``): with ``return_perf_metrics: true`` the server keeps one item per
**finished** request in a deque of ``perf_metrics_max_requests`` and each poll of
``/perf_metrics`` returns and empties it, as a JSON list of::

    {"request_id": 7, "perf_metrics": {"first_iter": 12, "last_iter": 40,
      "timing_metrics": {"server_arrival_time": s, "arrival_time": s,
        "first_scheduled_time": s, "first_token_time": s, "server_first_token_time": s,
        "last_token_time": s[, "kv_cache_size", "kv_cache_transfer_start", ..._end]},
      "kv_cache_metrics": {"num_total_allocated_blocks", "num_new_allocated_blocks",
        "num_reused_blocks", "num_missed_blocks"},
      "speculative_decoding": {"acceptance_rate", "total_accepted_draft_tokens",
        "total_draft_tokens"}}[, "ctx_request_id": ...]}

The file is several polls appended (``curl .../perf_metrics >> polls.json``): JSON lists
one after another, on one line each or not; one item per line (the perf-metrics output
files of newer releases, with a ``status``) is read too.

Times are **seconds on the server's steady clock** (``std::chrono::steady_clock``
converted through ``timedelta.total_seconds()``: µs resolution), so they are rounded to
the µs, then to ns: relative times (queue, prefill, decode, request offsets) are exact
to the µs; wall-clock alignment with other traces is not claimed (``arrival_known`` holds
within this trace only). Mapping:

- arrival = ``arrival_time`` (the executor's; the HTTP server's ``server_arrival_time``
  is kept as ``server_arrival_ns``); admission = ``first_scheduled_time``;
  first token = ``first_token_time``; completion = ``last_token_time`` (no completion
  time exists, so ``delivery_tail`` is 0 by construction);
- KV-cache reuse (``kv_*``) and speculative decoding (``spec_*``) are request attributes.

Not expressible: token counts (so TPOT is unavailable: decode is known, N is not),
per-token times (no ITL), preemptions, cancelled or failed requests (the server records
finished requests only), requests dropped when more than ``perf_metrics_max_requests``
finished between two polls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources._engine import (
    ADMISSION,
    agree,
    engine_result,
    extra_attributes,
    iter_json_values,
    sniff_head,
)
from servetrace.sources.events import ImportResult, Notes, count_phrase
from servetrace.sources.fields import Fields
from servetrace.sources.reading import FormatMismatch, describe_json, read_text
from servetrace.sources.times import with_ns
from servetrace.units import NS_PER_S, NS_PER_US

FORMAT = "trtllm"
_TIMES = (
    "arrival_time",
    "first_scheduled_time",
    "first_token_time",
    "last_token_time",
    "server_arrival_time",
    "server_first_token_time",
    "kv_cache_transfer_start",
    "kv_cache_transfer_end",
)
_REQUIRED = ("arrival_time", "first_scheduled_time", "first_token_time", "last_token_time")
_KV = (
    "num_total_allocated_blocks",
    "num_new_allocated_blocks",
    "num_reused_blocks",
    "num_missed_blocks",
)
_SPEC = ("acceptance_rate", "total_accepted_draft_tokens", "total_draft_tokens")
_CONSUMED = {"request_id", "perf_metrics", "status"}


def sniff_item(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("perf_metrics"), dict)
        and isinstance(obj["perf_metrics"].get("timing_metrics"), dict)
    )


def sniff_value(value: Any) -> bool:
    """True for one ``/perf_metrics`` poll (a list of items) or one item."""
    if isinstance(value, list):
        return bool(value) and sniff_item(value[0])
    return sniff_item(value)


def sniff_file(path: Path) -> bool:
    """Recognise appended polls by the file's head."""
    starts = r'\s*\[?\s*\{\s*"request_id"\s*:[^{]*"perf_metrics"\s*:\s*\{'
    return sniff_head(path, sniff_value, starts)


def read(path: str | Path) -> ImportResult:
    path = Path(path)
    fields = Fields(path, "TensorRT-LLM perf metrics")
    notes = Notes()
    items_read: list[dict[str, Any]] = []
    wheres: list[str] = []
    extras: list[dict[str, Any]] = []
    polls = 0
    for line, value in iter_json_values(read_text(path), path):
        items = value if isinstance(value, list) else [value]
        polls += 1
        if not items:
            continue  # a poll with nothing finished since the last one
        if not sniff_item(items[0]) and not items_read:
            raise FormatMismatch(
                f"{path}: line {line}: not a TensorRT-LLM /perf_metrics response: expected "
                f"items with 'perf_metrics.timing_metrics' ({describe_json(items[0])})"
            )
        for index, item in enumerate(items):
            where = f"poll {polls} (line {line}) item {index}"
            if not sniff_item(item):
                raise fields.error(where, "expected an object with 'perf_metrics.timing_metrics'")
            if item.get("request_id") is None:
                raise fields.error(where, "missing field 'request_id'")
            items_read.append(item)
            wheres.append(where)
            extras.append({k: v for k, v in item.items() if k not in _CONSUMED})
    if not items_read:
        raise InputError(f"{path}: no requests: every /perf_metrics poll was empty")
    frame = _columns(fields, items_read, wheres)
    # The steady clock's time points have µs resolution: rounded to it, so the float's
    # noise below the µs does not become fake ns.
    frame = with_ns(
        frame,
        {f"{name}_s": f"perf_metrics.timing_metrics.{name}" for name in _TIMES},
        NS_PER_S,
        lambda index: f"{path}: {wheres[index]}",
        resolution_ns=NS_PER_US,
    )
    frame = _unique_ids(frame, notes)
    extra_columns, extra_names = extra_attributes(extras, FORMAT)
    requests = _requests(frame.with_columns(*extra_columns.values()))
    _report(requests, polls, notes)
    attributes = [
        "last_token_ns",
        "server_arrival_ns",
        "server_first_token_ns",
        "kv_cache_transfer_start_ns",
        "kv_cache_transfer_end_ns",
        "kv_cache_size",
        "first_iter",
        "last_iter",
        "status",
        "trtllm_request_id",
        *(f"kv_{name}" for name in _KV),
        "kv_cache_hit_rate",
        *(f"spec_{name}" for name in _SPEC),
        *extra_names,
    ]
    return engine_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=frame.height,
        ticks_available=False,
        arrival_known=True,
        attributes=attributes,
    )


def _columns(fields: Fields, items: list[dict[str, Any]], wheres: list[str]) -> pl.DataFrame:
    """The items as columns, each field checked in Polars; errors name poll, item, field."""
    where_of = wheres.__getitem__

    def column(dotted: str, *, integer: bool = False, required: bool = False) -> pl.Series:
        dotted = f"perf_metrics.{dotted}"
        values = [fields.get(item, dotted) for item in items]
        try:
            return fields.column(values, dotted, where_of, integer=integer, nullable=not required)
        except InputError as error:
            raise InputError(
                error.message, hint="TensorRT-LLM writes steady-clock seconds, as numbers"
            ) from None

    data: dict[str, pl.Series] = {
        "trtllm_request_id": pl.Series([str(item["request_id"]) for item in items], dtype=pl.Utf8),
        **{f"{n}_s": column(f"timing_metrics.{n}", required=n in _REQUIRED) for n in _TIMES},
        "kv_cache_size": column("timing_metrics.kv_cache_size", integer=True),
        "first_iter": column("first_iter", integer=True),
        "last_iter": column("last_iter", integer=True),
        "status": pl.Series(
            [None if item.get("status") is None else str(item["status"]) for item in items],
            dtype=pl.Utf8,
        ),
        **{f"kv_{n}": column(f"kv_cache_metrics.{n}", integer=True) for n in _KV},
        "spec_acceptance_rate": column("speculative_decoding.acceptance_rate"),
        **{f"spec_{n}": column(f"speculative_decoding.{n}", integer=True) for n in _SPEC[1:]},
    }
    return pl.DataFrame(data)


def _unique_ids(frame: pl.DataFrame, notes: Notes) -> pl.DataFrame:
    """Executor request ids restart with the server: a repeated id gets ``#n``."""
    occurrence = pl.int_range(pl.len()).over("trtllm_request_id")
    repeated = int((frame.select(occurrence.alias("n"))["n"] > 0).sum())
    if repeated:
        notes.add(
            f"{count_phrase(repeated, 'request id')} {agree(repeated, 'occurs', 'occur')} "
            "more than once (the server was "
            "restarted between polls?): repeats are renamed ID#n"
        )
    return frame.with_columns(
        request_id=pl.when(occurrence == 0)
        .then(pl.col("trtllm_request_id"))
        .otherwise(pl.format("{}#{}", pl.col("trtllm_request_id"), occurrence))
    )


def _ns(name: str) -> pl.Expr:
    return pl.col(f"{name}_ns")


def _requests(frame: pl.DataFrame) -> pl.DataFrame:
    failed = pl.col("status").is_not_null() & (pl.col("status").str.to_lowercase() != "complete")
    return frame.with_columns(
        arrival_ns=_ns("arrival_time"),
        **{ADMISSION: _ns("first_scheduled_time")},
        ticks_ns=pl.concat_list(_ns("first_token_time")),
        terminal=pl.when(failed).then(pl.lit("cancellation")).otherwise(pl.lit("completion")),
        terminal_ns=_ns("last_token_time"),
        last_token_ns=_ns("last_token_time"),
        server_arrival_ns=_ns("server_arrival_time"),
        server_first_token_ns=_ns("server_first_token_time"),
        kv_cache_transfer_start_ns=_ns("kv_cache_transfer_start"),
        kv_cache_transfer_end_ns=_ns("kv_cache_transfer_end"),
        kv_cache_hit_rate=pl.col("kv_num_reused_blocks")
        / (pl.col("kv_num_reused_blocks") + pl.col("kv_num_missed_blocks")),
        error=pl.when(failed).then(pl.format("status {}", pl.col("status"))),
    )


def _report(requests: pl.DataFrame, polls: int, notes: Notes) -> None:
    notes.add(
        f"{count_phrase(polls, '/perf_metrics poll')}: times are seconds on the server's "
        "steady clock (1 µs resolution): queue wait, prefill, TTFT, decode and e2e are exact "
        "to the µs, relative to each other; they are not aligned to wall-clock time"
    )
    notes.add(
        "TensorRT-LLM's perf metrics carry no token counts and no per-token times: TPOT, "
        "output_tokens, output tok/s and the ITL distribution are unavailable (not zero); "
        "completion is the last token (no completion time), so delivery_tail is 0 by "
        "construction"
    )
    notes.add(
        "the server records finished requests only, and drops the oldest when more than "
        "perf_metrics_max_requests finish between two polls: compare the request count with "
        "the client's"
    )
    order = requests.filter(
        (pl.col(ADMISSION) < pl.col("arrival_ns"))
        | (pl.col("ticks_ns").list.first() < pl.col(ADMISSION))
        | (pl.col("terminal_ns") < pl.col("ticks_ns").list.first())
    ).height
    if order:
        notes.add(
            f"{count_phrase(order, 'request')} {agree(order)} times out of order (arrival <= "
            "first_scheduled <= first_token <= last_token broken): the lifecycle check "
            "quarantines them"
        )
