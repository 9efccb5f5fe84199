"""The JSON report of each result (design §7): what ``--format json`` prints and what
``servetrace.to_dict`` returns, one builder per result type."""

from __future__ import annotations

from typing import Any

from servetrace.analysis.result import Analysis
from servetrace.render._json import VERSIONS
from servetrace.render.summary import report_dict
from servetrace.render.time_report import time_dict
from servetrace.runs.declared import declared_dict
from servetrace.runs.model import Run, Runs


def analysis_dict(analysis: Analysis, naming: str = "servetrace") -> dict[str, Any]:
    """The report of ``servetrace analyze --format json`` for one run."""
    report = report_dict(analysis.summary, analysis.inputs, analysis.groups, analysis.by, naming)
    if analysis.declared is not None:
        report["declared"] = declared_dict(analysis.declared)
    if analysis.stalls is not None:
        from servetrace.render.stalls import stalls_dict

        report["stalls"] = stalls_dict(analysis.stalls, analysis.timeline.trace_start_ns)
    report = {**report, **time_dict(analysis)}
    if analysis.server_metrics is not None:
        from servetrace.render.server_metrics import server_dict
        from servetrace.render.time_report import origin_of

        report.update(server_dict(analysis.server_metrics, origin_of(analysis)))
    reported = analysis.server_reported
    if reported is not None:  # add-only: present when the bodies carried the figures
        from servetrace.render.server_reported import server_reported_dict

        report.update(server_reported_dict(reported))
    return report


def run_dict(run: Run, naming: str = "servetrace") -> dict[str, Any]:
    """One run of the runs report: its analysis' keys, plus label, declared, reported."""
    report: dict[str, Any] = (
        analysis_dict(run.analysis, naming) if run.analysis is not None else {"reported": None}
    )
    report["label"] = run.label
    report["declared"] = declared_dict(run.declared)
    report["reported"] = run.reported
    return report


def runs_dict(runs: Runs, naming: str = "servetrace") -> dict[str, Any]:
    """``{"servetrace_version", "schema_version", "runs": [REPORT + label, declared]}``."""
    return {
        **VERSIONS,
        "runs": [run_dict(run, naming) for run in runs],
        "warnings": list(runs.warnings),
    }
