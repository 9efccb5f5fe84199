"""The ``servetrace`` command line: a thin Typer layer over the core.

Each command lives in its own module of this package and registers itself on ``app``
when first asked for (``_lazy.LazyGroup``: ``--help`` imports none of them), with the
``guarded`` decorator, which turns exceptions into ``error:``/``hint:`` lines and
exit codes (DESIGN §7), so no command prints a traceback for a user mistake.
"""

from __future__ import annotations

import os
import sys

# Before Polars loads: let its allocator return freed pages after 100 ms instead of ~10 s.
# The analysis frees large intermediates (sorted ticks) as it goes; measured at 1e7
# events this cuts peak memory from 1.78 to 1.40 GB for 0.1 s (benchmarks/README.md).
os.environ.setdefault(
    "_RJEM_MALLOC_CONF", "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"
)

from servetrace.cli._app import app
from servetrace.cli._lazy import declare

# name → (module that registers it, the first paragraph of its docstring). ``--help`` lists
# these without importing any command module; tests/cli/test_lazy.py checks they match.
declare(
    {
        "analyze": (
            "servetrace.cli.analyze",
            "Summarise a trace: queue wait, prefill, decode, TTFT, ITL, throughput, formula check.",
        ),
        "validate": (
            "servetrace.cli.analyze",
            "Check schema and lifecycle rules only; exit 1 if any request is invalid.",
        ),
        "capacity": (
            "servetrace.cli.capacity",
            "Capacity from a sweep: the highest offered rate whose SLO attainment meets the bar.",
        ),
        "check": (
            "servetrace.cli.check",
            "Check SLO rules and regression budgets; exit 0 all pass, 1 any failed.",
        ),
        "compare": (
            "servetrace.cli.compare",
            "Compare candidates with a baseline: ratio, CI, significance and a verdict per metric.",
        ),
        "import": (
            "servetrace.cli.imports",
            "Convert an AIPerf, GenAI-Perf, vLLM bench, GuideLLM, LLMPerf, OTLP spans, "
            "SGLang, TensorRT-LLM or MLCommons endpoints export.",
        ),
        "merge": (
            "servetrace.cli.merge",
            "Merge partial results of request-split shards into the report of the whole trace.",
        ),
        "report": (
            "servetrace.cli.report",
            "Write an offline HTML report: summary, CDFs, load over time, slowest requests, "
            "formula residuals; with two or more traces, the comparison of each with the "
            "first.",
        ),
        "simulate": (
            "servetrace.cli.simulate",
            "Simulate a continuous-batching engine and write its event log (seeded, exact).",
        ),
        "timeline": (
            "servetrace.cli.timeline",
            "Write one slice per request (queued, prefill, decode, requeued) packed into lanes.",
        ),
    }
)


__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        # `servetrace analyze … | head`: the reader left early; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
