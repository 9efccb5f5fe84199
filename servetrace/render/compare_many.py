"""Several candidates against one baseline: one table, a verdict per candidate.

``compare BASELINE CAND1 CAND2 …`` prints this overview first (then each candidate's
detail): per candidate its workload and load verdicts and how many statistics got
significantly better or worse. The candidate's verdict is ``better`` (some better, none
worse), ``worse`` (some worse, none better), ``mixed``, or ``no significant change``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servetrace.comparison.compare import Comparison
from servetrace.render.fit import plain_lines
from servetrace.render.markdown_text import md_code, md_table, md_text
from servetrace.runs.labels import make_labels


def candidate_verdict(comparison: Comparison) -> dict[str, Any]:
    """Counts of significant rows and the overall verdict of one candidate."""
    rows = comparison.rows
    better = rows.filter(rows["significant"] & (rows["verdict"] == "faster"))
    worse = rows.filter(rows["significant"] & (rows["verdict"] == "slower"))
    if better.height and worse.height:
        verdict = "mixed"
    elif better.height:
        verdict = "better"
    elif worse.height:
        verdict = "worse"
    else:
        verdict = "no significant change"
    keys = lambda frame: [f"{m}.{s}" for m, s in frame.select("metric", "stat").iter_rows()]  # noqa: E731
    # Rows of metrics a side cannot express are neither better, worse nor unchanged.
    gone = rows.filter(
        ~rows["significant"]
        & (
            rows["metric"].is_in(list(comparison.unavailable))
            | rows["stat"].is_in(list(comparison.unavailable))
        )
    ).height
    return {
        "candidate": comparison.candidate_label,
        "verdict": verdict,
        "workload": comparison.workload.verdict,
        "load": comparison.load.verdict if comparison.load is not None else "unknown",
        "better": keys(better),
        "worse": keys(worse),
        "unchanged": rows.height - better.height - worse.height - gone,
        "unavailable": gone,
    }


def _cells(comparisons: Sequence[Comparison]) -> tuple[list[str], list[list[str]]]:
    head = ["candidate", "verdict", "better", "worse", "unchanged", "workload", "load"]
    body = []
    # the shortest path parts that tell the candidates (and the baseline) apart
    names = [comparisons[0].baseline_label, *(c.candidate_label for c in comparisons)]
    short = make_labels([Path(name) for name in names])
    for comparison, name in zip(comparisons, short[1:], strict=True):
        v = candidate_verdict(comparison)
        body.append(
            [
                name,
                v["verdict"],
                str(len(v["better"])),
                str(len(v["worse"])),
                str(v["unchanged"]),
                v["workload"],
                v["load"],
            ]
        )
    return head, body


def overview_text(comparisons: Sequence[Comparison]) -> str:
    head, body = _cells(comparisons)
    lines = plain_lines([head, *body])
    names = [comparisons[0].baseline_label, *(c.candidate_label for c in comparisons)]
    title = f"baseline: {make_labels([Path(n) for n in names])[0]}; {len(comparisons)} candidates"
    return "\n".join([title, *lines]) + "\n"


def overview_markdown(comparisons: Sequence[Comparison]) -> str:
    head, body = _cells(comparisons)
    names = [comparisons[0].baseline_label, *(c.candidate_label for c in comparisons)]
    lines = [
        f"### servetrace compare: {len(comparisons)} candidates vs "
        f"{md_code(make_labels([Path(n) for n in names])[0])}",
        "",
        *md_table(head, [list(map(md_text, row)) for row in body], "l" * len(head)),
        "",
    ]
    return "\n".join(lines) + "\n"
