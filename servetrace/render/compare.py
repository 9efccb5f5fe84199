"""Render comparisons as a Rich table, JSON or Markdown (pure: returns text, never prints).

Following pyperf, the baseline is the reference, a change reads "1.14x slower", and rows
without a significant change collapse into one line unless ``verbose``. Following
hyperfine, the JSON carries everything (method, seed, every row) and exporters are
pure functions of the result. Units and words come from ``compare_words``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from servetrace.comparison.compare import Comparison
from servetrace.render._json import VERSIONS, clean
from servetrace.render.compare_many import candidate_verdict, overview_markdown, overview_text
from servetrace.render.compare_markdown import compare_markdown
from servetrace.render.compare_words import (
    change_text,
    ci_text,
    comparison_notes,
    comparison_warnings,
    display_buckets,
    display_decomposition,
    display_rows,
    errored_line,
    headline_text,
    hidden_line,
    method_dict,
    method_line,
    negligible,
    p_text,
    shown_rows,
    tidy,
    tradeoff_text,
    unavailable_line,
)
from servetrace.render.format import format_value, plain_text, signed
from servetrace.render.formats import CompareFormat
from servetrace.render.summary import render_json
from servetrace.render.workload import load_dict, load_message, workload_dict, workload_message


# --------------------------------------------------------------------------- JSON
def compare_dict(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    """Everything the comparison knows, as plain data (rows follow the JSON contract)."""
    if not comparisons:
        raise ValueError("nothing to render: no comparison")
    first = comparisons[0]
    return clean(
        {
            **VERSIONS,
            "baseline": first.baseline_label,
            "candidates": [c.candidate_label for c in comparisons],
            "seed": first.seed,
            "resamples": first.resamples,
            "method": method_dict(first),
            "workload": {c.candidate_label: workload_dict(c.workload) for c in comparisons},
            "load": {c.candidate_label: load_dict(c.load) for c in comparisons},
            "verdicts": [candidate_verdict(c) for c in comparisons],
            "rows": [row for c in comparisons for row in display_rows(c)],
            "unavailable": {c.candidate_label: dict(c.unavailable) for c in comparisons},
            "errors": {
                c.candidate_label: {"baseline": c.errors[0], "candidate": c.errors[1]}
                for c in comparisons
            },
            "tests": [row for c in comparisons for row in c.tests.iter_rows(named=True)],
            "decomposition": {c.candidate_label: display_decomposition(c) for c in comparisons},
            "buckets": {c.candidate_label: display_buckets(c) for c in comparisons},
            "tradeoffs": {
                c.candidate_label: tradeoff_text(c.tradeoff, c.candidate_label) for c in comparisons
            },
            "headlines": {c.candidate_label: headline_text(c) for c in comparisons},
            "warnings": [w for c in comparisons for w in comparison_warnings(c)],
            "notes": [n for c in comparisons for n in comparison_notes(c)],
            # only with --steps, so every other comparison's JSON stays as it was
            **_stalls_key(comparisons),
        }
    )


def _stalls_key(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    if all(c.stalls is None for c in comparisons):
        return {}
    from servetrace.render.compare_stalls import stalls_compare_dict

    return {
        "stalls": {
            c.candidate_label: None if c.stalls is None else stalls_compare_dict(c.stalls)
            for c in comparisons
        }
    }


def compare_json(comparisons: Sequence[Comparison]) -> str:
    """Stable JSON (keys in a fixed order, two-space indent, no NaN)."""
    return render_json(compare_dict(comparisons)) + "\n"


# --------------------------------------------------------------------------- table
def _table(heads: Sequence[str], align: str) -> Table:
    """A borderless table with bold heads; ``align`` has each column's side (l or r)."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for head, side in zip(heads, align, strict=True):
        table.add_column(head, justify="right" if side == "r" else "left")
    return table


def _results_table(comparison: Comparison, verbose: bool) -> tuple[Table | None, list[str]]:
    ci = f"{comparison.confidence:.0%} CI"
    heads = ("metric", "stat", "baseline", "candidate", "change", ci, "p")
    table = _table(heads, "llrrllr")
    _, shown, hidden = shown_rows(comparison, verbose)
    for row in shown:
        style = None
        if row["significant"]:
            style = "red" if row["verdict"] == "slower" else "green"
        table.add_row(
            row["metric"],
            row["stat"],
            format_value(row["baseline"], row["unit"]),
            format_value(row["candidate_value"], row["unit"]),
            Text(change_text(row), style=style or ""),
            ci_text(row["ci_low"], row["ci_high"]),
            p_text(row["p_value"]),
        )
    return (table if table.row_count else None), hidden


def _decomposition_table(comparison: Comparison) -> Table:
    heads = ("component", "baseline mean", "candidate mean", "delta mean", "delta p50")
    table = _table(heads, "lrrrr")
    for row in display_decomposition(comparison):
        if (
            row["component"] == "residual"
            and negligible(row["delta_mean_ms"])
            and negligible(row["delta_p50_ms"])
        ):
            continue
        name = row["component"]
        if name == "residual":
            name = "residual (p50s do not add up)"
        table.add_row(
            name,
            format_value(row["baseline_mean_ms"], "ms"),
            format_value(row["candidate_mean_ms"], "ms"),
            signed(tidy(row["delta_mean_ms"]), "ms"),
            signed(tidy(row["delta_p50_ms"]), "ms"),
        )
    return table


def _buckets_table(comparison: Comparison) -> Table | None:
    buckets = display_buckets(comparison)
    if not buckets:
        return None
    columns = ("delta_ttft_ms", "delta_itl_ms", "delta_e2e_ms")
    deltas = ["Δ" + column.removeprefix("delta_").removesuffix("_ms") for column in columns]
    table = _table(["length bucket", "requests", *deltas, "e2e faster"], "lrrrrr")
    for row in buckets:
        label = f"{row['dimension'].removesuffix('_tokens')} {row['bucket']}"
        cells = [label, str(row["requests"])]
        cells += [signed(row[c], "ms") for c in columns]
        share = row["faster_fraction"]
        cells.append("n/a" if share is None else f"{share:.0%}")
        table.add_row(*cells)
    return table


def _tests_table(comparison: Comparison) -> Table:
    table = _table(("metric", "test", "on", "n", "p"), "lllrr")
    for row in comparison.tests.iter_rows(named=True):
        n = f"{row['n_baseline']}/{row['n_candidate']}"
        table.add_row(row["metric"], row["test"], row["based_on"], n, p_text(row["p_value"]))
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
        workload = (
            workload_message(comparison.workload),
            "" if comparison.workload.paired else "yellow",
        )
        parts.append(Text.assemble(("workload: ", "bold"), workload))
        if comparison.load is not None and comparison.load.verdict != "unknown":
            loud = "bold red" if comparison.load.verdict == "differs" else ""
            parts.append(Text.assemble(("load: ", "bold"), (load_message(comparison.load), loud)))
        table, hidden = _results_table(comparison, verbose)
        parts += [Text(""), *([table] if table is not None else [])]
        if hidden:
            parts.append(Text(hidden_line(hidden, comparison.rows.height)))
        if comparison.unavailable:
            parts.append(Text(unavailable_line(comparison)))
        errored = errored_line(comparison)
        if errored:
            parts.append(Text(errored))
        headline = headline_text(comparison)
        if headline:
            parts += [Text(""), Text(headline, style="bold")]
        if comparison.decomposition.height:
            who = "paired requests" if comparison.workload.paired else "completed requests"
            title = f"Where the e2e difference comes from ({who}; mean deltas add up, p50 deltas "
            parts += _titled(title + "do not):", _decomposition_table(comparison))
        buckets = _buckets_table(comparison)
        if buckets is not None:
            title = "Who gained or lost (mean per-request delta, candidate - baseline, by "
            parts += _titled(title + "baseline length quartile):", buckets)
        if comparison.stalls is not None:
            from servetrace.render.compare_stalls import stalls_lines, stalls_table

            title, line = stalls_lines(comparison.stalls)
            parts += _titled(title + ":", Text(line), stalls_table(comparison.stalls))
        if verbose and comparison.tests.height:
            title = "Distribution tests (rank tests of the whole distribution):"
            parts += _titled(title, _tests_table(comparison))
        parts.append(Text(""))
        parts.append(Text("method: " + method_line(comparison), style="dim"))
        for note in comparison_notes(comparison):
            parts.append(Text("note: " + note, style="dim"))
        for warning in comparison_warnings(comparison):
            parts.append(Text("warning: " + warning, style="yellow"))
    return Group(*parts)


def _titled(title: str, *body: RenderableType) -> list[RenderableType]:
    """A block of the table format: a blank line, its bold title, then its body."""
    return [Text(""), Text(title, style="bold"), *body]


def compare_text(
    comparisons: Sequence[Comparison], *, verbose: bool = False, width: int = 110
) -> str:
    """The table format as plain text (no colour)."""
    return plain_text(compare_table(comparisons, verbose=verbose), width, soft_wrap=False)


def render_compare(
    comparisons: Sequence[Comparison], fmt: CompareFormat | str, *, verbose: bool = False
) -> str:
    """The comparison in the given output format, as text."""
    fmt = CompareFormat(fmt)
    if fmt is CompareFormat.json:
        return compare_json(comparisons)
    many = len(comparisons) > 1
    if fmt is CompareFormat.markdown:
        head = overview_markdown(comparisons) if many else ""
        return head + compare_markdown(comparisons, verbose=verbose)
    head = overview_text(comparisons) + "\n" if many else ""
    return head + compare_text(comparisons, verbose=verbose)
