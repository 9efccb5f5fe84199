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
  the arrival back by the measured time to cancel, with a warning. AIPerf drops the
  partial output of a cancelled request: one without a chunk carries
  ``partial_output_known=False`` (its state at cancel and its tokens are unknown, not
  "before the first token, 0 delivered").

AIPerf records no admission: this is a client-side trace (``source = "client"``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.sources import response_body
from servetrace.sources.aiperf_raw import read_raw, sniff_raw_record
from servetrace.sources.aiperf_records import read_records, sniff_record
from servetrace.sources.aiperf_requests import requests
from servetrace.sources.events import ImportResult, Notes, import_result
from servetrace.sources.reading import (
    FormatMismatch,
    describe_json,
    iter_json_lines,
    read_text,
    sibling,
    strip_suffixes,
    tool_aggregates,
)

__all__ = ["FORMAT", "read", "sniff_raw_record", "sniff_record"]

FORMAT = "aiperf"
_ATTRIBUTES = (
    "conversation_id",
    "turn_index",
    "worker_id",
    "phase",
    "reasoning_tokens",
    "partial_output_known",
)


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
    raw = read_raw(raw_file) if raw_file is not None else None
    if main_file is not None:
        rows = read_records(main_file, lines)
    elif raw is not None:  # the raw export alone
        rows = raw.select(
            "request_id", "start_ns", "end_ns", "cancel_ns", "error_code", "error", "was_cancelled"
        )
    else:  # unreachable: without a main file, path itself is the raw export
        raise AssertionError("no AIPerf records to read")
    frame = requests(rows, raw, notes)
    summary_file = sibling(
        main_file or path, strip_suffixes(main_file or path, ".gz", ".jsonl") + "_aiperf.json"
    )
    return import_result(
        frame,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=rows.height,
        tool_summary=_summary(summary_file) if summary_file is not None else None,
        ticks_available=True,
        arrival_known=True,
        attributes=(*_ATTRIBUTES, *response_body.present(frame)),
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
# profile_export_aiperf.json
# --------------------------------------------------------------------------------------


def _summary(path: Path) -> dict[str, Any] | None:
    """AIPerf's aggregates as ``{metric_tag: {unit, avg, p50, ..., std, count}}``.

    Older AIPerf nests them under ``records``; newer writes them at the top level.
    """
    metrics = tool_aggregates(path, nested="records")
    # One name for TTFT across versions.
    if metrics and "ttft" in metrics and "time_to_first_token" not in metrics:
        metrics["time_to_first_token"] = metrics["ttft"]
    return metrics
