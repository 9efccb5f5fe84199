"""One row per run: the runs table (text, Markdown, CSV) and its JSON.

Columns: label, tool, declared rate and concurrency, completed, errored, req/s,
output tok/s, TTFT p50/p99, TPOT p50/p99, ITL p99 (ms), goodput (req/s), SLO attainment;
a terminal's table leaves out what does not fit, and says so.
A run given only as its tool's summary shows the tool's numbers, marked ``*``; a value a
run cannot have is ``n/a``. Rows come sorted by declared load (``Runs``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from servetrace.render._csv import rows_writer
from servetrace.render.fit import fit_columns, left_out_line, plain_lines
from servetrace.render.format import ns_to_ms
from servetrace.render.markdown_text import md_table, md_text
from servetrace.render.summary import render_json
from servetrace.runs.model import Run, Runs
from servetrace.runs.reported import ERRORED_UNTOLD

COLUMNS: tuple[tuple[str, str], ...] = (
    ("label", "run"),
    ("tool", "tool"),
    ("rate", "rate (req/s)"),
    ("concurrency", "concurrency"),
    ("completed", "completed"),
    ("errored", "errored"),
    ("requests_per_s", "req/s"),
    ("output_tokens_per_s", "output tok/s"),
    ("ttft_p50", "TTFT p50"),
    ("ttft_p99", "TTFT p99"),
    ("tpot_p50", "TPOT p50"),
    ("tpot_p99", "TPOT p99"),
    ("itl_p99", "ITL p99"),
    ("goodput_requests_per_s", "goodput/s"),
    ("slo_attainment", "attainment"),
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
    if run.analysis is None:  # the tool's summary: latencies already in ms, no goodput
        told = run.reported or {}
        metrics, throughput = told.get("metrics") or {}, told.get("throughput") or {}
        completed, errored = told.get("completed"), told.get("errored")
        completed = int(completed) if completed is not None else None
        goodput = attainment = None
    else:
        summary = run.analysis.summary
        metrics, throughput = summary.metrics, summary.throughput
        completed = summary.outcomes.get("completed")
        errored = summary.outcomes.get("errored")  # None until servetrace counts errors
        goodput = throughput.get("goodput_requests_per_s")
        attainment = summary.goodput["fraction"] if summary.goodput else None
    for name, stat in _LATENCIES:
        value = (metrics.get(name) or {}).get(stat)
        row[f"{name}_{stat}"] = value if run.analysis is None else ns_to_ms(value)
    row["requests_per_s"] = throughput.get("requests_per_s")
    row["output_tokens_per_s"] = throughput.get("output_tokens_per_s")
    row["completed"], row["errored"] = completed, errored
    row["goodput_requests_per_s"], row["slo_attainment"] = goodput, attainment
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


def _cells(values: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[list[str]]:
    return [[_text(key, row.get(key), row["reported"]) for key in keys] for row in values]


def _footer(runs: Runs, grouped: bool) -> list[str]:
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
    order = "sorted by declared request rate, then concurrency; latencies in ms, percentiles linear"
    lines.append(("grouped by folder, each " if grouped else "") + order)
    return lines


def by_configuration(runs: Runs) -> tuple[list[Run], bool]:
    """The runs grouped by the folder they came from (a sweep's configuration), the
    folders in the order first met, each in the load order ``Runs`` gave them; and
    whether that moved any run."""
    folders: dict[str, list[Run]] = {}
    for run in runs:
        first = run.source.paths[0] if run.source.paths else None
        folders.setdefault(str(first.parent) if first is not None else "", []).append(run)
    ordered = [run for group in folders.values() for run in group]
    return ordered, [r.label for r in ordered] != [r.label for r in runs]


# Columns left out, in this order, when the table is wider than the terminal.
_DROP_ORDER = (
    "tool",
    "errored",
    "tpot_p50",
    "concurrency",
    "ttft_p50",
    "output_tokens_per_s",
    "goodput_requests_per_s",
    "itl_p99",
    "tpot_p99",
)
_HEAD = dict(COLUMNS)


# Why a run given only as its tool's summary has no value in a column.
_REPORTED_NA = {
    "errored": f"unavailable: {ERRORED_UNTOLD}",
    "goodput_requests_per_s": "needs a per-request file",
    "slo_attainment": "needs a per-request file",
}
_NOT_DECLARED = ("rate", "concurrency")


def _why_na(key: str, values: Sequence[dict[str, Any]]) -> str | None:
    """Why ``key`` is n/a in every run of ``values``, when one reason covers them all."""
    if key in _NOT_DECLARED:
        return "not declared"
    if all(v["reported"] for v in values):
        return _REPORTED_NA.get(key, "not in the tool's summary")
    if key in ("goodput_requests_per_s", "slo_attainment"):
        return "needs --goodput targets"
    return None


def na_line(keys: Sequence[str], values: Sequence[dict[str, Any]], lead: str) -> str:
    """``LEAD concurrency (not declared), goodput/s, attainment (needs …)``: the columns,
    each run of them sharing a reason followed by it."""
    parts: list[str] = []
    reasons = [_why_na(k, values) for k in keys]
    for i, key in enumerate(keys):
        last = i + 1 == len(keys) or reasons[i + 1] != reasons[i]
        why = reasons[i]
        head = _HEAD[key].split(" (")[0]  # "rate", not "rate (req/s)", before a reason
        parts.append(head + (f" ({why})" if last and why else ""))
    return lead + ", ".join(parts)


def runs_phrase(runs: Runs) -> str:
    return f"{len(runs)} run{'' if len(runs) == 1 else 's'}"


def _fit(values: Sequence[dict[str, Any]], width: int | None) -> tuple[list[str], list[str]]:
    """The columns shown, and lines that say which were left out and why."""
    keys = [key for key, _ in COLUMNS]
    said = []
    empty = [k for k in keys if k != "label" and all(v.get(k) is None for v in values)]
    if empty:
        keys = [k for k in keys if k not in empty]
        said.append(na_line(empty, values, "n/a in every run, left out: "))
    tools = {v.get("tool") for v in values}
    if len(tools) == 1 and "tool" in keys:
        keys.remove("tool")
        said.append(f"tool: {tools.pop()}")
    if width is None:
        return keys, said
    heads = [_HEAD[k] for k in keys]
    kept, cut = fit_columns(heads, _cells(values, keys), width, [_HEAD[k] for k in _DROP_ORDER])
    if cut:
        said.append(left_out_line(cut, width))
    return [keys[i] for i in kept], said


def render_runs_table(runs: Runs, width: int | None = None) -> str:
    """The runs, one row each, within ``width`` columns when given (a terminal's)."""
    ordered, grouped = by_configuration(runs)
    values = [row_values(run) for run in ordered]
    keys, said = _fit(values, width)
    heads = [_HEAD[k] for k in keys]
    rows = _cells(values, keys)
    right = [i for i, side in enumerate(_align(keys)) if side == "r"]
    out = [runs_phrase(runs), *plain_lines([heads, *rows], right)]
    return "\n".join([*out, *said, *_footer(runs, grouped)]) + "\n"


def _align(keys: Sequence[str]) -> str:
    """Texts to the left, numbers to the right."""
    return "".join("l" if key in ("label", "tool") else "r" for key in keys)


def render_runs_markdown(runs: Runs) -> str:
    ordered, grouped = by_configuration(runs)
    keys = [key for key, _ in COLUMNS]
    out = [f"## {runs_phrase(runs)}", ""]
    values = [row_values(run) for run in ordered]
    cells = [list(map(md_text, row)) for row in _cells(values, keys)]
    out += md_table([_HEAD[k] for k in keys], cells, _align(keys))
    empty = [k for k in keys if k != "label" and all(v.get(k) is None for v in values)]
    said = [na_line(empty, values, "n/a in every run: ")] if empty else []
    out += ["", *(f"- {md_text(line, cell=False)}" for line in [*said, *_footer(runs, grouped)])]
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
