"""Spans of the OpenTelemetry GenAI semantic conventions → canonical events.

Pinned to open-telemetry/semantic-conventions ``docs/gen-ai/gen-ai-spans.md`` and
``model/gen-ai/registry.yaml`` (the ``gen_ai.*`` attribute registry): an inference span
is named ``{gen_ai.operation.name} {gen_ai.request.model}``, of kind ``CLIENT`` (a
caller) or ``SERVER`` (a model server), with ``gen_ai.operation.name`` (``chat``,
``text_completion``, ``generate_content``), ``gen_ai.usage.input_tokens`` /
``output_tokens``, ``gen_ai.response.finish_reasons`` (string array),
``gen_ai.response.id``, ``gen_ai.response.time_to_first_chunk`` (seconds, streaming
only) and, on failure, status ERROR with ``error.type``. The span covers the whole
operation: start = the request, end = the last chunk received (client) or sent (server).

Mapping:

- request_id = ``gen_ai.response.id`` (the span id when a span lacks one or two share
  one); arrival = span start; first token = start + ``time_to_first_chunk``; completion =
  span end; ``output_tokens`` = ``gen_ai.usage.output_tokens``;
- a span without ``time_to_first_chunk`` (not streamed) delivers everything at its end:
  its first token is placed at the end (``first_token_known=False``) and counted in the
  warnings;
- status ERROR → ``error`` at the end (an errored request, not a cancellation) with
  ``error`` and ``error_type`` = ``error.type`` (or the status message); a finish
  reason of ``abort``/``cancelled`` → ``cancellation``.

Not expressible: admission (the conventions have no queue time: queue wait and prefill
are unavailable), per-token times (no ITL distribution), the time of the last token
apart from the span end (``delivery_tail`` is 0 by construction). ``source`` is
``server`` when every span is a SERVER span, else ``client``. Old spellings are
accepted: ``gen_ai.usage.prompt_tokens``/``completion_tokens`` and ``gen_ai.system``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.errors import InputError
from servetrace.schema import SOURCE_CLIENT, SOURCE_SERVER
from servetrace.sources._engine import agree, engine_result, extra_attributes
from servetrace.sources.events import ImportResult, Notes, count_phrase
from servetrace.sources.fields import record_frame
from servetrace.sources.otlp.spans import FORMAT, Span, count, finish_reasons, seconds, unmapped
from servetrace.sources.times import with_ns
from servetrace.units import NS_PER_S

DIALECT = "OpenTelemetry GenAI"
_OPERATIONS = {"chat", "text_completion", "generate_content"}
TTFC = ("gen_ai.response.time_to_first_chunk",)
INPUT = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUTPUT = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
FINISH = ("gen_ai.response.finish_reasons",)
_KNOWN = {*TTFC, *INPUT, *OUTPUT, *FINISH, "error.type"}
_CANCELLED = ("abort", "cancel")


def is_request_span(span: Span) -> bool:
    """A model inference span: its operation, or (older instrumentations) its usage."""
    operation = span.attributes.get("gen_ai.operation.name")
    if operation is not None:
        return str(operation) in _OPERATIONS
    return any(name in span.attributes for name in (*OUTPUT, *TTFC))


def import_spans(spans: list[Span], *, path: Path, notes: Notes) -> ImportResult:
    frame = record_frame(
        spans,
        {
            "request_id": (pl.Utf8, _response_id),
            "span_id": (pl.Utf8, lambda s: s.span_id or s.where),
            "arrival_ns": (pl.Int64, lambda s: s.start_ns),
            "end_ns": (pl.Int64, _end),
            "ttfc_s": (pl.Float64, lambda s: seconds(s, *TTFC)),
            "prompt_tokens": (pl.Int64, lambda s: count(s, *INPUT)),
            "reported_output": (pl.Int64, lambda s: count(s, *OUTPUT)),
            "finish_reason": (pl.Utf8, lambda s: finish_reasons(s, *FINISH)),
            "status": (pl.Utf8, lambda s: s.status),
            "error_type": (pl.Utf8, _error_type),
            "span_kind": (pl.Utf8, lambda s: s.kind),
            "trace_id": (pl.Utf8, lambda s: s.trace_id or None),
        },
    )
    extras = [{"span_name": span.name, **unmapped(span, _KNOWN)} for span in spans]
    # The response id names the request across systems; the span id is the fallback when
    # a span has none or two spans share one.
    unique = (
        frame["request_id"].null_count() == 0 and frame["request_id"].n_unique() == frame.height
    )
    if not unique:
        frame = frame.with_columns(request_id=pl.col("span_id"))
    extra_columns, extra_names = extra_attributes(extras, "otlp")
    frame = with_ns(
        frame.with_columns(*extra_columns.values()),
        {"ttfc_s": TTFC[0]},
        NS_PER_S,
        lambda index: spans[index].where,
    )
    requests = _requests(frame)
    _report(requests, notes)
    server = bool((requests["span_kind"] == "server").all())
    return engine_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=len(spans),
        ticks_available=False,
        arrival_known=True,
        attributes=[
            "finish_reason",
            "span_kind",
            "first_token_known",
            "trace_id",
            *extra_names,
        ],
        source=SOURCE_SERVER if server else SOURCE_CLIENT,
    )


def _response_id(span: Span) -> str | None:
    value = span.attributes.get("gen_ai.response.id")
    return str(value) if value else None


def _error_type(span: Span) -> str | None:
    value = span.attributes.get("error.type")
    return str(value) if value is not None else span.status_message


def _end(span: Span) -> int:
    if span.end_ns is None:
        raise InputError(
            f"{span.where}: missing field 'endTimeUnixNano': a GenAI span ends when the "
            "response does, and this one has no end"
        )
    return span.end_ns


def _requests(frame: pl.DataFrame) -> pl.DataFrame:
    arrival, end = pl.col("arrival_ns"), pl.col("end_ns")
    errored = pl.col("status") == "error"
    cancelled = (
        pl.col("finish_reason")
        .str.to_lowercase()
        .str.contains("|".join(_CANCELLED))
        .fill_null(False)
    )
    first = arrival + pl.col("ttfc_ns")
    known = pl.col("ttfc_s").is_not_null() & (first <= end)
    return frame.with_columns(
        first_token_known=known,
        ticks_ns=pl.when(known)
        .then(pl.concat_list(first))
        .when(~errored & ~cancelled)
        .then(pl.concat_list(end))
        .otherwise(pl.lit([], dtype=pl.List(pl.Int64))),
        terminal=pl.when(errored)
        .then(pl.lit("error"))
        .when(cancelled)
        .then(pl.lit("cancellation"))
        .otherwise(pl.lit("completion")),
        terminal_ns=end,
        output_tokens=pl.col("reported_output"),
        error=pl.when(errored).then(pl.col("error_type").fill_null("span status ERROR")),
    )


def _report(requests: pl.DataFrame, notes: Notes) -> None:
    notes.add(
        "GenAI spans hold one value per request, no per-token times and no queue time: this "
        "is a request-level trace without admissions. TTFT, decode, TPOT (decode / "
        "(output_tokens - 1)) and e2e are available; queue wait, prefill and the ITL "
        "distribution are unavailable (not zero); delivery_tail is 0 by construction (the "
        "span end is the last token)"
    )
    guessed = requests.filter(~pl.col("first_token_known") & (pl.col("terminal") == "completion"))
    if guessed.height:
        notes.add(
            f"{count_phrase(guessed.height, 'span')} {agree(guessed.height)} "
            "no gen_ai.response.time_to_first_chunk "
            "(not streamed): their first token is placed at the span end "
            "(first_token_known=False), so their TTFT is their e2e"
        )
    errored = requests.filter(pl.col("status") == "error").height
    if errored:
        notes.add(
            f"{count_phrase(errored, 'span')} ended with status ERROR: each is an errored "
            "request, ending with an 'error' (not a cancellation), counted by its error.type"
        )
    kinds = set(requests["span_kind"].to_list())
    if "server" in kinds and len(kinds) > 1:
        notes.add(
            "the spans mix SERVER and CLIENT kinds: the trace is treated as client-side; "
            "import one side at a time for a clean comparison"
        )
