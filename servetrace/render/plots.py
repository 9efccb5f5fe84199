"""``--plots DIR``: the report's charts as SVG and PNG files, and Markdown that links them.

The same sections as the HTML report, rendered offline by vl-convert (no browser), so a CI
job can publish the directory and a Markdown report (a PR comment, a job summary) can show
the pictures. ``DIR/plots.md`` links them by file name; the text returned links them
relative to the Markdown file it goes into (``-o FILE``, else the working directory, where
``> report.md`` puts it). PNGs are drawn at twice the chart's size, sharp on a HiDPI
screen and in a PR comment scaled to the page width.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servetrace.analysis.result import Analysis
from servetrace.comparison.compare import Comparison
from servetrace.errors import UsageError
from servetrace.render.report import require_extra
from servetrace.render.report_compare import comparison_sections
from servetrace.render.report_sections import TRACE_SECTIONS, Section, TraceView

Groups = Sequence[tuple[str, Sequence[Section]]]
PNG_SCALE = 2  # device pixels per chart pixel


def link_base(directory: Path, markdown: Path | None) -> str:
    """``DIR`` as a link from the Markdown file ``markdown`` (None: one in the working
    directory), ending in ``/``; absolute only where no relative path exists."""
    start = (markdown.parent if markdown is not None else Path()).absolute()
    try:
        relative = os.path.relpath(directory.absolute(), start)
    except ValueError:  # another drive (Windows): no relative path
        return directory.absolute().as_posix() + "/"
    return Path(relative).as_posix() + "/"


def _markdown(groups: Groups, files: dict[str, tuple[str, str]], base: str) -> str:
    lines = ["", "## Plots", ""]
    for title, sections in groups:
        lines += [f"### {title}", ""]
        for section in sections:
            lines.append(f"**{section.title}.** {section.sentence}")
            lines.append("")
            for chart_id, _ in section.charts:
                png, svg = files[chart_id]
                lines.append(f"![{section.title}]({base}{png}) ([SVG]({base}{svg}))")
            lines.append("")
    return "\n".join(lines)


def write_plots(groups: Groups, directory: Path, markdown: Path | None = None) -> str:
    """Write every chart of ``groups`` as ``DIR/<chart>.svg`` and ``.png``; return the
    Markdown that links them, relative to the Markdown file ``markdown`` (None: stdout,
    read from the working directory)."""
    require_extra()
    import vl_convert

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--plots {directory}: cannot create: {error.strerror or error}") from None
    files: dict[str, tuple[str, str]] = {}
    for _, sections in groups:
        for section in sections:
            for chart_id, spec in section.charts:
                name = chart_id.removeprefix("t0-")
                svg: str = vl_convert.vegalite_to_svg(spec)
                png: Any = vl_convert.vegalite_to_png(spec, scale=PNG_SCALE)
                try:
                    (directory / f"{name}.svg").write_text(svg, encoding="utf-8")
                    (directory / f"{name}.png").write_bytes(png)
                except OSError as error:
                    raise UsageError(
                        f"--plots {directory}: cannot write: {error.strerror or error}"
                    ) from None
                files[chart_id] = (f"{name}.png", f"{name}.svg")
    (directory / "plots.md").write_text(_markdown(groups, files, "").lstrip(), encoding="utf-8")
    return _markdown(groups, files, link_base(directory, markdown))


def analysis_plots(view: TraceView, directory: Path, markdown: Path | None = None) -> str:
    """``analyze --plots``: every section of the report for one trace."""
    groups = [(view.label, [build(view, "t0-") for build in TRACE_SECTIONS])]
    return write_plots(groups, directory, markdown)


def compare_plots(
    baseline: tuple[str, Analysis],
    candidates: Sequence[tuple[str, Analysis]],
    comparisons: Sequence[Comparison],
    directory: Path,
    names: Sequence[str] | None = None,
    markdown: Path | None = None,
) -> str:
    """``compare --plots``: overlaid CDFs, bootstrap ratios, decomposition delta; the
    legends say ``names`` (run labels of the paths), else the labels."""
    pairs = [baseline, *candidates]
    given = list(names) if names is not None else [None] * len(pairs)
    views = [
        TraceView(label, analysis, name=name)
        for (label, analysis), name in zip(pairs, given, strict=True)
    ]
    return write_plots(
        [("Comparison", comparison_sections(views, comparisons))], directory, markdown
    )
