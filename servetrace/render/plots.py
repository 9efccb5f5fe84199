"""``--plots DIR``: the report's charts as SVG and PNG files, and Markdown that links them.

The same sections as the HTML report, rendered offline by vl-convert (no browser), so a CI
job can publish the directory and a Markdown report (a PR comment, a job summary) can show
the pictures. ``DIR/plots.md`` links them by file name; the text returned links them by
``DIR/name``, for a Markdown report written next to ``DIR``.
"""

from __future__ import annotations

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


def write_plots(groups: Groups, directory: Path) -> str:
    """Write every chart of ``groups`` as ``DIR/<chart>.svg`` and ``.png``; return the
    Markdown that links them (relative to the working directory)."""
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
                png: Any = vl_convert.vegalite_to_png(spec, scale=1)
                try:
                    (directory / f"{name}.svg").write_text(svg, encoding="utf-8")
                    (directory / f"{name}.png").write_bytes(png)
                except OSError as error:
                    raise UsageError(
                        f"--plots {directory}: cannot write: {error.strerror or error}"
                    ) from None
                files[chart_id] = (f"{name}.png", f"{name}.svg")
    (directory / "plots.md").write_text(_markdown(groups, files, "").lstrip(), encoding="utf-8")
    return _markdown(groups, files, f"{directory.as_posix()}/")


def analysis_plots(view: TraceView, directory: Path) -> str:
    """``analyze --plots``: every section of the report for one trace."""
    groups = [(view.label, [build(view, "t0-") for build in TRACE_SECTIONS])]
    return write_plots(groups, directory)


def compare_plots(
    baseline: tuple[str, Analysis],
    candidates: Sequence[tuple[str, Analysis]],
    comparisons: Sequence[Comparison],
    directory: Path,
    names: Sequence[str] | None = None,
) -> str:
    """``compare --plots``: overlaid CDFs, bootstrap ratios, decomposition delta; the
    legends say ``names`` (run labels of the paths), else the labels."""
    pairs = [baseline, *candidates]
    given = list(names) if names is not None else [None] * len(pairs)
    views = [
        TraceView(label, analysis, name=name)
        for (label, analysis), name in zip(pairs, given, strict=True)
    ]
    return write_plots([("Comparison", comparison_sections(views, comparisons))], directory)
