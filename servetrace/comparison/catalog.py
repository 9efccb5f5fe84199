"""The metrics that ``compare`` and ``check`` speak about: one registry, whose values
one function gives (``servetrace.comparison.values.metric_value``).

A key is ``metric.stat``:

- latency metrics (``queue_wait``, ``prefill``, ``ttft``, ``decode``, ``response``,
  ``e2e``, ``delivery_tail``, ``tpot``: one value per completed request; ``itl``: every
  gap between output ticks of completed requests) take any statistic of a distribution:
  ``count``, ``mean``, ``std``, ``min``, ``max``, ``p50``, ``p99_9`` or any ``pNN``;
- ``throughput.requests_per_s`` / ``output_tokens_per_s`` / ``total_tokens_per_s`` over
  the trace window (from the analysis summary);
- ``goodput.requests_per_s`` / ``fraction`` / ``count``: completed requests that met every
  per-request goodput target (``ttft<=200ms``…); the fraction is over completed requests,
  as ``servetrace analyze`` reports it (cancelled requests are ``cancelled.fraction``);
- ``cancelled.count`` / ``fraction``: cancelled requests, fraction of every valid request;
- ``errored.count`` / ``fraction``: errored requests (failed: HTTP 429, engine errors; a
  terminal ``error``), fraction of every valid request;
- ``fluidity``: Etalon's fluidity-index of each completed request (1 − missed/total
  per-token deadlines, ``servetrace.analysis.fluidity``; needs ``--fluidity`` targets),
  any statistic of its distribution (``fluidity.p50>=0.9``; higher is better);
- ``stalls.<cause>_share`` / ``tail_<cause>_share`` / ``tail_prefill_fraction``: where the
  ITL excess goes (``analyze --steps``, ``servetrace.analysis.stalls``), causes
  ``prefill``, ``paused_for_prefill``, ``skipped``, ``between_steps``, ``large_batch``,
  ``other``;
- ``preemptions.count`` (preemption events), ``fraction`` (of requests preempted at
  least once), ``mean`` (preemptions per request), over every valid request.

Values are returned in internal units: ns for times, plain numbers for counts, fractions
and rates. ``MetricSpec.unit`` names that unit; ``servetrace.render.format`` converts for
people.
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from servetrace.analysis.metric_names import LATENCY_METRICS
from servetrace.analysis.server_histograms import HISTOGRAM_CHECKS
from servetrace.analysis.stall_causes import CAUSES
from servetrace.errors import UsageError
from servetrace.stats.names import STATISTICS, canonical_stat, is_statistic

Better = Literal["lower", "higher"]
Source = Literal["requests", "gaps", "summary"]
Kind = Literal["latency", "rate", "outcome", "index", "consistency"]

# Outcomes as servetrace.analysis.lifecycle names them.
COMPLETED = "completed"
CANCELLED = "cancelled"
ERRORED = "errored"


@dataclass(frozen=True)
class MetricSpec:
    """A metric as compare and check see it.

    ``unit`` is the unit of its values: ``ns`` for the statistics of a latency (count
    statistics are unitless), ``req/s``/``tok/s`` for rates, ``""`` for counts and fractions;
    ``source`` says where the samples live and ``column`` which column (for summary
    metrics: which key family). ``stats`` lists the statistics of non-latency metrics;
    latency metrics accept any statistic of a distribution.
    """

    name: str
    unit: str
    better: Better
    source: Source
    column: str
    kind: Kind = "latency"
    stats: tuple[str, ...] = ()
    description: str = ""
    stat_units: Mapping[str, str] = field(default_factory=dict)

    def unit_of(self, stat: str) -> str:
        """Unit of the values of ``self.stat``: ``ns`` for latency stats, ``""`` for counts."""
        if self.kind == "latency":
            return "" if canonical_stat(stat) == "count" else self.unit
        return self.stat_units.get(stat, self.unit)

    @property
    def is_distribution(self) -> bool:
        """One value per completed request (or gap): any statistic of a distribution."""
        return self.kind in ("latency", "index")

    def accepts(self, stat: str) -> bool:
        stat = canonical_stat(stat)
        if self.is_distribution:
            return is_statistic(stat)
        return stat in self.stats

    def speaks_of_speed(self, stat: str) -> bool:
        """Whether a change of ``self.stat`` is a speed (slower/faster) rather than a
        count or fraction getting worse or better."""
        return self.kind != "outcome" and canonical_stat(stat) not in ("fraction", "count")


def _latency(name: str, source: Source, column: str, description: str) -> MetricSpec:
    return MetricSpec(name, "ns", "lower", source, column, "latency", (), description)


# stalls.<cause>_share and stalls.tail_<cause>_share, and the fraction of tail gaps whose
# covering steps carry prefill work.
STALL_STATS = (
    *(f"{cause}_share" for cause in CAUSES),
    *(f"tail_{cause}_share" for cause in CAUSES),
    "tail_prefill_fraction",
)


def is_fraction_stat(stat: str) -> bool:
    """A statistic that is a fraction (written as a number or with %)."""
    return stat == "fraction" or stat.endswith(("_share", "_fraction"))


CONSISTENCY_FINDINGS = {
    "clock_offset": "the server clock's offset from the trace's",
    "waiting_gauge": "vllm:num_requests_waiting against the trace's queued count per scrape",
    "running_gauge": "vllm:num_requests_running against the trace's running count per scrape",
    "success_counter": "request_success_total deltas against completions per interval",
    "preemption_counter": "num_preemptions_total deltas against preemption events",
    "prompt_tokens_counter": "prompt_tokens_total deltas against prompts at first token",
    "generation_tokens_counter": "generation_tokens_total deltas against output tokens",
    **{check.name: check.description for check in HISTOGRAM_CHECKS},
}

METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        # Latency metrics: one definition each, in servetrace.analysis.metrics (DESIGN §4).
        *(
            _latency(m.name, "gaps" if m.per == "gap" else "requests", m.column, m.definition)
            for m in LATENCY_METRICS
        ),
        MetricSpec(
            "throughput",
            "req/s",
            "higher",
            "summary",
            "throughput",
            "rate",
            ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s"),
            "over the trace window (first arrival to last terminal event)",
            {
                "requests_per_s": "req/s",
                "output_tokens_per_s": "tok/s",
                "total_tokens_per_s": "tok/s",
            },
        ),
        MetricSpec(
            "goodput",
            "req/s",
            "higher",
            "summary",
            "goodput",
            "rate",
            ("requests_per_s", "fraction", "count"),
            "completed requests meeting every goodput target",
            {"requests_per_s": "req/s", "fraction": "", "count": ""},
        ),
        MetricSpec(
            "fluidity",
            "",
            "higher",
            "requests",
            "fluidity_index",
            "index",
            (),
            "Etalon's fluidity-index per completed request (needs --fluidity targets)",
        ),
        MetricSpec(
            "cancelled",
            "",
            "lower",
            "requests",
            "outcome",
            "outcome",
            ("count", "fraction"),
            "cancelled requests (fraction of all valid requests)",
        ),
        MetricSpec(
            "errored",
            "",
            "lower",
            "requests",
            "outcome",
            "outcome",
            ("count", "fraction"),
            "errored requests: failed, not cancelled (fraction of all valid requests)",
        ),
        MetricSpec(
            "stalls",
            "",
            "lower",
            "summary",
            "stalls",
            "outcome",
            STALL_STATS,
            "share of the ITL excess by cause, overall and in the tail (needs --steps)",
        ),
        MetricSpec(
            "preemptions",
            "",
            "lower",
            "requests",
            "preemptions",
            "outcome",
            ("count", "fraction", "mean"),
            "preemption events; fraction of requests preempted at least once",
        ),
        # Server metrics against the trace (analysis.server_metrics; needs --server-metrics):
        # the size of each finding's disagreement.
        *(
            MetricSpec(
                f"consistency.{name}",
                "ns" if name == "clock_offset" else "",
                "lower",
                "summary",
                name,
                "consistency",
                ("max_abs", "mean_abs"),
                f"server metrics vs the trace: {text} (needs --server-metrics)",
                {"max_abs": "ns", "mean_abs": "ns"} if name == "clock_offset" else {},
            )
            for name, text in CONSISTENCY_FINDINGS.items()
        ),
    )
}
METRIC_ALIASES: dict[str, str] = {
    "cancellations": "cancelled",
    "cancellation": "cancelled",
    "canceled": "cancelled",
    "errors": "errored",
    "error": "errored",
    "failed": "errored",
    "preemption": "preemptions",
    "preempted": "preemptions",
    "e2el": "e2e",
}
# The metrics `compare` reports by default (the list).
DEFAULT_COMPARE_METRICS: tuple[str, ...] = (
    "queue_wait",
    "prefill",
    "ttft",
    "itl",
    "tpot",
    "e2e",
    "response",
    "throughput",
    "goodput",
    "cancelled",
    "errored",
    "preemptions",
)
# The statistics `compare` reports for each latency metric by default.
DEFAULT_COMPARE_STATS: tuple[str, ...] = ("mean", "p50", "p90", "p99")
# Metrics only `check` gates: figures of one run's side data (its engine steps, its
# server's metrics), with no per-request samples for compare's paired statistics.
CHECK_ONLY: tuple[str, ...] = tuple(
    name for name, spec in METRICS.items() if name == "stalls" or spec.kind == "consistency"
)
COMPARED_METRICS: tuple[str, ...] = tuple(m for m in METRICS if m not in CHECK_ONLY)
# Per-request metrics a goodput target can name (``servetrace.analysis.summary.GoodputTarget``
# reads the column ``<metric>_ns``; vLLM spells e2e "e2el").
GOODPUT_METRICS: tuple[str, ...] = (
    "queue_wait",
    "prefill",
    "ttft",
    "decode",
    "response",
    "e2e",
    "delivery_tail",
    "tpot",
)

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}


class MetricUnavailable(UsageError):
    """The trace has no data for this metric (e.g. no prompt lengths, no goodput targets);
    ``why``, where the data says it in words of its own (a server-metrics finding's reason)."""

    def __init__(self, message: str, hint: str | None = None, why: str | None = None) -> None:
        super().__init__(message, hint)
        self.why = why


def canonical_metric(name: str) -> str:
    name = name.strip().lower()
    return METRIC_ALIASES.get(name, name)


def suggest(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'ttft'?)"`` or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def get_metric(name: str) -> MetricSpec:
    """The spec of a metric; UsageError naming the known ones otherwise."""
    spec = METRICS.get(canonical_metric(name))
    if spec is None:
        raise UsageError(
            f"unknown metric {name!r}{suggest(name, METRICS)}",
            hint="metrics: " + ", ".join(METRICS),
        )
    return spec


def stats_help(spec: MetricSpec) -> str:
    if spec.is_distribution:
        return "count, mean, std, min, max, p50, p90, p95, p99, p99_9 or any pNN"
    return ", ".join(spec.stats)


def check_stat(spec: MetricSpec, stat: str) -> str:
    """The canonical statistic name, or UsageError listing what ``spec`` accepts."""
    canonical = canonical_stat(stat)
    if not spec.accepts(canonical):
        choices = spec.stats or STATISTICS
        raise UsageError(
            f"{spec.name} has no statistic {stat!r}{suggest(canonical, choices)}",
            hint=f"{spec.name} statistics: {stats_help(spec)}",
        )
    return canonical
