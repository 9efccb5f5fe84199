"""The library API: what the ``servetrace`` commands do, from Python.

The CLI calls exactly these functions, so a Python user gets the CLI's numbers for every
input the CLI accepts — canonical traces in any file form, other tools' exports, run and
sweep folders, partial results — detected as the CLI detects them.

>>> import servetrace
>>> analysis = servetrace.analyze("sample_traces/realistic.parquet")   # doctest: +SKIP
>>> analysis.summary.metrics["ttft"]["p99"]                            # ns  # doctest: +SKIP

Numbers are integer ns (or plain ratios); ``servetrace.to_dict`` (``render.to_dict``)
gives the JSON report of any result, in its units. Each name is imported from its module
on first use, so that ``analyze`` does not pay for ``compare``'s and ``check``'s SciPy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_HOME = {
    "Analysis": "servetrace.analysis.result",
    "Run": "servetrace.runs.model",
    "Runs": "servetrace.runs.model",
    "analyze": "servetrace.api._analyze",
    "analyze_runs": "servetrace.api._analyze",
    "analyze_shard": "servetrace.api._analyze",
    "read_events": "servetrace.api._analyze",
    "CheckResult": "servetrace.rules.result",
    "check": "servetrace.api._check",
    "check_config": "servetrace.api._check",
    "Comparison": "servetrace.comparison.compare",
    "compare": "servetrace.api._compare",
    "capacity": "servetrace.api._capacity",
    "whatif": "servetrace.api._whatif",
    "with_server_metrics": "servetrace.api._server_metrics",
    "inference_perf_stages": "servetrace.api._server_metrics",
    "StepRecords": "servetrace.api._steps",
    "read_step_records": "servetrace.api._steps",
}

if TYPE_CHECKING:
    from servetrace.analysis.result import Analysis
    from servetrace.api._analyze import analyze, analyze_runs, analyze_shard, read_events
    from servetrace.api._capacity import capacity
    from servetrace.api._check import check, check_config
    from servetrace.api._compare import compare
    from servetrace.api._server_metrics import inference_perf_stages, with_server_metrics
    from servetrace.api._steps import StepRecords, read_step_records
    from servetrace.api._whatif import whatif
    from servetrace.comparison.compare import Comparison
    from servetrace.rules.result import CheckResult
    from servetrace.runs.model import Run, Runs

__all__ = [
    "Analysis",
    "CheckResult",
    "Comparison",
    "Run",
    "Runs",
    "StepRecords",
    "analyze",
    "analyze_runs",
    "analyze_shard",
    "capacity",
    "check",
    "check_config",
    "compare",
    "inference_perf_stages",
    "read_events",
    "read_step_records",
    "whatif",
    "with_server_metrics",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'servetrace.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
