"""vLLM's ``llm_request`` span (``vllm serve --otlp-traces-endpoint``) → canonical events.

Pinned to vllm-project/vllm:

- attribute names: ``vllm/tracing.py`` at 03b8a674ec7e654ab285df6f013a53a24381f941 and
  ``vllm/foundation/observability/tracing/utils.py`` at
  733dac50f1e79343dfc2bdedc795142a960a601e (``SpanAttributes``);
- the span: ``vllm/v1/engine/output_processor.py`` ``OutputProcessor.do_tracing`` (V1
  engine, through 0.33; read from a public copy of that file, its vLLM commit not
  pinned): built for **finished** requests only, ``SpanKind.SERVER``,
  ``start_time = int(arrival_time * 1e9)``; ``time_to_first_token =
  first_token_latency``; ``e2e = iteration_timestamp - arrival_time``; ``time_in_queue =
  scheduled_ts - queued_ts``; ``time_in_model_prefill = first_token_ts - scheduled_ts``;
  ``time_in_model_decode = last_token_ts - first_token_ts``; ``time_in_model_inference =
  last_token_ts - scheduled_ts``; usage ``prompt_tokens``/``completion_tokens``; the
  external ``gen_ai.request.id``. All durations are float **seconds**
  (``vllm/v1/metrics/stats.py``: ``arrival_time`` wall clock, the ``*_ts`` engine-
  monotonic, ``scheduled_ts`` the first scheduling).

Mapping (the issue's, all in integer ns, each duration rounded once):

- arrival = span start (exact ns); admission = arrival + ``time_in_queue``;
  first token = arrival + ``time_to_first_token``; completion = arrival + ``e2e``;
- the last token = first token + ``time_in_model_decode`` (kept as ``last_token_ns``,
  never after completion): decode and TPOT are vLLM's, ``delivery_tail`` is the output
  processing after the last token;
- a finish reason ``abort`` (``gen_ai.response.finish_reasons``, written by newer vLLM
  and forks) → ``cancellation`` at arrival + e2e; ``error``, or the span's status
  ERROR, → ``error`` (an errored request, not a cancellation) with the reason (or the
  status message) in ``error`` and ``error_type``.

Older and newer spellings are accepted: ``gen_ai.usage.input_tokens``/``output_tokens``
for the usage, ``gen_ai.response.time_to_first_chunk`` for TTFT, ``gen_ai.response.id``
for the id. Resolution: the span start is exact; the durations are float seconds from
``time.time()``/``time.monotonic()``, rounded to the nearest ns (float64 keeps well under
1 µs for any request latency). Not expressible: per-token times (no ITL distribution),
preemptions, the time between the API server's arrival and the engine queueing (it falls
into prefill; vLLM's own model prefill is kept as ``vllm_prefill_ns``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.sources._engine import ADMISSION, agree, engine_result, extra_attributes
from servetrace.sources.events import ImportResult, Notes, count_phrase
from servetrace.sources.fields import record_frame
from servetrace.sources.otlp.spans import FORMAT, Span, count, finish_reasons, seconds, unmapped
from servetrace.sources.times import with_ns
from servetrace.units import NS_PER_S

DIALECT = "vLLM llm_request"
SPAN_NAME = "llm_request"

QUEUE = ("gen_ai.latency.time_in_queue",)
TTFT = ("gen_ai.latency.time_to_first_token", "gen_ai.response.time_to_first_chunk")
E2E = ("gen_ai.latency.e2e",)
PREFILL = ("gen_ai.latency.time_in_model_prefill",)
DECODE = ("gen_ai.latency.time_in_model_decode",)
INFERENCE = ("gen_ai.latency.time_in_model_inference",)
PROMPT = ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens")
OUTPUT = ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens")
REQUEST_ID = ("gen_ai.request.id", "gen_ai.response.id")
FINISH = ("gen_ai.response.finish_reasons", "gen_ai.response.finish_reason")
_KNOWN = {
    *QUEUE,
    *TTFT,
    *E2E,
    *PREFILL,
    *DECODE,
    *INFERENCE,
    *PROMPT,
    *OUTPUT,
    *REQUEST_ID,
    *FINISH,
}
# The float-second columns and the attribute spellings they come from.
_DURATIONS = {
    "queue_s": QUEUE,
    "ttft_s": TTFT,
    "e2e_s": E2E,
    "prefill_s": PREFILL,
    "decode_s": DECODE,
    "inference_s": INFERENCE,
}
_CANCELLED = {"abort", "aborted", "cancelled", "canceled"}
_ERRORS = {"error"}


def is_request_span(span: Span) -> bool:
    """vLLM's per-request span: its name, or its e2e latency attribute."""
    return span.name == SPAN_NAME or E2E[0] in span.attributes


def import_spans(spans: list[Span], *, path: Path, notes: Notes) -> ImportResult:
    frame = record_frame(
        spans,
        {
            "request_id": (pl.Utf8, lambda s: _first_text(s, REQUEST_ID) or s.span_id),
            "arrival_ns": (pl.Int64, lambda s: s.start_ns),
            "end_ns": (pl.Int64, lambda s: s.end_ns),
            "queue_s": (pl.Float64, lambda s: seconds(s, *QUEUE)),
            "ttft_s": (pl.Float64, lambda s: seconds(s, *TTFT)),
            # Without an end, the e2e latency is required: it is the only end there is.
            "e2e_s": (pl.Float64, lambda s: seconds(s, *E2E, required=s.end_ns is None)),
            "prefill_s": (pl.Float64, lambda s: seconds(s, *PREFILL, minimum=-1e9)),
            "decode_s": (pl.Float64, lambda s: seconds(s, *DECODE, minimum=-1e9)),
            "inference_s": (pl.Float64, lambda s: seconds(s, *INFERENCE, minimum=-1e9)),
            "prompt_tokens": (pl.Int64, lambda s: count(s, *PROMPT)),
            "reported_output": (pl.Int64, lambda s: count(s, *OUTPUT)),
            "finish_reason": (pl.Utf8, lambda s: finish_reasons(s, *FINISH)),
            "trace_id": (pl.Utf8, lambda s: s.trace_id or None),
            "span_id": (pl.Utf8, lambda s: s.span_id or None),
            "status": (pl.Utf8, lambda s: s.status),
            "status_message": (pl.Utf8, lambda s: s.status_message),
        },
    )
    extras = [unmapped(span, _KNOWN) for span in spans]
    extra_columns, extra_names = extra_attributes(extras, "otlp")
    frame = with_ns(
        frame.with_columns(*extra_columns.values()),
        {column: " or ".join(names) for column, names in _DURATIONS.items()},
        NS_PER_S,
        lambda index: spans[index].where,
    )
    requests = _requests(frame)
    _report(requests, notes)
    attributes = [
        "finish_reason",
        "last_token_ns",
        "vllm_prefill_ns",
        "vllm_decode_ns",
        "vllm_inference_ns",
        "trace_id",
        "span_id",
        *extra_names,
    ]
    return engine_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=len(spans),
        ticks_available=False,
        arrival_known=True,
        attributes=attributes,
    )


def _first_text(span: Span, names: tuple[str, ...]) -> str | None:
    for name in names:
        value = span.attributes.get(name)
        if value is not None and str(value):
            return str(value)
    return None


def _requests(frame: pl.DataFrame) -> pl.DataFrame:
    reason = pl.col("finish_reason").str.to_lowercase()
    cancelled = reason.str.contains("|".join(_CANCELLED)).fill_null(False)
    # A failed request: finish reason "error", or the span's status ERROR (OTLP's own
    # failure mark, whatever the finish reason says).
    status_error = (pl.col("status") == "error").fill_null(False)
    errored = reason.str.contains("|".join(_ERRORS)).fill_null(False) | status_error
    arrival = pl.col("arrival_ns")
    terminal_ns = pl.coalesce(arrival + pl.col("e2e_ns"), pl.col("end_ns"))
    first_ns = arrival + pl.col("ttft_ns")
    return (
        frame.with_columns(
            terminal_ns=terminal_ns,
            first_ns=pl.when(first_ns <= terminal_ns).then(first_ns),
            # An admission after the first token can only be clock skew between vLLM's
            # wall-clock arrival and its monotonic scheduler times: clamp, count it.
        )
        .with_columns(
            admission_late=(arrival + pl.col("queue_ns") > pl.col("first_ns")).fill_null(False),
        )
        .with_columns(
            **{
                ADMISSION: pl.when(pl.col("admission_late"))
                .then(pl.col("first_ns"))
                .otherwise(arrival + pl.col("queue_ns"))
            },
            ticks_ns=pl.when(pl.col("first_ns").is_not_null())
            .then(pl.concat_list(pl.col("first_ns")))
            .otherwise(pl.lit([], dtype=pl.List(pl.Int64))),
            last_token_ns=pl.min_horizontal(pl.col("first_ns") + pl.col("decode_ns"), terminal_ns),
            terminal=pl.when(errored)
            .then(pl.lit("error"))
            .when(cancelled)
            .then(pl.lit("cancellation"))
            .otherwise(pl.lit("completion")),
            output_tokens=pl.col("reported_output"),
            error=pl.when(errored).then(
                pl.when(status_error)
                .then(pl.col("status_message").fill_null("span status ERROR"))
                .otherwise(pl.format("finish reason {}", pl.col("finish_reason")))
            ),
            vllm_prefill_ns=pl.col("prefill_ns"),
            vllm_decode_ns=pl.col("decode_ns"),
            vllm_inference_ns=pl.col("inference_ns"),
        )
    )


def _report(requests: pl.DataFrame, notes: Notes) -> None:
    notes.add(
        "vLLM's llm_request span holds one value per request, no per-token times: this is a "
        "request-level trace. Queue wait, prefill, TTFT, decode, TPOT (decode / "
        "(output_tokens - 1)) and e2e are exact to the ns the span's float seconds carry; "
        "the ITL distribution is unavailable (not zero)"
    )
    if requests["finish_reason"].is_null().all():
        notes.add(
            "these spans carry no gen_ai.response.finish_reasons (vLLM <= 0.33 writes a span "
            "for finished requests only): aborted requests are not in this trace"
        )
    no_first = requests.filter(pl.col("first_ns").is_null() & (pl.col("terminal") == "completion"))
    if no_first.height:
        notes.add(
            f"{count_phrase(no_first.height, 'span')} {agree(no_first.height)} "
            "no time_to_first_token (or one "
            "after e2e): they have no first token and are reported as such"
        )
    late = int(requests["admission_late"].sum())
    if late:
        notes.add(
            f"{count_phrase(late, 'span')} {agree(late)} "
            "time_in_queue > time_to_first_token (vLLM's "
            "wall-clock arrival and monotonic scheduler clocks disagree): their admission is "
            "placed at the first token (prefill 0)"
        )
    if requests["queue_s"].is_null().all():
        notes.add(
            "these spans have no time_in_queue: admission, queue wait and prefill are unavailable"
        )
    else:
        gap = requests.select(
            (pl.col("first_ns") - pl.col(ADMISSION) - pl.col("vllm_prefill_ns")).mean()
        ).item()
        if gap is not None:
            notes.add(
                "prefill = TTFT - time_in_queue: it includes the time before the engine queued "
                "the request (API server, tokenisation); vLLM's own time_in_model_prefill is "
                f"kept as vllm_prefill_ns (on average {gap / 1e6:.3f} ms shorter)"
            )
    if requests["decode_s"].is_null().all():
        notes.add(
            "these spans have no time_in_model_decode: the last token is placed at completion, "
            "so delivery_tail is 0 by construction, not measured"
        )
