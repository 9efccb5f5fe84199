"""SGLang request metrics: ``--export-metrics-to-file`` (``sglang-request-metrics-*.log``).

Pinned to sgl-project/sglang:

- the writer: ``python/sglang/srt/managers/request_metrics_exporter.py`` at
  39eec95d9882bb7d49e290c1792fc4dba27e97eb (``FileRequestMetricsExporter``): one JSON
  object per finished request (health checks excluded), appended to
  ``sglang-request-metrics-<YYYYMMDD_HH>.log`` in ``--export-metrics-to-file-dir``, a new
  file every hour; the record is ``request_parameters`` (the request, as JSON text) plus
  the response's ``meta_info``;
- ``meta_info`` in 0.5.x: ``python/sglang/srt/managers/tokenizer_manager.py``
  (``_handle_batch_output``, ``_calculate_timing_metrics``; a 0.5.x copy, commit not
  pinned): ``id``, ``finish_reason``
  (``{"type": "stop"|"length"|"abort", ...}``), ``prompt_tokens``, ``completion_tokens``,
  ``cached_tokens``, ``total_retractions``, ``queue_time``, ``e2e_latency``,
  ``request_received_ts``, ``request_sent_to_scheduler_ts``, ``prefill_finished_ts``,
  ``response_sent_to_client_ts``, ``decode_finished_ts``, ``inference_time``;
- newer ``meta_info``: ``python/sglang/srt/observability/req_time_stats.py`` at
  00ce49e05c17e08f643afab34f3cdcef14935ac0 (``APIServerReqTimeStats`` and
  ``SchedulerReqTimeStats.convert_to_output_meta_info``): ``request_received_ts``,
  ``api_server_dispatch_finish_ts``, ``forward_entry_time``, ``prefill_finished_time``,
  ``response_sent_to_client_ts``, ``request_finished_ts``, and, newest,
  ``first_token_generated_time`` / ``scheduler_completion_time``.

Every ``*_ts``/``*_time`` timestamp is wall-clock float **seconds** (``perf_counter`` +
a calibrated offset), converted to ns by rounding once; resolution ≈ 1 µs (float64 at
1.7e9 s). Mapping:

- arrival = ``request_received_ts`` (the tokenizer manager received the request);
- admission = ``forward_entry_time`` (first entry to a forward batch, kept across
  retractions); in 0.5.x, which has no such field, ``decode_finished_ts -
  inference_time`` (inference_time counts from the forward entry, on the same clock);
  else ``request_sent_to_scheduler_ts + queue_time`` (a lower bound: the scheduler's own
  receive is not recorded); none of these → no admission (warning);
- first token = ``prefill_finished_ts`` / ``prefill_finished_time`` /
  ``first_token_generated_time`` (prefill finished: the first token exists);
- completion = ``request_finished_ts`` / ``decode_finished_ts`` (else
  ``response_sent_to_client_ts``, else arrival + ``e2e_latency``); the last token is
  ``scheduler_completion_time`` where SGLang writes it (``last_token_ns``), else the
  finish time: SGLang's own decode and TPOT run to the finish;
- ``finish_reason.type == "abort"`` with a ``status_code`` other than 499 (SGLang's
  rejection of a request, e.g. 400 for a prompt too long, 503 when overloaded) → ``error``
  (an errored request, not a cancellation); an abort without one (the client went away)
  or with 499 → ``cancellation``; ``status_code`` and ``message`` are kept as
  ``error_code``/``error``.

Not expressible: per-token times (a request-level trace: TPOT exact, no ITL
distribution); preemption **times**: ``total_retractions`` is a count only, kept as the
``retractions`` attribute, with no ``preemption`` events (SGLang's ``queue_time``
includes time re-queued after a retraction, ours is the first wait). Unknown fields are
kept as attributes; ``request_parameters`` (the prompt) is not.
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
    folder_files,
    sniff_head,
)
from servetrace.sources.events import ImportResult, Notes, count_phrase
from servetrace.sources.fields import Fields
from servetrace.sources.reading import FormatMismatch, describe_json, iter_json_lines
from servetrace.sources.times import checked_ns
from servetrace.units import NS_PER_S

FORMAT = "sglang"
FILE_PREFIX = "sglang-request-metrics-"

# Canonical role → the spellings of SGLang versions, first found wins.
_TIMESTAMPS = {
    "received": ("request_received_ts",),
    "forward_entry": ("forward_entry_time",),
    "to_scheduler": ("request_sent_to_scheduler_ts", "api_server_dispatch_finish_ts"),
    "first": ("prefill_finished_ts", "prefill_finished_time", "first_token_generated_time"),
    "last": ("scheduler_completion_time",),
    "finished": ("request_finished_ts", "decode_finished_ts"),
    "sent": ("response_sent_to_client_ts",),
}
_DURATIONS = {
    "queue": ("queue_time",),
    "inference": ("inference_time",),
    "e2e": ("e2e_latency",),
}
_COUNTS = {
    "prompt_tokens": ("prompt_tokens",),
    "completion_tokens": ("completion_tokens",),
    "cached_tokens": ("cached_tokens",),
    "retractions": ("total_retractions", "retraction_count", "num_retractions"),
}
_CONSUMED = {
    "id",
    "finish_reason",
    "request_parameters",
    *(
        n
        for names in (*_TIMESTAMPS.values(), *_DURATIONS.values(), *_COUNTS.values())
        for n in names
    ),
}


def sniff_record(obj: Any) -> bool:
    """True for one record of an SGLang request-metrics file."""
    if not isinstance(obj, dict) or "metadata" in obj:
        return False
    return "request_parameters" in obj or (
        "e2e_latency" in obj and "finish_reason" in obj and "prompt_tokens" in obj
    )


def sniff_file(path: Path) -> bool:
    """Recognise a metrics file by its head (a prompt can make one record long)."""
    return sniff_head(path, sniff_record, r'\s*\{\s*"request_parameters"\s*:')


def read(path: str | Path) -> ImportResult:
    """Import one SGLang metrics file, or the folder of its hourly files."""
    path = Path(path)
    if path.is_dir():
        files = folder_files(path, lambda p: p.name.startswith(FILE_PREFIX) and sniff_file(p))
    else:
        files = [path]
    notes = Notes()
    extras: list[dict[str, Any]] = []
    frame = pl.concat([_read_file(file, extras) for file in files], how="vertical")
    if frame.height == 0:
        raise InputError(f"{path}: no records: the file is empty")
    if len(files) > 1:
        notes.add(f"read {len(files)} hourly files of the folder as one trace")
    extra_columns, extra_names = extra_attributes(extras, FORMAT)
    requests = _requests(frame.with_columns(*extra_columns.values()))
    _report(requests, notes)
    return engine_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=frame.height,
        ticks_available=False,
        arrival_known=True,
        attributes=[
            "finish_reason",
            "retractions",
            "cached_tokens",
            "last_token_ns",
            "sent_ns",
            "queue_time_ns",
            "e2e_latency_ns",
            "admission_from",
            "file",
            *extra_names,
        ],
    )


def _read_file(path: Path, extras: list[dict[str, Any]]) -> pl.DataFrame:
    """One file's records as columns; every numeric field is checked in Polars, column by
    column, and a bad value is reported with its record and field."""
    fields = Fields(path, "SGLang request metrics")
    objects: list[dict[str, Any]] = []
    wheres: list[str] = []
    ids: list[str] = []
    reasons: list[tuple[str | None, int | None, str | None]] = []
    for index, (line, obj) in enumerate(iter_json_lines(path)):
        where = f"record {index} (line {line})"
        if not sniff_record(obj):
            if index == 0:
                raise FormatMismatch(
                    f"{path}: line {line}: not an SGLang request-metrics record: expected "
                    f"'request_parameters' and meta_info fields ({describe_json(obj)})"
                )
            raise fields.error(where, "not an SGLang request-metrics record")
        objects.append(obj)
        wheres.append(where)
        identifier = obj.get("id")
        ids.append(str(identifier) if identifier is not None else f"{path.name}:{line}")
        reasons.append(_finish_reason(fields, obj.get("finish_reason"), where))
        extras.append({k: v for k, v in obj.items() if k not in _CONSUMED})
    columns: dict[str, pl.Series] = {
        "request_id": pl.Series(ids, dtype=pl.Utf8),
        "file": pl.Series([path.name] * len(ids), dtype=pl.Utf8),
    }
    for role, names in (*_TIMESTAMPS.items(), *_DURATIONS.items()):
        columns[f"{role}_ns"] = _coalesced(fields, objects, names, wheres, integer=False)
    for role, names in _COUNTS.items():
        columns[role] = _coalesced(fields, objects, names, wheres, integer=True)
    missing = columns["received_ns"].is_null().arg_true()
    if len(missing):
        raise fields.error(
            wheres[int(missing[0])],
            "missing field 'request_received_ts' (the arrival)",
            hint="SGLang writes request timestamps only with --enable-metrics",
        )
    frame = pl.DataFrame(columns)
    return frame.with_columns(
        finish_reason=pl.Series([r[0] for r in reasons], dtype=pl.Utf8),
        abort_status=pl.Series([r[1] for r in reasons], dtype=pl.Int64),
        abort_message=pl.Series([r[2] for r in reasons], dtype=pl.Utf8),
    )


def _coalesced(
    fields: Fields,
    objects: list[dict[str, Any]],
    names: tuple[str, ...],
    wheres: list[str],
    *,
    integer: bool,
) -> pl.Series:
    """The first present spelling among ``names``, per record, each checked as a column:
    counts as Int64, times (float seconds) as Int64 ns, range-checked once converted."""
    series = []
    for name in names:
        values = fields.column(
            [obj.get(name) for obj in objects],
            name,
            wheres.__getitem__,
            integer=integer,
            minimum=0,
        )
        if not integer:
            values = checked_ns(values, NS_PER_S, lambda i: f"{fields.path}: {wheres[i]}")
        series.append(values)
    out = series[0] if len(series) == 1 else pl.select(pl.coalesce(series)).to_series()
    return out.cast(pl.Int64)


def _finish_reason(
    fields: Fields, reason: Any, where: str
) -> tuple[str | None, int | None, str | None]:
    """``(type, status_code, message)`` of SGLang's finish_reason object."""
    if reason is None or isinstance(reason, str):
        return reason, None, None
    if not isinstance(reason, dict):
        raise fields.error(where, "field 'finish_reason' must be an object or null")
    kind = fields.string(reason, "type", where + ": finish_reason")
    status = fields.integer(reason, "status_code", where + ": finish_reason", required=False)
    message = reason.get("message")
    return kind, status, None if message is None else str(message)


def _ns(role: str) -> pl.Expr:
    return pl.col(f"{role}_ns")


def _requests(frame: pl.DataFrame) -> pl.DataFrame:
    arrival = _ns("received")
    finished = pl.coalesce(_ns("finished"), _ns("sent"), arrival + _ns("e2e"))
    by_inference = _ns("finished") - _ns("inference")
    by_queue = _ns("to_scheduler") + _ns("queue")
    admission = pl.coalesce(_ns("forward_entry"), by_inference, by_queue)
    aborted = pl.col("finish_reason").str.to_lowercase() == "abort"
    failed = aborted & pl.col("abort_status").is_not_null() & (pl.col("abort_status") != 499)
    first = _ns("first")
    return frame.with_columns(
        arrival_ns=arrival,
        admission_from=pl.when(_ns("forward_entry").is_not_null())
        .then(pl.lit("forward_entry_time"))
        .when(by_inference.is_not_null())
        .then(pl.lit("finished - inference_time"))
        .when(by_queue.is_not_null())
        .then(pl.lit("to_scheduler + queue_time")),
        # Never before arrival nor after the first token: the fields come from three
        # processes whose wall-clock offsets are calibrated separately.
        **{
            ADMISSION: pl.min_horizontal(
                pl.max_horizontal(admission, arrival), pl.coalesce(first, finished)
            )
        },
        ticks_ns=pl.when(first.is_not_null())
        .then(pl.concat_list(first))
        .otherwise(pl.lit([], dtype=pl.List(pl.Int64))),
        terminal=pl.when(failed.fill_null(False))
        .then(pl.lit("error"))
        .when(aborted.fill_null(False))
        .then(pl.lit("cancellation"))
        .otherwise(pl.lit("completion")),
        terminal_ns=finished,
        last_token_ns=pl.min_horizontal(_ns("last"), finished),
        sent_ns=_ns("sent"),
        queue_time_ns=_ns("queue"),
        e2e_latency_ns=_ns("e2e"),
        prompt_tokens=pl.col("prompt_tokens"),
        output_tokens=pl.col("completion_tokens"),
        error_code=pl.when(aborted).then(pl.col("abort_status")),
        error=pl.when(aborted).then(pl.col("abort_message")),
    )


def _report(requests: pl.DataFrame, notes: Notes) -> None:
    notes.add(
        "SGLang writes one record per request, no per-token times: this is a request-level "
        "trace. Queue wait, prefill, TTFT, decode (to the finish), TPOT and e2e are "
        "available at the ~1 µs its float-second timestamps carry; the ITL distribution "
        "is unavailable (not zero)"
    )
    retracted = requests.filter(pl.col("retractions").fill_null(0) > 0)
    if retracted.height:
        notes.add(
            f"{count_phrase(retracted.height, 'request')} {agree(retracted.height, 'was', 'were')} "
            "retracted (preempted) "
            f"{int(retracted['retractions'].sum())} times in all: SGLang records the count, "
            "not the times, so there are no preemption events (preemptions/requeued do not "
            "include them; see the 'retractions' column); SGLang's queue_time includes the "
            "re-queued time, our queue_wait is the first wait"
        )
    sources = requests["admission_from"].value_counts()
    missing = int(requests["admission_from"].is_null().sum())
    if missing:
        notes.add(
            f"{count_phrase(missing, 'request')} {agree(missing)} "
            "no forward_entry_time, inference_time "
            "or queue_time (SGLang without --enable-metrics): no admission, so queue wait "
            "and prefill are unavailable for them"
        )
    lower = sources.filter(pl.col("admission_from") == "to_scheduler + queue_time")
    if lower.height:
        bounded = int(lower["count"][0])
        notes.add(
            f"{count_phrase(bounded, 'request')} {agree(bounded, 'takes its', 'take their')} "
            "admission from "
            "request_sent_to_scheduler_ts + queue_time: a lower bound (the scheduler's "
            "receive is not recorded), so queue wait may be short and prefill long"
        )
    no_first = requests.filter(
        (pl.col("terminal") == "completion") & (pl.col("ticks_ns").list.len() == 0)
    ).height
    if no_first:
        notes.add(
            f"{count_phrase(no_first, 'completed request')} {agree(no_first)} "
            "no prefill-finished time: "
            "they have no first token"
        )
    if requests["last_token_ns"].is_null().all():
        notes.add(
            "no scheduler_completion_time in these records: the last token is placed at the "
            "finish, so decode runs to the finish (as SGLang's own TPOT) and delivery_tail "
            "is 0 by construction"
        )
