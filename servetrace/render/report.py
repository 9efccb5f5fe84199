"""The self-contained HTML report: sections of charts, each read for the user in one line.

``report_sections`` turns analyses (and comparisons) into sections — title, one sentence
computed from the numbers, Vega-Lite specs, tables — which ``render_html`` puts into the
Jinja2 template with the Vega/Vega-Lite/Vega-Embed bundle inlined (from vl-convert), so
the file opens offline with no request to any server. ``plots`` writes the same specs as
SVG/PNG. Imports of the ``report`` extra (altair, jinja2, vl_convert) happen only here,
inside functions, and a missing extra is a usage error that says how to install it.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

from servetrace.analysis.capacity import CapacityReport
from servetrace.comparison.compare import Comparison
from servetrace.errors import UsageError
from servetrace.render._json import script_json
from servetrace.render.compare import compare_dict
from servetrace.render.headline import headline, sweep_headline
from servetrace.render.report_compare import comparison_sections
from servetrace.render.report_sections import TRACE_SECTIONS, Section, TraceView
from servetrace.render.server_report import with_server_sections
from servetrace.render.stalls_report import with_stall_sections
from servetrace.version import __version__

INSTALL_HINT = "pip install 'servetrace[report]'"


def require_extra() -> None:
    """Exit 2 with the install line when the report extra is missing."""
    missing = []
    for module in ("altair", "jinja2", "vl_convert"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise UsageError(
            f"the HTML report and plots need {', '.join(missing)}, which is not installed",
            hint=INSTALL_HINT,
        )


def report_sections(
    views: Sequence[TraceView], comparisons: Sequence[Comparison] = ()
) -> list[tuple[str, list[Section]]]:
    """Groups of sections: the comparison first (with 2+ traces), then one group per trace."""
    groups: list[tuple[str, list[Section]]] = []
    if comparisons:
        groups.append(("Comparison", comparison_sections(views, comparisons)))
    for i, view in enumerate(views):
        prefix = f"t{i}-"
        sections = [build(view, prefix) for build in TRACE_SECTIONS]
        sections = with_stall_sections(sections, view, prefix)
        groups.append((view.label, with_server_sections(sections, view, prefix)))
    return groups


def render_html(
    views: Sequence[TraceView],
    comparisons: Sequence[Comparison] = (),
    sweep: CapacityReport | None = None,
    extra: Sequence[tuple[str, list[Section]]] = (),
) -> str:
    """The page; ``sweep`` (``report`` on a sweep) adds its curve and attainment first,
    and ``extra`` groups of sections (a what-if) go before everything."""
    require_extra()
    import jinja2
    import vl_convert

    groups = report_sections(views, comparisons)
    if sweep is not None:
        from servetrace.render.report_sweep import sweep_sections

        groups.insert(0, ("Sweep", sweep_sections(sweep)))
    groups[:0] = list(extra)
    # The stub wants a snippet; without one the bundle puts vegaEmbed on ``window``.
    make_bundle: Any = vl_convert.javascript_bundle
    template_text = (
        resources.files("servetrace.render").joinpath("templates/report.html.j2").read_text()
    )
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["script_json"] = lambda d: jinja2.utils.markupsafe.Markup(script_json(d))
    reports = {view.label: view.json for view in views}
    if comparisons:
        reports["comparison"] = compare_dict(comparisons)
    labels = [v.label for v in views]
    headlines = [
        headline(view.json, f"t{i}-headline", view.short, view.label)
        for i, view in enumerate(views)
    ]
    if sweep is not None:
        from servetrace.render.capacity import report_dict as capacity_dict

        reports["sweep"] = capacity_dict(sweep)
        labels = labels or [f"sweep of {len(sweep.curve)} runs"]
        headlines.insert(0, sweep_headline(reports["sweep"]))
    return env.from_string(template_text).render(
        title="servetrace report: " + ", ".join(labels),
        version=__version__,
        headlines=headlines,
        groups=groups,
        reports=reports,
        bundle=jinja2.utils.markupsafe.Markup(make_bundle().replace("</script", "<\\/script")),
    )
