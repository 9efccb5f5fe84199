"""servetrace: analyze LLM inference-serving traces from their event logs.

The library API (``servetrace.api``), imported on first use so that ``import servetrace``
and ``servetrace --help`` do not pay for Polars and the analysis modules:

- ``analyze(paths, **options) -> Analysis``: summary, per-request and quarantine frames,
  ``to_dict()`` equal to ``servetrace analyze --format json``; for several runs (tool
  exports, run folders, a sweep) a ``Runs``: one ``Run`` each (``label``, ``declared``,
  ``analysis``, or ``reported`` for a summary alone), sorted by declared load, its
  ``to_dict()`` the JSON of the runs table; ``pool=True`` pools them into one ``Analysis``;
- ``compare(baseline, candidate, **options) -> Comparison``;
- ``check(trace, rules, **options) -> CheckResult``
  (the packages doing those jobs are ``servetrace.comparison`` and ``servetrace.rules``,
  so that no subpackage import can shadow these functions);
- ``read_events(paths, **options) -> polars.DataFrame`` of canonical events;
- ``capacity(runs, goodput=..., attainment=0.9) -> CapacityReport`` of a load sweep.
"""

from __future__ import annotations

# Not ``typing.TYPE_CHECKING``: importing typing (and the re module it pulls in) would be
# most of what ``import servetrace`` costs. Type checkers treat this name as True.
TYPE_CHECKING = False

__version__ = "0.1.0"
SCHEMA_VERSION = 1

__all__ = [
    "SCHEMA_VERSION",
    "Analysis",
    "CheckResult",
    "Comparison",
    "Runs",
    "__version__",
    "analyze",
    "capacity",
    "check",
    "compare",
    "read_events",
]

_LAZY = frozenset(__all__) - {"SCHEMA_VERSION", "__version__"}

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports on demand
    from servetrace.api import (
        Analysis,
        CheckResult,
        Comparison,
        Runs,
        analyze,
        capacity,
        check,
        compare,
        read_events,
    )


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from servetrace import api

        value = getattr(api, name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'servetrace' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
