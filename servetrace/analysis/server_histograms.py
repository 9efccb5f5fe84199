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


@dataclass(frozen=True)
class HistogramCheck:
    name: str  # the finding (consistency.NAME)
    families: tuple[str, ...]  # the first one the server exposes is checked
    metric: str  # the trace's metric (design §4), a ``<metric>_ns`` column or ITL gaps
    observed_at: str  # first_token | completion | tick: when the server counts a value
    per: str  # request | gap: what one observation is
    counts: str  # what the server counts, in the likely cause's words
    buckets_s: tuple[float, ...]  # vLLM's bounds (the simulator writes them)
    help: str  # the family's HELP text in vLLM
    definition: str  # how the server's value differs from the trace's, where it does
    description: str  # one line for the rule catalogue


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
