"""servetrace: analyze LLM inference-serving traces from their event logs.

The library API (``servetrace.api``), imported on first use so that ``import servetrace``
and ``servetrace --help`` do not pay for Polars and the analysis modules:

- ``analyze(paths, **options) -> Analysis``: one run's summary, per-request and
  quarantine frames;
- ``analyze_runs(paths, **options) -> Runs``: every run the inputs hold (tool exports,
  run folders, a sweep), one ``Run`` each (``label``, ``declared``, ``analysis``, or
  ``reported`` for a summary alone), sorted by declared load; ``pool=True`` pools them;
- ``compare(baseline, candidate, **options) -> Comparison``;
- ``check(trace, rules, **options) -> CheckResult``;
- ``read_events(paths, **options) -> polars.DataFrame`` of canonical events;
- ``capacity(runs, goodput=..., attainment=0.9) -> CapacityReport`` of a load sweep;
- ``whatif(trace, [(policy, limits)], **options) -> WhatIf``: another policy predicted
  on the trace's own requests by an engine model calibrated and validated on it;
- ``to_dict(result)``: the JSON report of any of them, as ``--format json`` prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servetrace.version import SCHEMA_VERSION, __version__

__all__ = [
    "SCHEMA_VERSION",
    "Analysis",
    "CheckResult",
    "Comparison",
    "Run",
    "Runs",
    "__version__",
    "analyze",
    "analyze_runs",
    "capacity",
    "check",
    "compare",
    "read_events",
    "to_dict",
    "whatif",
]

_LAZY = frozenset(__all__) - {"SCHEMA_VERSION", "__version__"}

if TYPE_CHECKING:  # at run time __getattr__ imports on demand
    from servetrace.api import (
        Analysis,
        CheckResult,
        Comparison,
        Run,
        Runs,
        analyze,
        analyze_runs,
        capacity,
        check,
        compare,
        read_events,
        whatif,
    )
    from servetrace.render.to_dict import to_dict


def __getattr__(name: str) -> object:
    if name == "to_dict":  # a view of a result, so it is render's, not the API's
        from servetrace.render.to_dict import to_dict

        globals()[name] = to_dict
        return to_dict
    if name in _LAZY:
        from servetrace import api

        value = getattr(api, name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'servetrace' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
