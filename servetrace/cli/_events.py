"""The ``--plots`` option shared by ``analyze`` and ``compare``, and what it prints."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from servetrace.cli._app import err_console

if TYPE_CHECKING:
    from servetrace.analysis.result import Analysis
    from servetrace.comparison.compare import Comparison

PlotsOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="DIR",
        help="Also write the charts of the HTML report as SVG and PNG into this directory "
        "(with plots.md linking them); needs servetrace[report].",
    ),
]


def check_plots_dir(directory: Path | None, inputs: list[str]) -> None:
    """Refuse a ``--plots`` directory that is an input or inside one, before any work."""
    if directory is not None:
        from servetrace.outputs import refuse_overwriting_inputs

        refuse_overwriting_inputs([("--plots", directory)], inputs)


def analysis_plots(
    analysis: Analysis, directory: Path, traces: list[str], markdown: Path | None = None
) -> str:
    """``analyze --plots DIR``: the charts, with the trace's ticks scanned again lazily
    (reduced to bins, never held: the analysis may have streamed a huge trace); links
    relative to ``markdown`` (``-o``), else to the working directory."""
    from servetrace.render.plots import analysis_plots as write
    from servetrace.render.report import require_extra
    from servetrace.render.report_sections import TraceView

    require_extra()
    links = write(TraceView(", ".join(traces), analysis), directory, markdown)
    _wrote(directory)
    return links


def compare_plots(
    baseline: str,
    base: Analysis,
    candidates: list[tuple[str, Analysis]],
    comparisons: list[Comparison],
    directory: Path,
    named: bool = False,
    markdown: Path | None = None,
) -> str:
    """``compare --plots DIR``: the comparison's charts as SVG and PNG; ``baseline`` and
    each candidate named by its ``--label`` (``named``), else by its run label."""
    from servetrace.render.plots import compare_plots as write
    from servetrace.render.report import require_extra
    from servetrace.render.report_compare import short_labels

    require_extra()
    labels = [baseline, *(label for label, _ in candidates)]
    names = None if named else short_labels(labels)
    links = write((baseline, base), candidates, comparisons, directory, names, markdown)
    _wrote(directory)
    return links


def _wrote(directory: Path) -> None:
    count = len(list(directory.glob("*.svg")))
    err_console.print(
        f"wrote {count} charts as SVG and PNG to {directory} (linked from "
        f"{directory / 'plots.md'})",
        markup=False,
    )
