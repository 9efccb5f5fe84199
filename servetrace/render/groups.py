"""``--by`` with more than a handful of groups: one table, a row per group.

A few groups (policies A and B) are read side by side as full summaries; hundreds of
stacked tables are read by nobody, so past ``HANDFUL`` values the table and Markdown
reports show each group's headline figures in one row, and point to ``--format json`` or
``csv`` for every statistic of every group.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich import box
from rich.table import Table
from rich.text import Text

from servetrace.analysis.summary import Summary
from servetrace.render.format import table_number
from servetrace.render.markdown_text import md_table, md_text
from servetrace.render.naming import display_name
from servetrace.units import NS_PER_MS

HANDFUL = 5
# (metric, statistic) columns of the per-group row, in ms.
COLUMNS = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("itl", "p50"),
    ("itl", "p99"),
    ("tpot", "p50"),
    ("e2e", "p99"),
)


def one_row_each(groups: Mapping[object, Summary]) -> bool:
    return len(groups) > HANDFUL


def _header(naming: str, sep: str = " ") -> list[str]:
    latency = [f"{display_name(m, naming)}{sep}{s}" for m, s in COLUMNS]
    return [f"requests{sep}(done)", *latency, "req/s"]


def _cells(summary: Summary) -> list[str]:
    cells = [f"{summary.accounting.requests:,} ({summary.outcomes.get('completed', 0):,})"]
    for metric, stat in COLUMNS:
        value = summary.metrics[metric].get(stat)
        cells.append("–" if value is None else table_number(float(value) / NS_PER_MS))
    rate = summary.throughput.get("requests_per_s")
    cells.append("–" if rate is None else table_number(rate))
    return cells


def footer(groups: Mapping[object, Summary], by: str) -> str:
    return (
        f"{len(groups):,} values of {by}, latencies in ms (– none completed); every "
        "statistic of every group: --format json or csv"
    )


def groups_table(groups: Mapping[object, Summary], by: str, naming: str) -> Table:
    # No vertical rules: eleven columns of numbers fit 80 columns without truncating one.
    table = Table(
        title=Text(f"by {by}", style="table.title"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column(Text(by), style="bold", overflow="fold", min_width=min(len(by), 12))
    for name in _header(naming, "\n"):
        table.add_column(name, justify="right", no_wrap=True)
    for value, summary in groups.items():
        table.add_row(Text(str(value)), *_cells(summary))
    return table


def groups_markdown(groups: Mapping[object, Summary], by: str, naming: str) -> str:
    head = [md_text(h) for h in [by, *_header(naming)]]
    rows = [[md_text(str(value)), *_cells(summary)] for value, summary in groups.items()]
    lines = [f"\n### by {md_text(by, cell=False)}\n", *md_table(head, rows, "l" * len(head))]
    return "\n".join(lines) + f"\n\n{footer(groups, by)}\n"
