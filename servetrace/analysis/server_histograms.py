"""Which server latency histogram is checked against which of the trace's own values
(design §12): one row per finding, read by the check (``server_buckets``), the views
(``server_series``), the simulator's series (``sim/metrics``) and ``check``'s catalogue.

Names and definitions pinned from vllm-project/vllm: the families and their buckets from
``vllm/v1/metrics/loggers.py`` at a6f0308cfe806b7731ad4979c9bea6e470c35efd (where the
per-step histogram is still ``vllm:time_per_output_token_seconds``); its V1 name
``vllm:inter_token_latency_seconds`` from ``docs/design/metrics.md`` at
f7e3a0879e633f9924d477b85a3775cb1ae2a2e5 (0.11 renamed it, observing the same value
under both names while the old one lasts); what each observes from
``vllm/v1/metrics/stats.py`` at 28ed1fb87ed5686e1d4d0cf4134b8e05d8a25a8a:

- TTFT at the first token, from the frontend's ``arrival_time``;
- ITL at every later engine output of a request, ``engine_core_timestamp −
  last_token_ts``: one observation per engine step, whatever tokens it carries;
- e2e (frontend arrival → the iteration that finishes it), queue (engine ``QUEUED`` →
  first ``SCHEDULED``), prefill (first ``SCHEDULED`` → first token) and decode (first →
  last token) once per *finished* request, when it finishes.

SGLang's and TensorRT-LLM's rows (``ENGINE_CHECKS``; the same findings, observed by each
engine's own rule, cited in ``server_engines``): SGLang observes TTFT at the first token,
e2e at completion, its queue time when the request first enters a prefill batch (at
admission) and ITL per output batch, the bucket of ``interval ÷ new_tokens`` gaining
``new_tokens`` (it counts tokens); it has no prefill or decode histogram. TensorRT-LLM
observes all five of its per-request histograms at completion and has no inter-token one
(``trtllm_time_per_output_token_seconds`` is each request's mean TPOT).

Light on purpose (no NumPy or Polars): the rule catalogue imports it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

REQUEST_LATENCY_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
SGLANG_TTFT_BUCKETS_S: tuple[float, ...] = tuple(map(float, (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
)))  # fmt: skip
SGLANG_E2E_BUCKETS_S = (*SGLANG_TTFT_BUCKETS_S, 600.0, 1200.0, 1800.0, 2400.0)
SGLANG_ITL_BUCKETS_S: tuple[float, ...] = tuple(map(float, (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
    0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)))  # fmt: skip
SGLANG_QUEUE_BUCKETS_S: tuple[float, ...] = tuple(map(float, (
    0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
    200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
)))  # fmt: skip
TRTLLM_PREFILL_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0,
    40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip


@dataclass(frozen=True)
class HistogramCheck:
    name: str  # the finding (consistency.NAME)
    families: tuple[str, ...]  # the first one the server exposes is checked
    metric: str  # the trace's metric (design §4), a ``<metric>_ns`` column or ITL gaps
    observed_at: str  # first_token | completion | admission | tick: when the server counts
    per: str  # request | gap | token (a tick's gap ÷ its tokens, once per token)
    counts: str  # what the server counts, in the likely cause's words
    buckets_s: tuple[float, ...]  # the engine's bounds (the simulator writes them)
    help: str  # the family's HELP text in the engine
    definition: str  # how the server's value differs from the trace's, where it does
    description: str  # one line for the rule catalogue
    engine: str = "vllm"  # whose family (``server_engines.ENGINES``)
    absent: str | None = None  # why the engine has no such histogram (no family then)


HISTOGRAM_CHECKS: tuple[HistogramCheck, ...] = (
    HistogramCheck(
        "ttft_histogram",
        ("vllm:time_to_first_token_seconds",),
        "ttft",
        "first_token",
        "request",
        "first tokens",
        TTFT_BUCKETS_S,
        "Histogram of time to first token in seconds.",
        "the server measures TTFT from its own arrival, not the trace's",
        "TTFT bucket deltas against the trace's TTFTs rebinned, per bucket",
    ),
    HistogramCheck(
        "e2e_histogram",
        ("vllm:e2e_request_latency_seconds",),
        "e2e",
        "completion",
        "request",
        "finished requests",
        REQUEST_LATENCY_BUCKETS_S,
        "Histogram of e2e request latency in seconds.",
        "the server measures from its own arrival to the iteration that finishes the "
        "request, the trace from its arrival to its completion event",
        "e2e bucket deltas against the trace's e2e of completions rebinned, per bucket",
    ),
    HistogramCheck(
        "queue_histogram",
        ("vllm:request_queue_time_seconds",),
        "queue_wait",
        "completion",
        "request",
        "finished requests",
        REQUEST_LATENCY_BUCKETS_S,
        "Histogram of time spent in WAITING phase for request.",
        "the server measures its queue on the engine, from queued to first scheduled "
        "(a wait before the engine is not in it)",
        "queue-time bucket deltas against the trace's queue waits of completions",
    ),
    HistogramCheck(
        "prefill_histogram",
        ("vllm:request_prefill_time_seconds",),
        "prefill",
        "completion",
        "request",
        "finished requests",
        REQUEST_LATENCY_BUCKETS_S,
        "Histogram of time spent in PREFILL phase for request.",
        "the server measures prefill on the engine, from first scheduled to first token",
        "prefill-time bucket deltas against the trace's prefills of completions",
    ),
    HistogramCheck(
        "decode_histogram",
        ("vllm:request_decode_time_seconds",),
        "decode",
        "completion",
        "request",
        "finished requests",
        REQUEST_LATENCY_BUCKETS_S,
        "Histogram of time spent in DECODE phase for request.",
        "the server measures decode on the engine, first to last token as generated, "
        "not as delivered",
        "decode-time bucket deltas against the trace's decodes of completions",
    ),
    HistogramCheck(
        "itl_histogram",
        ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "itl",
        "tick",
        "gap",
        "output steps",
        ITL_BUCKETS_S,
        "Histogram of inter-token latency in seconds.",
        "the server counts one gap per engine output step (several tokens with "
        "speculative decoding), the trace one per output event: they agree when each "
        "event is one step, not when a client's chunks merge or split steps",
        "ITL bucket deltas against the trace's gaps between output events, per bucket",
    ),
)
BY_NAME = {c.name: c for c in HISTOGRAM_CHECKS}


def _absent(name: str, engine: str, why: str) -> HistogramCheck:
    vllm = BY_NAME[name]
    return HistogramCheck(
        name, (), vllm.metric, vllm.observed_at, vllm.per, vllm.counts, (), "", "",
        vllm.description, engine, why,
    )  # fmt: skip


_SGL_ITL = (
    "the server counts each output batch's interval ÷ its new tokens once per token, the "
    "trace each gap between output events ÷ its tokens: they agree when each event is one "
    "batch, not when a client's chunks merge or split batches"
)
SGLANG_CHECKS: tuple[HistogramCheck, ...] = (
    HistogramCheck(
        "ttft_histogram", ("sglang:time_to_first_token_seconds",), "ttft", "first_token",
        "request", "first tokens", SGLANG_TTFT_BUCKETS_S,
        "Histogram of time to first token in seconds.",
        "the server measures TTFT from the tokenizer manager's creation of the request, "
        "not the trace's arrival", BY_NAME["ttft_histogram"].description, "sglang",
    ),
    HistogramCheck(
        "e2e_histogram", ("sglang:e2e_request_latency_seconds",), "e2e", "completion",
        "request", "finished requests", SGLANG_E2E_BUCKETS_S,
        "Histogram of End-to-end request latency in seconds",
        "the server measures from the tokenizer manager's creation of the request to its "
        "last output, the trace from its arrival to its completion event",
        BY_NAME["e2e_histogram"].description, "sglang",
    ),
    HistogramCheck(
        "queue_histogram", ("sglang:queue_time_seconds",), "queue_wait", "admission",
        "request", "admitted requests", SGLANG_QUEUE_BUCKETS_S,
        "Histogram of queueing time in seconds.",
        "the server measures its scheduler's waiting queue up to the first prefill batch "
        "and observes it then (a wait before the scheduler is not in it)",
        BY_NAME["queue_histogram"].description, "sglang",
    ),
    _absent("prefill_histogram", "sglang", "SGLang exposes no prefill-time histogram"),
    _absent("decode_histogram", "sglang", "SGLang exposes no decode-time histogram"),
    HistogramCheck(
        "itl_histogram", ("sglang:inter_token_latency_seconds",), "itl", "tick", "token",
        "output tokens", SGLANG_ITL_BUCKETS_S, "Histogram of inter-token latency in seconds.",
        _SGL_ITL, BY_NAME["itl_histogram"].description, "sglang",
    ),
)  # fmt: skip
_AT_END = "; TensorRT-LLM observes it when the request completes"
TRTLLM_CHECKS: tuple[HistogramCheck, ...] = (
    HistogramCheck(
        "ttft_histogram", ("trtllm_time_to_first_token_seconds",), "ttft", "completion",
        "request", "finished requests", TTFT_BUCKETS_S,
        "Histogram of time to first token in seconds.",
        "the server measures TTFT from its own arrival, not the trace's" + _AT_END,
        BY_NAME["ttft_histogram"].description, "trtllm",
    ),
    HistogramCheck(
        "e2e_histogram", ("trtllm_e2e_request_latency_seconds",), "e2e", "completion",
        "request", "finished requests", REQUEST_LATENCY_BUCKETS_S,
        "Histogram of end to end request latency in seconds.",
        "the server measures from its own arrival to its last token, the trace from its "
        "arrival to its completion event", BY_NAME["e2e_histogram"].description, "trtllm",
    ),
    HistogramCheck(
        "queue_histogram", ("trtllm_request_queue_time_seconds",), "queue_wait", "completion",
        "request", "finished requests", REQUEST_LATENCY_BUCKETS_S,
        "Histogram of time spent in WAITING phase for request.",
        "the server measures its queue from its arrival to first scheduled (a wait before "
        "the executor is not in it)", BY_NAME["queue_histogram"].description, "trtllm",
    ),
    HistogramCheck(
        "prefill_histogram", ("trtllm_request_prefill_time_seconds",), "prefill",
        "completion", "request", "finished requests", TRTLLM_PREFILL_BUCKETS_S,
        "Histogram of prefill (context) phase duration in seconds "
        "(first_token_time - first_scheduled_time).",
        "the server measures prefill from first scheduled to first token",
        BY_NAME["prefill_histogram"].description, "trtllm",
    ),
    HistogramCheck(
        "decode_histogram", ("trtllm_request_decode_time_seconds",), "decode", "completion",
        "request", "finished requests", REQUEST_LATENCY_BUCKETS_S,
        "Histogram of decode (generation) phase duration in seconds "
        "(last_token_time - first_token_time).",
        "the server measures decode first to last token as generated, not as delivered",
        BY_NAME["decode_histogram"].description, "trtllm",
    ),
    _absent(
        "itl_histogram", "trtllm",
        "TensorRT-LLM exposes no inter-token histogram (trtllm_time_per_output_token_seconds "
        "is each request's mean TPOT, observed at completion)",
    ),
)  # fmt: skip
# Every engine's rows, in the findings' order (the same names for every engine).
ENGINE_CHECKS: dict[str, tuple[HistogramCheck, ...]] = {
    "vllm": HISTOGRAM_CHECKS,
    "sglang": SGLANG_CHECKS,
    "trtllm": TRTLLM_CHECKS,
}
