"""``servetrace report``: one self-contained HTML file of charts, each read in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servetrace.cli._app import app, err_console, guarded, warn
from servetrace.cli._events import load_for_report
from servetrace.cli._inputs import ColumnOpt, EventMapOpt, FromOpt, TimeUnitOpt
from servetrace.errors import UsageError


@app.command()
@guarded
def report(
    traces: Annotated[
        list[str],
        typer.Argument(help="One trace, or a baseline then candidates to compare with it."),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="The .html file to write.")],
    seed: Annotated[int, typer.Option(help="Seed of the comparison's bootstrap.")] = 0,
    column: ColumnOpt = None,
    time_unit: TimeUnitOpt = None,
    event_map: EventMapOpt = None,
    from_format: FromOpt = None,
) -> None:
    """Write an offline HTML report: summary, CDFs, load over time, slowest requests,
    formula residuals; with two or more traces, the comparison of each with the first."""
    from servetrace.render.report import TraceView, render_html, require_extra

    require_extra()
    if output.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"--output {output}: use an .html file name")
    if not output.parent.is_dir():
        raise UsageError(f"--output {output}: directory {output.parent} does not exist")
    from servetrace.render.series import MAX_POINTS

    views = []
    for trace in traces:
        analysis, events = load_for_report(trace, column, time_unit, event_map, from_format)
        # The page stays light with several traces: they share the scatter budget.
        views.append(TraceView(trace, analysis, events, points=MAX_POINTS // len(traces)))
    comparisons = []
    if len(views) > 1:
        from servetrace.compare.catalog import DEFAULT_COMPARE_METRICS
        from servetrace.compare.measure import compare

        metrics = [m for m in DEFAULT_COMPARE_METRICS if m != "goodput"]
        for view in views[1:]:
            comparisons.append(
                compare(
                    views[0].analysis,
                    view.analysis,
                    metrics=metrics,
                    seed=seed,
                    baseline_label=views[0].label,
                    candidate_label=view.label,
                )
            )
        for message in dict.fromkeys(w for c in comparisons for w in c.warnings):
            warn(message)
    html = render_html(views, comparisons)
    try:
        output.write_text(html, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{output}: cannot write: {error.strerror or error}") from None
    err_console.print(f"wrote {output} ({len(html.encode()) / 1e6:.2f} MB)", markup=False)
