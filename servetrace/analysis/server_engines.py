"""Which engine's Prometheus families the server-metrics checks read (design §12): one row
per engine of gauges, counters and latency histograms, each with when the engine observes
it, so the one check (``server_metrics``, ``server_buckets``) reads vLLM's, SGLang's and
TensorRT-LLM's series alike; the findings keep their names whatever the engine. The engine
is told by the family names present (``detect``).

vLLM: pinned in ``server_histograms`` and ``server_clock``.

SGLang, from sgl-project/sglang ``python/sglang/srt/observability/metrics_collector.py``
and ``scheduler_metrics_mixin.py`` at 44cedc2b9c7dd31d9acae4498ea4fa0d3665feed and
``python/sglang/srt/managers/tokenizer_manager.py`` at
001067fffe33427bee0ed2f007fb7551a1d76b44: the gauges ``sglang:num_queue_reqs`` and
``sglang:num_running_reqs`` (one series per ``dp_rank``, summed) are set only at a prefill
batch and every ~40th decode step, so between those they are stale;
``sglang:token_usage`` is the KV cache's fill; ``sglang:prompt_tokens_total`` and
``sglang:generation_tokens_total`` gain a request's tokens when it finishes;
``sglang:num_requests_total`` counts finished requests (no ``finished_reason`` label).
Why the trace side counts completions only: a client that disconnects makes the
tokenizer manager drop the request's state (``_discard_pending_req_states``) before any
finished output arrives, so such a request reaches none of the per-request metrics
(``observe_one_finished_request``); only a running request aborted while its client
stays connected (``/abort_request``) is counted, as a finish;
``sglang:num_retracted_requests_total`` counts retractions, its preemptions.

TensorRT-LLM, from NVIDIA/TensorRT-LLM ``tensorrt_llm/metrics/collector.py`` at
050f80def8df236e326949c8bd9dee10fd896a83, ``tensorrt_llm/metrics/perf_utils.py`` at
11ef94feee457e1b2f6f5ecc9172475d918aec20 and ``tensorrt_llm/serve/openai_server.py`` at
00057725d9a6591f033e44f31c219e2426827bb7 (served at ``/prometheus/metrics``): the gauges
``trtllm_num_requests_waiting`` / ``…_running`` (a ``pid`` label) are refreshed only when a
request completes; ``trtllm_kv_cache_utilization`` is the cache's fill;
``trtllm_request_success_total`` (``finished_reason`` ∈ stop, length, timeout, cancelled),
``trtllm_prompt_tokens_total`` and ``trtllm_generation_tokens_total`` count at completion;
no preemption counter. A streamed request the client cancels is in none of them
(``_extract_metrics`` runs after the stream's last chunk, which never comes); a
non-streamed one is counted as ``finished_reason="cancelled"``, which is no success.

Light on purpose (no NumPy or Polars), like ``server_histograms``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from servetrace.analysis.server_histograms import ENGINE_CHECKS, HistogramCheck


@dataclass(frozen=True)
class CounterRow:
    family: str | None  # None: the engine has no such counter (``absent`` says why)
    observed_at: str  # first_token | completion | tick | preemption: when it counts
    not_success: tuple[str, ...] = ()  # finished_reason values that are no success
    absent: str | None = None


@dataclass(frozen=True)
class Engine:
    name: str  # vllm | sglang | trtllm
    title: str  # as said in the views
    prefix: str  # every family of the engine starts with it
    gauges: dict[str, tuple[str, str, str]]  # family → trace level, finding, what counted
    counters: dict[str, CounterRow]  # finding → its counter
    histograms: tuple[HistogramCheck, ...]  # ``server_histograms.ENGINE_CHECKS``'s rows
    kv_usage: tuple[str, ...]  # the KV cache's fill (no trace side)
    stale: str | None = None  # when the queue gauges are refreshed, if not at every step

    @property
    def waiting(self) -> str:
        return next(iter(self.gauges))

    @property
    def running(self) -> str:
        return list(self.gauges)[1]


def _gauges(waiting: str, running: str) -> dict[str, tuple[str, str, str]]:
    return {
        waiting: ("queued", "waiting_gauge", "queued requests"),
        running: ("running", "running_gauge", "running requests"),
    }


VLLM = Engine(
    "vllm",
    "vLLM",
    "vllm:",
    _gauges("vllm:num_requests_waiting", "vllm:num_requests_running"),
    {
        "success_counter": CounterRow("vllm:request_success_total", "completion", ("abort",)),
        "preemption_counter": CounterRow("vllm:num_preemptions_total", "preemption"),
        "prompt_tokens_counter": CounterRow("vllm:prompt_tokens_total", "first_token"),
        "generation_tokens_counter": CounterRow("vllm:generation_tokens_total", "tick"),
    },
    ENGINE_CHECKS["vllm"],
    ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
)
SGLANG = Engine(
    "sglang",
    "SGLang",
    "sglang:",
    _gauges("sglang:num_queue_reqs", "sglang:num_running_reqs"),
    {
        "success_counter": CounterRow("sglang:num_requests_total", "completion"),
        "preemption_counter": CounterRow("sglang:num_retracted_requests_total", "preemption"),
        "prompt_tokens_counter": CounterRow("sglang:prompt_tokens_total", "completion"),
        "generation_tokens_counter": CounterRow("sglang:generation_tokens_total", "completion"),
    },
    ENGINE_CHECKS["sglang"],
    ("sglang:token_usage",),
    "SGLang sets it only at a prefill batch and every ~40th decode step",
)
TRTLLM = Engine(
    "trtllm",
    "TensorRT-LLM",
    "trtllm_",
    _gauges("trtllm_num_requests_waiting", "trtllm_num_requests_running"),
    {
        "success_counter": CounterRow(
            "trtllm_request_success_total", "completion", ("timeout", "cancelled")
        ),
        "preemption_counter": CounterRow(
            None, "preemption", absent="TensorRT-LLM exposes no preemption counter"
        ),
        "prompt_tokens_counter": CounterRow("trtllm_prompt_tokens_total", "completion"),
        "generation_tokens_counter": CounterRow("trtllm_generation_tokens_total", "completion"),
    },
    ENGINE_CHECKS["trtllm"],
    ("trtllm_kv_cache_utilization",),
    "TensorRT-LLM refreshes it only when a request completes",
)
ENGINES: dict[str, Engine] = {e.name: e for e in (VLLM, SGLANG, TRTLLM)}


class EngineName(str, Enum):
    """An engine whose families the simulator writes (``simulate --metrics-engine``)."""

    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"


def detect(families: Iterable[str]) -> Engine:
    """The engine most of ``families`` belong to by prefix (vLLM when none does: its
    names are then said missing, finding by finding)."""
    names = list(families)
    counts = {e.name: sum(f.startswith(e.prefix) for f in names) for e in ENGINES.values()}
    best = max(counts, key=lambda k: counts[k])
    return ENGINES[best] if counts[best] else VLLM


def owner(family: str) -> Engine:
    """The engine whose prefix ``family`` has (vLLM when none)."""
    return next((e for e in ENGINES.values() if family.startswith(e.prefix)), VLLM)


def every(attribute: str) -> list[str]:
    """Each engine's families of ``gauges`` or ``kv_usage``, vLLM's first: the views' order."""
    return [f for e in ENGINES.values() for f in getattr(e, attribute)]
