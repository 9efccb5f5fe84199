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

import importlib

# Each name is imported from its module on first use, so that ``analyze`` does not pay for
# ``compare``'s and ``check``'s SciPy (half a second of start-up). Type checkers treat this
# name as True (as in ``servetrace/__init__.py``).
TYPE_CHECKING = False

_HOME = {
    "Analysis": "_analyze",
    "analyze": "_analyze",
    "read_events": "_analyze",
    "CheckResult": "_check",
    "check": "_check",
    "check_config": "_check",
    "Comparison": "_compare",
    "compare": "_compare",
    "Runs": "servetrace.runs.model",
    "capacity": "_capacity",
}


def _module(home: str) -> str:
    return home if home.startswith("servetrace.") else f"servetrace.api.{home}"


if TYPE_CHECKING:
    from servetrace.api._analyze import Analysis, analyze, read_events
    from servetrace.api._capacity import capacity
    from servetrace.api._check import CheckResult, check, check_config
    from servetrace.api._compare import Comparison, compare
    from servetrace.runs.model import Runs

__all__ = [
    "Analysis",
    "CheckResult",
    "Comparison",
    "Runs",
    "analyze",
    "capacity",
    "check",
    "check_config",
    "compare",
    "read_events",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'servetrace.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(_module(home)), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
