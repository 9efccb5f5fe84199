"""The choices and defaults a user sets from the command line, with no heavy imports.

The CLI builds its options (types, defaults, help) from these at start-up, before any
command runs, so this module must not import Polars, NumPy or the engine: ``servetrace
--help`` reads it. The library modules that use each value import it from here.
"""

from __future__ import annotations

from enum import Enum

from servetrace.units import NS_PER_MS


class Engine(str, Enum):
    """Where a canonical trace is analysed: this machine, or a Ray cluster."""

    local = "local"
    ray = "ray"


class PercentileGate(str, Enum):
    """How ``check`` decides an SLO on a latency percentile."""

    interval = "interval"
    point = "point"


# Rows per batch of the streaming engine. 10^6, not 2·10^6: the peak memory falls (at 10^9
# events 2.54 → 2.34 GB) for the same CPU; a batch's buffers are what the allocator still
# holds when the summary runs (docs/scale.md).
DEFAULT_BATCH_ROWS = 1_000_000
# Bootstrap resamples of a comparison or a regression budget.
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
# Two runs' arrivals within this of each other are the same request of the same workload.
DEFAULT_ARRIVAL_TOLERANCE_NS = 10 * NS_PER_MS

# The other tools' exports ``--from`` and ``servetrace import`` read, in the order the help
# lists them; ``sources.registry.FORMATS`` maps each to its importer.
IMPORT_FORMATS = (
    "aiperf",
    "genai-perf",
    "vllm-bench",
    "guidellm",
    "llmperf",
    "blis",
    "otlp",
    "sglang",
    "trtllm",
    "mlcommons",
    "requests",
)
