"""Render comparisons as a Rich table, JSON or Markdown (pure: returns text, never prints).

Following pyperf, the baseline is the reference, a change reads "1.14x slower", and rows
without a significant change collapse into one line unless ``verbose``. Following
hyperfine, the JSON carries everything (method, seed, every row) and exporters are
pure functions of the result.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from servetrace import SCHEMA_VERSION, __version__
from servetrace.compare.catalog import format_value
from servetrace.compare.measure import Comparison
from servetrace.render._json import clean

ROW_KEYS = (
    "candidate",
    "metric",
    "stat",
    "unit",
    "baseline",
    "candidate_value",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "significant",
    "better",
    "verdict",
    "words",
    "paired",
    "method",
    "n_baseline",
    "n_candidate",
)


class CompareFormat(str, Enum):
    """Output formats of ``servetrace compare``."""

    table = "table"
    json = "json"
    markdown = "markdown"


# --------------------------------------------------------------------------- helpers
def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _ci(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    return f"{_factor(low)}-{_factor(high)}"


def _factor(value: float) -> str:
    if not math.isfinite(value):
        return "inf"
    return f"{value:.3f}" if value < 10 else f"{value:.3g}"


def _signed(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    text = format_value(abs(value), unit)
    if value == 0 or text.startswith("0 ") or text == "0":
        return text
    return ("+" if value > 0 else "-") + text


def _key(row: Mapping[str, Any]) -> str:
    return f"{row['metric']}.{row['stat']}"


def _change(row: Mapping[str, Any]) -> str:
    return str(row["words"]) if row["significant"] else "no significant change"


def _method_line(comparison: Comparison) -> str:
    paired = "paired" if comparison.workload.paired else "independent"
    return (
        f"{paired} bootstrap (ITL: independent, at its effective sample size), "
        f"{comparison.resamples} resamples, seed {comparison.seed}, "
        f"{comparison.confidence:.0%} CI of the ratio candidate/baseline; significant when "
        f"the CI excludes 1 and the change exceeds {comparison.min_change:.0%}; "
        "percentiles: linear interpolation; rates: compound-Poisson interval"
    )


def _rows(comparison: Comparison) -> list[dict[str, Any]]:
    return list(comparison.rows.iter_rows(named=True))


# --------------------------------------------------------------------------- JSON
def compare_dict(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    """Everything the comparison knows, as plain data (rows follow the JSON contract)."""
    if not comparisons:
        raise ValueError("nothing to render: no comparison")
    first = comparisons[0]
    return clean(
        {
            "servetrace_version": __version__,
            "schema_version": SCHEMA_VERSION,
            "baseline": first.baseline_label,
            "candidates": [c.candidate_label for c in comparisons],
            "seed": first.seed,
            "resamples": first.resamples,
            "method": first.method(),
            "workload": {c.candidate_label: c.workload.to_dict() for c in comparisons},
            "rows": [{key: row[key] for key in ROW_KEYS} for c in comparisons for row in _rows(c)],
            "tests": [row for c in comparisons for row in c.tests.iter_rows(named=True)],
            "decomposition": {
                c.candidate_label: list(c.decomposition.iter_rows(named=True)) for c in comparisons
            },
            "buckets": {
                c.candidate_label: (
                    None if c.buckets is None else list(c.buckets.iter_rows(named=True))
                )
                for c in comparisons
            },
            "tradeoffs": {c.candidate_label: c.tradeoff for c in comparisons},
            "warnings": [w for c in comparisons for w in c.warnings],
            "notes": [n for c in comparisons for n in c.notes],
        }
    )


def compare_json(comparisons: Sequence[Comparison]) -> str:
    """Stable JSON (keys in a fixed order, two-space indent, no NaN)."""
    return (
        json.dumps(compare_dict(comparisons), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    )


# --------------------------------------------------------------------------- table
def _results_table(comparison: Comparison, verbose: bool) -> tuple[Table | None, list[str]]:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (
        ("metric", "left"),
        ("stat", "left"),
        ("baseline", "right"),
        ("candidate", "right"),
        ("change", "left"),
        (f"{comparison.confidence:.0%} CI", "left"),
        ("p", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    hidden: list[str] = []
    for row in _rows(comparison):
        if not row["significant"] and not verbose:
            hidden.append(_key(row))
            continue
        style = None
        if row["significant"]:
            style = "red" if row["verdict"] == "slower" else "green"
        table.add_row(
            row["metric"],
            row["stat"],
            format_value(row["baseline"], row["unit"]),
            format_value(row["candidate_value"], row["unit"]),
            Text(_change(row), style=style or ""),
            _ci(row["ci_low"], row["ci_high"]),
            _p(row["p_value"]),
        )
    return (table if table.row_count else None), hidden


def _hidden_line(hidden: Sequence[str], total: int) -> str:
    if len(hidden) == total:
        return f"No significant change in any of the {total} statistics compared."
    return f"No significant change ({len(hidden)}): " + ", ".join(hidden)


def _decomposition_table(comparison: Comparison) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (
        ("component", "left"),
        ("baseline mean", "right"),
        ("candidate mean", "right"),
        ("delta mean", "right"),
        ("delta p50", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in comparison.decomposition.iter_rows(named=True):
        if (
            row["component"] == "residual"
            and _negligible(row["delta_mean_ms"])
            and _negligible(row["delta_p50_ms"])
        ):
            continue
        name = row["component"]
        if name == "residual":
            name = "residual (p50s do not add up)"
        table.add_row(
            name,
            format_value(row["baseline_mean_ms"], "ms"),
            format_value(row["candidate_mean_ms"], "ms"),
            _signed(_tidy(row["delta_mean_ms"]), "ms"),
            _signed(_tidy(row["delta_p50_ms"]), "ms"),
        )
    return table


def _negligible(value: float | None) -> bool:
    return value is None or abs(value) < 1e-6


def _tidy(value: float | None) -> float | None:
    """Float noise of a sum of means shows as 0."""
    return 0.0 if value is not None and abs(value) < 1e-9 else value


def _buckets_table(comparison: Comparison) -> Table | None:
    buckets = comparison.buckets
    if buckets is None or buckets.height == 0:
        return None
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = [c for c in ("delta_ttft_ms", "delta_itl_ms", "delta_e2e_ms") if c in buckets.columns]
    table.add_column("length bucket")
    table.add_column("requests", justify="right")
    for column in columns:
        table.add_column("Δ" + column.removeprefix("delta_").removesuffix("_ms"), justify="right")
    if "faster_fraction" in buckets.columns:
        table.add_column("e2e faster", justify="right")
    for row in buckets.iter_rows(named=True):
        label = f"{row['dimension'].removesuffix('_tokens')} {row['bucket']}"
        cells = [label, str(row["requests"])]
        cells += [_signed(row[c], "ms") for c in columns]
        if "faster_fraction" in buckets.columns:
            share = row["faster_fraction"]
            cells.append("n/a" if share is None else f"{share:.0%}")
        table.add_row(*cells)
    return table


def _tests_table(comparison: Comparison) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("metric", "test", "on", "n", "p"):
        table.add_column(name, justify="right" if name in ("n", "p") else "left")
    for row in comparison.tests.iter_rows(named=True):
        n = f"{row['n_baseline']}/{row['n_candidate']}"
        table.add_row(row["metric"], row["test"], row["based_on"], n, _p(row["p_value"]))
    return table


def compare_table(comparisons: Sequence[Comparison], *, verbose: bool = False) -> Group:
    """A Rich renderable: per candidate, the workload verdict, significant rows, the
    collapsed line, the decomposition, length buckets and the method."""
    parts: list[RenderableType] = []
    for index, comparison in enumerate(comparisons):
        if index:
            parts.append(Text(""))
        parts.append(
            Text.assemble(
                ("baseline: ", "bold"),
                comparison.baseline_label,
                ("   candidate: ", "bold"),
                comparison.candidate_label,
            )
        )
        workload_style = "" if comparison.workload.paired else "yellow"
        parts.append(
            Text.assemble(("workload: ", "bold"), (comparison.workload.message, workload_style))
        )
        table, hidden = _results_table(comparison, verbose)
        parts.append(Text(""))
        if table is not None:
            parts.append(table)
        if hidden:
            parts.append(Text(_hidden_line(hidden, comparison.rows.height)))
        if comparison.tradeoff:
            parts.append(Text(""))
            parts.append(Text(comparison.tradeoff, style="bold"))
        if comparison.decomposition.height:
            who = "paired requests" if comparison.workload.paired else "completed requests"
            parts.append(Text(""))
            parts.append(
                Text(
                    f"Where the e2e difference comes from ({who}; mean deltas add "
                    "up, p50 deltas do not):",
                    style="bold",
                )
            )
            parts.append(_decomposition_table(comparison))
        buckets = _buckets_table(comparison)
        if buckets is not None:
            parts.append(Text(""))
            parts.append(
                Text(
                    "Who gained or lost (mean per-request delta, candidate - "
                    "baseline, by baseline length quartile):",
                    style="bold",
                )
            )
            parts.append(buckets)
        if verbose and comparison.tests.height:
            parts.append(Text(""))
            parts.append(
                Text("Distribution tests (rank tests of the whole distribution):", style="bold")
            )
            parts.append(_tests_table(comparison))
        parts.append(Text(""))
        parts.append(Text("method: " + _method_line(comparison), style="dim"))
        for note in comparison.notes:
            parts.append(Text("note: " + note, style="dim"))
        for warning in comparison.warnings:
            parts.append(Text("warning: " + warning, style="yellow"))
    return Group(*parts)


def compare_text(
    comparisons: Sequence[Comparison], *, verbose: bool = False, width: int = 110
) -> str:
    """The table format as plain text (no colour)."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        highlight=False,
        soft_wrap=False,
    )
    console.print(compare_table(comparisons, verbose=verbose))
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


# --------------------------------------------------------------------------- Markdown
def _md(text: Any) -> str:
    return str(text).replace("|", "\\|")


def compare_markdown(comparisons: Sequence[Comparison], *, verbose: bool = False) -> str:
    """GitHub-flavoured Markdown, ready for a pull-request comment."""
    lines: list[str] = []
    for comparison in comparisons:
        lines.append(
            f"### servetrace compare: `{_md(comparison.candidate_label)}` vs "
            f"`{_md(comparison.baseline_label)}`"
        )
        lines.append("")
        marker = "" if comparison.workload.paired else ":warning: "
        lines.append(f"**Workload:** {marker}{_md(comparison.workload.message)}")
        lines.append("")
        rows = _rows(comparison)
        shown = [r for r in rows if r["significant"] or verbose]
        hidden = [_key(r) for r in rows if not (r["significant"] or verbose)]
        if shown:
            ci = f"{comparison.confidence:.0%} CI"
            lines.append(f"| metric | baseline | candidate | change | {ci} | p |")
            lines.append("|---|---:|---:|---|---|---:|")
            for row in shown:
                change = _change(row)
                if row["significant"]:
                    change = f"**{change}**"
                lines.append(
                    f"| `{_key(row)}` | {format_value(row['baseline'], row['unit'])} | "
                    f"{format_value(row['candidate_value'], row['unit'])} | {change} | "
                    f"{_ci(row['ci_low'], row['ci_high'])} | {_p(row['p_value'])} |"
                )
            lines.append("")
        if hidden:
            lines.append(_hidden_line([f"`{h}`" for h in hidden], len(rows)))
            lines.append("")
        if comparison.tradeoff:
            lines.append(f"**{_md(comparison.tradeoff)}**")
            lines.append("")
        if comparison.decomposition.height:
            lines.append("<details><summary>Where the e2e difference comes from</summary>")
            lines.append("")
            lines.append("| component | baseline mean | candidate mean | Δ mean | Δ p50 |")
            lines.append("|---|---:|---:|---:|---:|")
            for row in comparison.decomposition.iter_rows(named=True):
                lines.append(
                    f"| {row['component']} | {format_value(row['baseline_mean_ms'], 'ms')} | "
                    f"{format_value(row['candidate_mean_ms'], 'ms')} | "
                    f"{_signed(_tidy(row['delta_mean_ms']), 'ms')} | "
                    f"{_signed(_tidy(row['delta_p50_ms']), 'ms')} |"
                )
            lines.append("")
            lines.append("</details>")
            lines.append("")
        lines.append(f"<sub>{_md(_method_line(comparison))}</sub>")
        lines.append("")
        for warning in comparison.warnings:
            lines.append(f"> :warning: {_md(warning)}")
        if comparison.warnings:
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def render_compare(
    comparisons: Sequence[Comparison], fmt: CompareFormat | str, *, verbose: bool = False
) -> str:
    """The comparison in the given output format, as text."""
    fmt = CompareFormat(fmt)
    if fmt is CompareFormat.json:
        return compare_json(comparisons)
    if fmt is CompareFormat.markdown:
        return compare_markdown(comparisons, verbose=verbose)
    return compare_text(comparisons, verbose=verbose)
