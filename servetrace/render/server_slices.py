"""The server's per-slice figures beside the trace's (``analyze --slice --server-metrics``):
the JSON key ``server_slices``, a fixed-width table and a Markdown table under the server
section, and extra columns of the per-slice CSV."""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from servetrace.analysis.server_findings import ServerComparison
from servetrace.analysis.server_slices import COLUMNS
from servetrace.render._json import clean
from servetrace.render.format import table_number
from servetrace.units import NS_PER_S

HEADERS = {
    "scrapes": "scrapes",
    "server_waiting_mean": "waiting",
    "trace_queued_mean": "queued",
    "server_running_mean": "running",
    "trace_running_mean": "running",
    "server_successes": "successes",
    "trace_completions": "completed",
    "server_preemptions": "preempted",
    "trace_preemptions": "preempted",
    "server_prompt_tokens": "prompt tok",
    "trace_prompt_tokens": "prompt tok",
    "server_generation_tokens": "gen tok",
    "trace_output_tokens": "output tok",
}
TITLE = (
    "per slice, server (s) beside trace (t): gauges' mean over the slice's scrapes and the "
    "trace's level at those instants; counters' increase over the scrape intervals ending "
    "in the slice and the trace's count of the same work in it"
)


def server_slices_dict(found: ServerComparison, origin_ns: int) -> dict[str, Any] | None:
    """``{"rows": [{start_s, end_s, scrapes, server_…, trace_…}], "unavailable": {…}}``."""
    if found.slices is None:
        return None
    frame = found.slices.select(
        ((pl.col("start_ns") - origin_ns) / NS_PER_S).alias("start_s"),
        ((pl.col("end_ns") - origin_ns) / NS_PER_S).alias("end_s"),
        *COLUMNS,
    )
    rows = [{k: clean(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]
    return {"rows": rows, "unavailable": dict(found.slices_unavailable)}


def _cell(row: dict[str, Any], column: str) -> str:
    value = row[column]
    # A counter's increase in whole units reads as a count (12, not 12.00).
    counted = not column.endswith("_mean") and column not in ("start_s", "end_s")
    if counted and isinstance(value, float) and value.is_integer():
        return table_number(int(value))
    return table_number(value)


def _shown(doc: dict[str, Any]) -> list[str]:
    return [c for c in COLUMNS if c not in doc["unavailable"]]


def _head(column: str) -> str:
    side = "" if column == "scrapes" else (" (s)" if column.startswith("server_") else " (t)")
    return HEADERS[column] + side


def _missing(doc: dict[str, Any]) -> list[str]:
    return [f"unavailable: {c} ({why})" for c, why in doc["unavailable"].items()]


def server_slice_table(doc: dict[str, Any]) -> list[str]:
    columns = ["start_s", "end_s", *_shown(doc)]
    heads = ["start (s)", "end (s)", *[_head(c) for c in columns[2:]]]
    cells = [heads] + [[_cell(row, c) for c in columns] for row in doc["rows"]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    text = [TITLE]
    text += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    return text + _missing(doc)


def server_slice_markdown(doc: dict[str, Any]) -> str:
    out = io.StringIO()
    columns = ["start_s", "end_s", *_shown(doc)]
    heads = ["start (s)", "end (s)", *[_head(c) for c in columns[2:]]]
    out.write(f"\n#### server per slice\n\n{TITLE[0].upper()}{TITLE[1:]}.\n\n")
    out.write("| " + " | ".join(heads) + " |\n" + "|" + "---:|" * len(heads) + "\n")
    for row in doc["rows"]:
        out.write("| " + " | ".join(_cell(row, c) for c in columns) + " |\n")
    out.write("".join(f"\n- {line}" for line in _missing(doc)))
    return out.getvalue() + ("\n" if doc["unavailable"] else "")


def with_server_slices(
    rows: list[dict[str, Any]], doc: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The per-slice CSV's rows with the server's columns after the trace's."""
    if doc is None:
        return rows
    return [
        {**row, **{c: mine[c] for c in COLUMNS}}
        for row, mine in zip(rows, doc["rows"], strict=True)
    ]
