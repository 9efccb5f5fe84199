"""``servetrace report``'s job: inputs → the analyses and comparisons → one HTML page.

One trace gives its page; a baseline and candidates give each page and the comparison of
each with the first; a sweep (``sweep=True``, or inputs that hold several runs, as
``analyze`` resolves them) gives the latency curve and SLO attainment by load.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servetrace.analysis.summary import GoodputTarget

if TYPE_CHECKING:
    from servetrace.comparison.compare import Comparison
    from servetrace.render.report_sections import TraceView


# --server-metrics FILE, its format (None: detected), the clock offset in ns (None: found).
ServerMetrics = tuple[str, str | None, int | None]
# --steps FILE and its format (None: detected).
Steps = tuple[str, str | None]


@dataclass(frozen=True)
class ReportPage:
    """The page, and what the user should read about how it was made."""

    html: str
    warnings: list[str] = field(default_factory=list)


def build_report(
    traces: Sequence[str],
    *,
    seed: int = 0,
    slice_ns: int | None = None,
    sweep: bool = False,
    goodput: tuple[GoodputTarget, ...] = (),
    attainment: str = "90%",
    gpus: int | None = None,
    reading: Mapping[str, Any] | None = None,
    server_metrics: ServerMetrics | None = None,
    steps: Steps | None = None,
) -> ReportPage:
    from servetrace.render.report import render_html, require_extra

    require_extra()
    read = dict(reading or {})
    if server_metrics is not None and len(traces) != 1:
        from servetrace.errors import UsageError

        raise UsageError(
            "--server-metrics describes one server: give one trace", hint="report one run"
        )
    if steps is not None and (len(traces) != 1 or sweep):
        from servetrace.errors import UsageError

        raise UsageError(
            "--steps are one run's engine steps: give one trace", hint="report one run"
        )
    if sweep or _holds_several_runs(traces, read.get("from_format")):
        from servetrace.api import capacity

        found = capacity(
            list(traces), goodput=goodput, attainment=attainment, gpus=gpus, reading=read
        )
        return ReportPage(render_html([], (), sweep=found), list(found.warnings))

    from servetrace.api import analyze
    from servetrace.render.report_compare import short_labels
    from servetrace.render.report_sections import TraceView
    from servetrace.render.series import MAX_POINTS

    notes: list[str] = []
    views = []
    names = short_labels(traces) if len(traces) > 1 else [None]
    for trace, name in zip(traces, names, strict=True):
        # --goodput on one trace (or a comparison): the headline's goodput and attainment.
        analysis = analyze(trace, slice_ns=slice_ns, goodput=goodput, **read)
        if server_metrics is not None:
            from servetrace.api import with_server_metrics

            analysis = with_server_metrics(analysis, *server_metrics)
        if steps is not None:
            from servetrace.api._stalls import with_stalls

            analysis = with_stalls(analysis, *steps)
        notes += analysis.read_warnings
        notes += [f"{trace}: {message}" for message in analysis.summary.warnings]
        if analysis.events_reader is None:
            notes.append(
                f"{trace}: partial results keep no events: the report draws no output-token "
                "rate and no requeued time"
            )
        # The page stays light with several traces: they share the scatter budget.
        views.append(TraceView(trace, analysis, points=MAX_POINTS // len(traces), name=name))
    comparisons = with_the_first(views, seed)
    if comparisons:
        from servetrace.render.compare_words import comparison_warnings

        notes += dict.fromkeys(w for c in comparisons for w in comparison_warnings(c))
    return ReportPage(render_html(views, comparisons), notes)


def with_the_first(views: Sequence[TraceView], seed: int = 0) -> list[Comparison]:
    """Each view after the first compared with the first (the report's comparisons)."""
    from servetrace.comparison.catalog import DEFAULT_COMPARE_METRICS
    from servetrace.comparison.compare import compare

    metrics = [m for m in DEFAULT_COMPARE_METRICS if m != "goodput"]
    return [
        compare(
            views[0].analysis,
            view.analysis,
            metrics=metrics,
            seed=seed,
            baseline_label=views[0].label,
            candidate_label=view.label,
        )
        for view in views[1:]
    ]


def _holds_several_runs(traces: Sequence[str], from_format: str | None) -> bool:
    """Arguments that hold several runs (a sweep folder, a run folder of several
    exports), as analyze resolves them: the sweep report. One run each: one view each."""
    from servetrace.sources.inputs import resolve

    return any(len(resolve([t], from_format)) > 1 for t in traces)
