"""``compare --steps``: where each run's ITL stalls come from, side by side (the JSON
``stalls`` key, a Rich table, a Markdown table). Shares are fractions in the JSON and
percentages here; a change is candidate − baseline in percentage points."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from servetrace.analysis.stall_causes import CAUSES
from servetrace.comparison.stall_shift import GROUPS, StallShift, StallSide
from servetrace.render.markdown_text import md_text
from servetrace.units import NS_PER_MS

TITLE = "Where ITL stalls come from (share of the excess over the usual decode step)"
GROUP_WORDS = {"overall": "all stalled gaps", "tail": "gaps ≥ each run's ITL p99"}


def _side_dict(side: StallSide) -> dict[str, Any]:
    out: dict[str, Any] = {"steps_file": side.steps_file, "unavailable": side.unavailable}
    for group in GROUPS:
        raw = getattr(side, group)
        if not raw:
            out[group] = None
            continue
        shares = {f"{c}_share": raw[f"{c}_share"] for c in CAUSES}
        block: dict[str, Any] = {"gaps": raw["gaps"], "excess_ms": raw["excess_ns"] / NS_PER_MS}
        if group == "tail":
            threshold = raw["threshold_ns"]
            block["threshold_ms"] = None if threshold is None else threshold / NS_PER_MS
            block["tail_gaps"] = raw["tail_gaps"]
        out[group] = {**block, **shares}
    return out


def stalls_compare_dict(shift: StallShift) -> dict[str, Any]:
    """Both sides' shares and the change of each (``<cause>_share``, points of share / 100)."""
    return {
        "baseline": _side_dict(shift.baseline),
        "candidate": _side_dict(shift.candidate),
        "change": {
            group: {f"{c}_share": shift.change(group, c) for c in CAUSES} for group in GROUPS
        },
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _pp(value: float | None) -> str:
    if value is None:
        return "n/a"
    points = round(value * 100, 1)
    return "±0.0 pp" if points == 0 else f"{points:+.1f} pp"


def _rows(shift: StallShift) -> list[list[str]]:
    rows = []
    for group in GROUPS:
        a, b = getattr(shift.baseline, group), getattr(shift.candidate, group)
        for cause in CAUSES:
            key = f"{cause}_share"
            rows.append(
                [
                    GROUP_WORDS[group],
                    cause.replace("_", " "),
                    _pct(a.get(key)),
                    _pct(b.get(key)),
                    _pp(shift.change(group, cause)),
                ]
            )
    return rows


def _gaps_line(shift: StallShift) -> str:
    """A line per side: its stalled gaps and excess, its tail; or why it has none."""

    def words(side: StallSide, who: str) -> str:
        if side.unavailable is not None:
            return f"{who}: unavailable ({side.unavailable})"
        tail = side.tail
        threshold = tail["threshold_ns"]
        p99 = "no ITL p99" if threshold is None else f"p99 {threshold / NS_PER_MS:.2f} ms"
        return (
            f"{who}: {side.overall['gaps']:,} stalled gaps, "
            f"{side.overall['excess_ns'] / NS_PER_MS:,.1f} ms excess; tail ({p99}) "
            f"{tail['tail_gaps']:,} gaps"
        )

    return words(shift.baseline, "baseline") + "\n" + words(shift.candidate, "candidate")


HEADER = ("gaps", "cause", "baseline", "candidate", "change")


def stalls_table(shift: StallShift) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for i, name in enumerate(HEADER):
        table.add_column(name, justify="left" if i < 2 else "right")
    for row in _rows(shift):
        table.add_row(*row)
    return table


def stalls_lines(shift: StallShift) -> tuple[str, str]:
    """The title and a line per side: its gaps, or why it is unavailable."""
    return TITLE, _gaps_line(shift)


def stalls_markdown(shift: StallShift) -> list[str]:
    said = [f"- {md_text(line)}" for line in _gaps_line(shift).split("\n")]
    lines = [f"<details><summary>{TITLE}</summary>", "", *said, ""]
    lines.append("| gaps | cause | baseline | candidate | change |")
    lines.append("|---|---|---:|---:|---:|")
    lines += ["| " + " | ".join(row) + " |" for row in _rows(shift)]
    return [*lines, "", "</details>", ""]
