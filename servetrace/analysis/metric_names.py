"""The latency metrics a trace yields, by name and per-request column (DESIGN §4): plain
data, so that rules and help texts can name them without loading the analysis."""

from __future__ import annotations

from dataclasses import dataclass

# One metric's summary statistics (``stats.names.STATISTICS``), None where unknown.
Distribution = dict[str, float | int | None]
# The report's percentiles, as fractions.
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p99_9": 0.999}


@dataclass(frozen=True)
class MetricSpec:
    """One latency metric: its id, the per-request column, and what it measures."""

    name: str
    column: str
    definition: str
    per: str = "request"  # "request" (one value per request) or "gap" (pooled gaps)


LATENCY_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("queue_wait", "queue_wait_ns", "first admission - arrival"),
    MetricSpec("prefill", "prefill_ns", "first token - first admission"),
    MetricSpec("ttft", "ttft_ns", "first token - arrival (includes queueing)"),
    MetricSpec("decode", "decode_ns", "last token - first token"),
    MetricSpec("response", "response_ns", "last token - arrival"),
    MetricSpec("e2e", "e2e_ns", "terminal event - arrival"),
    MetricSpec("delivery_tail", "delivery_tail_ns", "completion - last token"),
    MetricSpec("itl", "itl_ns", "gap between consecutive output ticks (all gaps pooled)", "gap"),
    MetricSpec("itl_max", "itl_max_ns", "longest gap between ticks of one request"),
    MetricSpec("tpot", "tpot_ns", "decode / (output_tokens - 1), output_tokens >= 2"),
    MetricSpec("requeued", "requeued_ns", "time queued again after preemptions"),
)
