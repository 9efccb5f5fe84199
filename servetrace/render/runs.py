"""One row per run: the runs table (text, Markdown, CSV) and its JSON.

Columns: label, tool, declared rate and concurrency, completed, errored, req/s,
output tok/s, TTFT p50/p99, TPOT p50/p99, ITL p99 (ms), goodput (req/s), SLO attainment.
A run given only as its tool's summary shows the tool's numbers, marked ``*``; a value a
run cannot have is ``n/a``. Rows come sorted by declared load (``Runs``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from servetrace.render._csv import rows_writer
from servetrace.render.markdown_text import md_text
from servetrace.render.summary import render_json
from servetrace.runs.model import Run, Runs
from servetrace.units import NS_PER_MS

COLUMNS: tuple[tuple[str, str], ...] = (
    ("label", "run"),
    ("tool", "tool"),
    ("rate", "rate (req/s)"),
    ("concurrency", "concurrency"),
    ("completed", "completed"),
    ("errored", "errored"),
    ("requests_per_s", "req/s"),
    ("output_tokens_per_s", "output tok/s"),
    ("ttft_p50", "TTFT p50 (ms)"),
    ("ttft_p99", "TTFT p99 (ms)"),
    ("tpot_p50", "TPOT p50 (ms)"),
    ("tpot_p99", "TPOT p99 (ms)"),
    ("itl_p99", "ITL p99 (ms)"),
    ("goodput_requests_per_s", "goodput (req/s)"),
    ("slo_attainment", "SLO attainment"),
)
_LATENCIES = (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99"), ("itl", "p99"))
REPORTED_MARK = "*"


def row_values(run: Run) -> dict[str, Any]:
    """The row of one run, in display units (ms, req/s, tok/s); None when unavailable."""
    declared = run.declared
    row: dict[str, Any] = {
        "label": run.label,
        "tool": declared.get("tool"),
        "rate": declared.get("request_rate_per_s"),
        "concurrency": declared.get("max_concurrency"),
        "reported": run.analysis is None,
    }
    if run.analysis is None:
        reported = run.reported or {}
        metrics = reported.get("metrics") or {}
        for name, stat in _LATENCIES:
            row[f"{name}_{stat}"] = (metrics.get(name) or {}).get(stat)
        throughput = reported.get("throughput") or {}
        row["requests_per_s"] = throughput.get("requests_per_s")
        row["output_tokens_per_s"] = throughput.get("output_tokens_per_s")
        completed = reported.get("completed")
        row["completed"] = int(completed) if completed is not None else None
        row["errored"] = None
        row["goodput_requests_per_s"] = None
        row["slo_attainment"] = None
        return row
    summary = run.analysis.summary
    for name, stat in _LATENCIES:
        value = (summary.metrics.get(name) or {}).get(stat)
        row[f"{name}_{stat}"] = value / NS_PER_MS if value is not None else None
    row["requests_per_s"] = summary.throughput.get("requests_per_s")
    row["output_tokens_per_s"] = summary.throughput.get("output_tokens_per_s")
    row["completed"] = summary.outcomes.get("completed")
    row["errored"] = summary.outcomes.get("errored")  # None until servetrace counts errors
    row["goodput_requests_per_s"] = summary.throughput.get("goodput_requests_per_s")
    row["slo_attainment"] = summary.goodput["fraction"] if summary.goodput else None
    return row


def _text(key: str, value: Any, reported: bool) -> str:
    if value is None:
        return "n/a"
    if key in ("label", "tool"):
        return str(value)
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if key == "slo_attainment":
        text = f"{100 * value:.1f}%"
    elif isinstance(value, int):
        text = f"{value:,}"
    elif key in ("rate", "concurrency"):
        text = f"{value:g}"
    elif abs(value) >= 100:
        text = f"{value:,.0f}"
    else:
        text = f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    numeric = key not in ("rate", "concurrency", "completed")
    return text + (REPORTED_MARK if reported and numeric else "")


def _cells(runs: Sequence[Run]) -> list[list[str]]:
    rows = []
    for run in runs:
        values = row_values(run)
        rows.append([_text(key, values.get(key), values["reported"]) for key, _ in COLUMNS])
    return rows


def _footer(runs: Runs) -> list[str]:
    lines = []
    if any(run.analysis is None for run in runs):
        lines.append(
            f"{REPORTED_MARK} reported by the tool's own summary (no per-request file: "
            "no per-request statistics)"
        )
    if any(
        run.analysis is not None and run.analysis.summary.window_source == "declared"
        for run in runs
    ):
        lines.append(
            "req/s and tok/s of runs without send times are over the run's declared duration"
        )
    if all(run.analysis is None or "errored" not in run.analysis.summary.outcomes for run in runs):
        lines.append("errored: n/a (failed requests are not told apart from cancelled ones yet)")
    lines.append("sorted by declared request rate, then concurrency; percentiles: linear")
    return lines


def render_runs_table(runs: Runs) -> str:
    heads = [head for _, head in COLUMNS]
    rows = _cells(runs)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [f"{len(runs)} runs", line(heads), *(line(r) for r in rows), *_footer(runs)]
    return "\n".join(out) + "\n"


def render_runs_markdown(runs: Runs) -> str:
    heads = [head for _, head in COLUMNS]
    out = [f"## {len(runs)} runs", ""]
    out.append("| " + " | ".join(heads) + " |")
    out.append("|" + "|".join("---" if i < 2 else "---:" for i in range(len(heads))) + "|")
    out += ["| " + " | ".join(map(md_text, r)) + " |" for r in _cells(runs)]
    out += ["", *(f"- {md_text(line, cell=False)}" for line in _footer(runs))]
    return "\n".join(out) + "\n"


def render_runs_csv(runs: Runs) -> str:
    """Machine-readable: raw numbers (ms, req/s, tok/s, attainment as a fraction)."""
    buffer = io.StringIO()
    writer = rows_writer(buffer)
    keys = [key for key, _ in COLUMNS]
    writer.writerow([*keys, "reported"])
    for run in runs:
        values = row_values(run)
        cells = []
        for key in keys:
            value = values.get(key)
            if isinstance(value, float) and math.isinf(value):
                value = "inf"
            cells.append("" if value is None else value)
        writer.writerow([*cells, str(values["reported"]).lower()])
    return buffer.getvalue()


def render_runs_json(runs: Runs, naming: str = "servetrace") -> str:
    from servetrace.render.results_json import runs_dict

    return render_json(runs_dict(runs, naming))
