"""``with_server_metrics``: an analysis with its engine's Prometheus series compared."""

from __future__ import annotations

import os
from dataclasses import replace

from servetrace.analysis.result import Analysis
from servetrace.analysis.stage_pairs import StagePairs
from servetrace.errors import UsageError
from servetrace.sources.server_metrics.schema import FORMATS


def with_server_metrics(
    analysis: Analysis,
    path: str | os.PathLike[str],
    from_format: str | None = None,
    clock_offset_ns: int | None = None,
) -> Analysis:
    """``analysis`` with ``server_metrics``: the series of ``path`` (format ``from_format``,
    else detected) on the trace's time axis and every consistency finding (design §12).
    Raises ``InputError`` for an unreadable file or clocks that cannot be aligned."""
    from servetrace.analysis.server_metrics import compare
    from servetrace.sources.server_metrics import read

    if from_format is not None and from_format not in FORMATS:
        raise UsageError(
            f"unknown server metrics format {from_format!r}",
            hint=f"one of {', '.join(FORMATS)}",
        )
    where = os.fspath(path)
    metrics = read(where, from_format)
    events = analysis.events("--server-metrics counts the trace's tokens and preemptions")
    found = compare(metrics, analysis, events, where, clock_offset_ns)
    if analysis.slices is not None and analysis.slices.height:  # --slice: beside the trace's
        from servetrace.analysis.server_slices import server_slice_figures

        figures = server_slice_figures(found, analysis, analysis.slices, events)
        found = replace(found, slices=figures[0], slices_unavailable=figures[1])
    return replace(analysis, server_metrics=found)


def inference_perf_stages(path: str | os.PathLike[str]) -> StagePairs:
    """Each load stage of an inference-perf results folder: its client summary against its
    server Prometheus summary, pair by pair, with the definitional differences named."""
    from pathlib import Path

    from servetrace.analysis.stage_pairs import stage_pairs
    from servetrace.sources.server_metrics.inference_perf import read_stages

    return stage_pairs(read_stages(Path(path)), os.fspath(path))
