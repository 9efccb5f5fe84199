"""``servetrace.to_dict``: the JSON report of any result, as ``--format json`` prints it.

Built here, with the other formats, from the result's plain numbers: the library's
results know nothing of how they are written.
"""

from __future__ import annotations

from typing import Any

from servetrace.analysis.result import Analysis
from servetrace.comparison.compare import Comparison
from servetrace.render.check import check_dict
from servetrace.render.compare import compare_dict
from servetrace.render.results_json import analysis_dict, runs_dict
from servetrace.rules.result import CheckResult
from servetrace.runs.model import Runs

Result = Analysis | Runs | Comparison | CheckResult


def to_dict(result: Result, naming: str = "servetrace") -> dict[str, Any]:
    """The report of ``analyze`` (an ``Analysis`` or ``Runs``), ``compare`` or ``check``
    with ``--format json``: the same keys and numbers, in the contract's units."""
    if isinstance(result, Analysis):
        return analysis_dict(result, naming)
    if isinstance(result, Runs):
        return runs_dict(result, naming)
    if isinstance(result, Comparison):
        return compare_dict([result])
    if isinstance(result, CheckResult):
        return check_dict(result, trace=result.trace, baseline=result.baseline_file)
    raise TypeError(
        f"to_dict takes an analysis, runs, a comparison or a check result, not {result!r}"
    )
