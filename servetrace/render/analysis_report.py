"""``servetrace analyze``'s report of one run in each format: the summary, the time
options' figures, the censoring estimates and the groups of ``--by``."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from servetrace.analysis.result import Analysis
from servetrace.render.formats import SummaryFormat
from servetrace.render.groups import footer, groups_markdown, groups_table, one_row_each
from servetrace.render.results_json import analysis_dict
from servetrace.render.server_metrics import server_lines, server_markdown
from servetrace.render.server_reported import TITLE as REPORTED_TITLE
from servetrace.render.server_reported import server_reported_lines
from servetrace.render.stalls import TITLE as STALLS_TITLE
from servetrace.render.stalls import stalls_dict, stalls_lines
from servetrace.render.summary import render_csv, render_json, render_markdown, render_table
from servetrace.render.survival import survival_lines
from servetrace.render.time_report import lines as time_lines
from servetrace.render.time_report import (
    origin_of,
    slice_csv,
    slice_markdown,
    slice_table,
    time_dict,
)


def server_slice_columns(
    rows: list[dict[str, Any]], analysis: Analysis, origin: int
) -> list[dict[str, Any]]:
    """The per-slice CSV rows, with the server's columns under --server-metrics."""
    if analysis.server_metrics is None:
        return rows
    from servetrace.render.server_slices import server_slices_dict, with_server_slices

    return with_server_slices(rows, server_slices_dict(analysis.server_metrics, origin))


def analysis_text(
    analysis: Analysis, fmt: SummaryFormat, naming: str, censoring: bool = False
) -> str | list[RenderableType]:
    """The report as text (JSON, CSV, Markdown), or the terminal table's renderables."""
    timed = time_dict(analysis)
    origin = origin_of(analysis)
    groups, by = analysis.groups, analysis.by or ""
    summary, inputs = analysis.summary, analysis.inputs
    if fmt is SummaryFormat.json:
        return render_json(analysis_dict(analysis, naming)) + "\n"
    if fmt is SummaryFormat.csv:
        if "slices" in timed:
            return slice_csv(server_slice_columns(timed["slices"], analysis, origin))
        return render_csv(groups or {None: summary}, analysis.by, naming)
    reported = analysis.server_reported
    stalls = (
        stalls_dict(analysis.stalls, analysis.timeline.trace_start_ns) if analysis.stalls else None
    )
    if fmt is SummaryFormat.markdown:
        text = render_markdown(summary, inputs, naming)
        text += "".join(f"- {line}\n" for line in time_lines(timed))
        if stalls is not None:
            text += f"\n### {STALLS_TITLE}\n\n" + "".join(f"- {x}\n" for x in stalls_lines(stalls))
        if "slices" in timed:
            text += slice_markdown(timed["slices"])
        text += "".join(f"- {line}\n" for line in survival_lines(summary.survival, censoring))
        if analysis.server_metrics is not None:
            text += server_markdown(analysis.server_metrics, origin)
        if reported is not None:
            lines = server_reported_lines(reported)[1:]
            text += f"\n### {REPORTED_TITLE}\n\n" + "".join(f"- {x.strip()}\n" for x in lines)
        if groups and one_row_each(groups):
            return text + groups_markdown(groups, by, naming)
        for value, group in (groups or {}).items():
            text += "\n" + render_markdown(group, inputs, naming, title=f"{by} = {value}")
            text += "".join(f"- {line}\n" for line in survival_lines(group.survival, censoring))
        return text
    parts: list[RenderableType] = [render_table(summary, inputs, naming)]
    parts += [Text(line) for line in time_lines(timed)]
    if stalls is not None:
        parts += [
            Text(""),
            Text(STALLS_TITLE.lower()),
            *(Text(f"  {x}") for x in stalls_lines(stalls)),
        ]
    if "slices" in timed:
        parts.append(Text(slice_table(timed["slices"])))
    parts += [Text(line) for line in survival_lines(summary.survival, censoring)]
    if analysis.server_metrics is not None:
        parts += [Text(""), *(Text(s) for s in server_lines(analysis.server_metrics, origin))]
    if reported is not None:
        parts += [Text(""), *(Text(s) for s in server_reported_lines(reported))]
    if groups and one_row_each(groups):
        return [*parts, Text(""), groups_table(groups, by, naming), Text(footer(groups, by))]
    for value, group in (groups or {}).items():
        parts += [Text(""), render_table(group, inputs, naming, title=f"{by} = {value}")]
        parts += [Text(line) for line in survival_lines(group.survival, censoring)]
    return parts
