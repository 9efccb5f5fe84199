"""The library API: what ``servetrace analyze``, ``compare`` and ``check`` do, from Python.

The CLI calls exactly these functions, so a Python user gets the CLI's numbers for every
input the CLI accepts — canonical traces in any file form, and other tools' exports
(detected by content as the CLI detects them, or named with ``from_format``).

>>> import servetrace
>>> analysis = servetrace.analyze("sample_traces/realistic.parquet")   # doctest: +SKIP
>>> analysis.summary.metrics["ttft"]["p99"]                            # ns  # doctest: +SKIP
>>> analysis.to_dict() == json.loads(`servetrace analyze … --format json`)  # doctest: +SKIP

Numbers are integer ns (or plain ratios); ``to_dict()`` is the JSON report, in its units.
This module is a thin adapter over ``sources``, ``analysis``, ``compare`` and ``check``.
"""

from __future__ import annotations

from servetrace.api._analyze import Analysis, analyze, read_events
from servetrace.api._capacity import capacity
from servetrace.api._check import CheckResult, check, check_config
from servetrace.api._compare import Comparison, compare

__all__ = [
    "Analysis",
    "CheckResult",
    "Comparison",
    "analyze",
    "capacity",
    "check",
    "check_config",
    "compare",
    "read_events",
]
