"""A comparison as GitHub-flavoured Markdown, ready for a pull-request comment."""

from __future__ import annotations

from collections.abc import Sequence

from servetrace.comparison.compare import Comparison
from servetrace.render.compare_words import (
    change_text,
    ci_text,
    comparison_warnings,
    display_decomposition,
    errored_line,
    headline_text,
    hidden_line,
    method_line,
    p_text,
    row_key,
    shown_rows,
    tidy,
    unavailable_line,
)
from servetrace.render.format import format_value, signed
from servetrace.render.markdown_text import md_code, md_text
from servetrace.render.workload import load_message, workload_message


def compare_markdown(comparisons: Sequence[Comparison], *, verbose: bool = False) -> str:
    """GitHub-flavoured Markdown, ready for a pull-request comment."""
    lines: list[str] = []
    for comparison in comparisons:
        lines.append(
            f"### servetrace compare: {md_code(comparison.candidate_label)} vs "
            f"{md_code(comparison.baseline_label)}"
        )
        lines.append("")
        marker = "" if comparison.workload.paired else ":warning: "
        lines.append(f"**Workload:** {marker}{md_text(workload_message(comparison.workload))}")
        lines.append("")
        if comparison.load is not None and comparison.load.verdict != "unknown":
            mark = ":warning: " if comparison.load.verdict == "differs" else ""
            lines.append(f"**Load:** {mark}{md_text(load_message(comparison.load))}")
            lines.append("")
        rows, shown, hidden = shown_rows(comparison, verbose)
        if shown:
            ci = f"{comparison.confidence:.0%} CI"
            lines.append(f"| metric | baseline | candidate | change | {ci} | p |")
            lines.append("|---|---:|---:|---|---|---:|")
            for row in shown:
                change = change_text(row)
                if row["significant"]:
                    change = f"**{change}**"
                lines.append(
                    f"| `{row_key(row)}` | {format_value(row['baseline'], row['unit'])} | "
                    f"{format_value(row['candidate_value'], row['unit'])} | {change} | "
                    f"{ci_text(row['ci_low'], row['ci_high'])} | {p_text(row['p_value'])} |"
                )
            lines.append("")
        if hidden:
            lines.append(hidden_line([f"`{h}`" for h in hidden], len(rows)))
            lines.append("")
        if comparison.unavailable:
            lines.append(md_text(unavailable_line(comparison)))
            lines.append("")
        errored = errored_line(comparison)
        if errored:
            lines.append(md_text(errored))
            lines.append("")
        headline = headline_text(comparison)
        if headline:
            lines.append(f"**{md_text(headline)}**")
            lines.append("")
        if comparison.decomposition.height:
            lines.append("<details><summary>Where the e2e difference comes from</summary>")
            lines.append("")
            lines.append("| component | baseline mean | candidate mean | Δ mean | Δ p50 |")
            lines.append("|---|---:|---:|---:|---:|")
            for row in display_decomposition(comparison):
                lines.append(
                    f"| {row['component']} | {format_value(row['baseline_mean_ms'], 'ms')} | "
                    f"{format_value(row['candidate_mean_ms'], 'ms')} | "
                    f"{signed(tidy(row['delta_mean_ms']), 'ms')} | "
                    f"{signed(tidy(row['delta_p50_ms']), 'ms')} |"
                )
            lines.append("")
            lines.append("</details>")
            lines.append("")
        if comparison.stalls is not None:
            from servetrace.render.compare_stalls import stalls_markdown

            lines += stalls_markdown(comparison.stalls)
        lines.append(f"<sub>{md_text(method_line(comparison))}</sub>")
        lines.append("")
        warnings = comparison_warnings(comparison)
        for warning in warnings:
            lines.append(f"> :warning: {md_text(warning)}")
        if warnings:
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
