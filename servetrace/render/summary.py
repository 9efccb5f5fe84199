"""Render an analysis summary as a Rich table, JSON, Markdown or CSV (never computes).

Times arrive in ns and leave in ms; every column and JSON key names its unit.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from servetrace.analysis.lifecycle_rules import RULES
from servetrace.analysis.metric_names import LATENCY_METRICS
from servetrace.analysis.summary import Summary
from servetrace.analysis.unavailable import unavailable
from servetrace.render._csv import rows_writer
from servetrace.render._json import VERSIONS, clean
from servetrace.render.distribution import STAT_KEYS, counts_dict, distribution_ms
from servetrace.render.format import counted, table_number
from servetrace.render.formula import formula_dict, formula_lines
from servetrace.render.markdown_text import md_table, md_text
from servetrace.render.naming import display_name
from servetrace.render.outcomes import (
    PARTIAL_OUTPUT_DROPPED,
    accounting_line,
    delivered_phrase,
    errored_lines,
    outcome_csv_rows,
    outcome_keys,
    output_rate_part,
    unavailable_caption,
)
from servetrace.render.survival import ci95_dict, survival_dict
from servetrace.units import NS_PER_MS

TABLE_STATS = ("count", "mean", "p50", "p90", "p99", "max")
DECOMPOSITION = ("queue_wait", "prefill", "decode")
DECOMPOSITION_STYLES = {
    "queue_wait": "red",
    "prefill": "yellow",
    "ttft": "yellow",
    "decode": "green",
}


def summary_dict(summary: Summary, naming: str = "servetrace") -> dict[str, Any]:
    """The body of the JSON report for one (group of a) trace."""
    metrics = {
        display_name(spec.name, naming): distribution_ms(summary.metrics[spec.name])
        for spec in LATENCY_METRICS
    }
    for spec in LATENCY_METRICS:  # the percentile intervals ride along (add-only)
        metrics[display_name(spec.name, naming)]["ci95"] = ci95_dict(
            summary.intervals.get(spec.name)
        )
    cancelled = dict(summary.cancelled)
    cancelled["time_to_cancel"] = distribution_ms(cancelled.pop("time_to_cancel_ns"))
    # Why cancelled_in.unknown and a null output_tokens_delivered are unknown (else null).
    cancelled["unknown_reason"] = (
        PARTIAL_OUTPUT_DROPPED if summary.cancelled_in.get("unknown") else None
    )
    in_flight = dict(summary.in_flight)
    in_flight["age_at_end"] = distribution_ms(in_flight.pop("age_at_end_ns"), "s")
    return {
        "source": summary.source,
        "arrival_known": summary.arrival_known,
        "ticks_available": summary.ticks_available,
        "accounting": vars(summary.accounting),
        "outcomes": summary.outcomes,
        "cancelled_in": summary.cancelled_in,
        "violations": summary.violations,
        "metrics": metrics,
        "percentile_method": "linear interpolation (numpy default)",
        "tokens": {k: counts_dict(v, "tokens") for k, v in summary.tokens.items()},
        "throughput": {
            "unit": {
                "window_s": "s",
                "requests_per_s": "req/s",
                "output_tokens_per_s": "tok/s",
                "total_tokens_per_s": "tok/s",
                "goodput_requests_per_s": "req/s",
            },
            **{k: clean(v) for k, v in summary.throughput.items()},
            "window_source": summary.window_source
            or ("trace" if summary.throughput.get("window_s") is not None else None),
        },
        "goodput": summary.goodput,
        "concurrency": {
            "unit": "requests",
            **{k: clean(v) for k, v in summary.concurrency.items()},
        },
        "formula": formula_dict(summary.formula),
        "cancelled": cancelled,
        "in_flight": in_flight,
        "leaked_state": summary.leaked_state,
        "preemptions": summary.preemptions,
        "warnings": list(summary.warnings),
        "survival": survival_dict(summary.survival, naming),
        **outcome_keys(summary),
    }


def report_dict(
    summary: Summary,
    inputs: tuple[str, ...],
    groups: Mapping[object, Summary] | None = None,
    by: str | None = None,
    naming: str = "servetrace",
) -> dict[str, Any]:
    report: dict[str, Any] = {
        **VERSIONS,
        "inputs": list(inputs),
        "naming": naming,
        **summary_dict(summary, naming),
    }
    if groups is not None:
        report["by"] = {
            "column": by,
            "groups": [
                {"value": clean(value), **summary_dict(s, naming)} for value, s in groups.items()
            ],
        }
    return report


def render_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, default=clean, ensure_ascii=False)


# ---------------------------------------------------------------- human-readable forms


def _fmt(value: Any, digits: int = 2) -> str:
    return table_number(clean(value), digits)


def _metric_rows(summary: Summary, naming: str) -> list[list[str]]:
    rows = []
    hidden = unavailable(summary)  # rows of metrics the trace cannot express say nothing
    for spec in LATENCY_METRICS:
        # the shown statistics only (--by renders hundreds of tables)
        stats = distribution_ms(summary.metrics[spec.name], keys=TABLE_STATS)
        if not stats["count"] or spec.name in hidden:
            continue
        cells = [table_number(stats[key]) for key in TABLE_STATS]
        rows.append([display_name(spec.name, naming), *cells])
    return rows


def _decomposition_text(summary: Summary) -> Text:
    """queue → prefill → decode as shares of the mean response time, with a bar.

    A client-side trace has no admission: its response splits into TTFT → decode.
    """
    metrics = summary.metrics
    names = DECOMPOSITION if metrics["queue_wait"]["count"] else ("ttft", "decode")
    means = {n: metrics[n]["mean"] for n in names}
    known = [(n, float(v)) for n, v in means.items() if v is not None]
    total = sum(v for _, v in known)
    if not known or total <= 0:
        return Text("decomposition unavailable (no completed request with tick times)")
    text, bar = Text("mean response = "), Text()
    for i, (name, value) in enumerate(known):
        share = value / total
        if i:
            text.append(" → ")
        style = DECOMPOSITION_STYLES[name]
        text.append(f"{name} {value / NS_PER_MS:,.1f} ms ({share:.0%})", style=style)
        bar.append("█" * round(share * 40), style=style)
    return Text.assemble(text, "\n", bar)


def _lines(summary: Summary) -> list[str]:
    """Short facts under the table: throughput, concurrency, cancellations, formula."""
    lines: list[str] = []
    t = summary.throughput
    if t["window_s"]:
        line = (
            f"throughput over {_fmt(t['window_s'])} s"
            + (" (declared duration)" if summary.window_source == "declared" else "")
            + f": {t['requests_per_s']:.2f} req/s, "
            + output_rate_part(summary)
        )
        if t["total_tokens_per_s"] is not None:
            line += f", {t['total_tokens_per_s']:,.0f} total tok/s"
        lines.append(line)
    if summary.goodput:
        g = summary.goodput
        rate = t.get("goodput_requests_per_s")
        lines.append(
            f"goodput ({' and '.join(g['targets'])}): {g['requests_met']:,} of "
            f"{g['requests_completed']:,} completed met every target "
            f"({_fmt((g['fraction'] or 0) * 100, 1)}%)"
            + (f", {rate:.2f} req/s" if rate is not None else "")
        )
    c = summary.concurrency
    if c.get("in_system_mean") is not None:
        parts = [
            f"{name} mean {c[f'{name}_mean']:.1f} / peak {c[f'{name}_peak']}"
            for name in ("queued", "running", "in_system")
            if c.get(f"{name}_mean") is not None
        ]
        lines.append("concurrency: " + ", ".join(parts))
    if summary.preemptions and summary.preemptions["events"]:
        p = summary.preemptions
        lines.append(f"preemptions: {p['events']:,} on {counted(p['requests'], 'request')}")
    lines.extend(errored_lines(summary))
    ci = {k: v for k, v in summary.cancelled_in.items() if v}
    if summary.outcomes["cancelled"]:
        tokens = summary.cancelled["output_tokens_delivered"]
        dropped = bool(ci.get("unknown"))
        stages = [f"{k} {v:,}" for k, v in ci.items() if k != "unknown"]
        if dropped:
            stages.append(f"unknown {ci['unknown']:,} ({PARTIAL_OUTPUT_DROPPED})")
        delivered = (
            "tokens delivered unknown" if dropped and tokens is None else delivered_phrase(tokens)
        )
        lines.append(
            "cancelled in: "
            + ", ".join(stages)
            + f"; {delivered} before cancel"
            + (
                f"; {summary.cancelled['with_error']:,} of them ended with an error"
                if summary.cancelled.get("with_error")
                else ""
            )
        )
    if summary.outcomes["in_flight"]:
        lines.append(
            f"in flight at end of trace: {summary.outcomes['in_flight']:,} "
            "(censored: not in latency statistics)"
        )
    if summary.leaked_state and summary.leaked_state["requests"]:
        lines.append(
            f"leaked state: {summary.leaked_state['requests']:,} finished requests never "
            f"released, e.g. {summary.leaked_state['examples']}"
        )
    for rule, info in summary.violations.items():
        lines.append(
            f"invalid [{rule}]: {info['requests']:,} requests, {info['rows']:,} rows "
            f"({RULES.get(rule, '')}), e.g. {info['examples']}"
        )
    lines.extend(formula_lines(summary.formula))
    return lines


def render_table(
    summary: Summary, inputs: tuple[str, ...], naming: str = "servetrace", title: str | None = None
) -> Group:
    # The title as Text, never markup: file names and group values are the user's
    # ("[/x]" would raise, "[bold]" restyle); cells are plain text too.
    table = Table(
        title=Text(title or ", ".join(inputs), style="table.title"),
        caption="latencies of completed requests, in ms; "
        + (
            "itl pools every gap"
            if summary.metrics["itl"]["count"]
            else "no per-token times in this trace, so no itl"
        )
        + unavailable_caption(summary),
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("metric (ms)", style="bold")
    for key in TABLE_STATS:
        table.add_column(key, justify="right")
    for row in _metric_rows(summary, naming):
        table.add_row(*(Text(cell) for cell in row))
    return Group(
        Text(accounting_line(summary)),
        table,
        _decomposition_text(summary),
        Text("\n".join(_lines(summary))),
    )


def render_markdown(
    summary: Summary, inputs: tuple[str, ...], naming: str = "servetrace", title: str | None = None
) -> str:
    out = io.StringIO()
    out.write(f"### servetrace: {md_text(title or ', '.join(inputs), cell=False)}\n\n")
    out.write(md_text(accounting_line(summary), cell=False) + "\n\n")
    rows = _metric_rows(summary, naming)
    head = ["metric (ms)", *TABLE_STATS]
    out.write("\n".join(md_table(head, rows, "l" + "r" * len(TABLE_STATS))) + "\n")
    out.write("\n" + _decomposition_text(summary).plain.split("\n", 1)[0] + "\n\n")
    for line in _lines(summary):
        out.write(f"- {md_text(line, cell=False)}\n")
    return out.getvalue()


def render_csv(groups: Mapping[object, Summary], by: str | None, naming: str = "servetrace") -> str:
    """One row per (group, metric): the latency table in machine-readable form."""
    out = io.StringIO()
    writer = rows_writer(out)
    head = ([by] if by else []) + ["metric", "unit", *STAT_KEYS]
    writer.writerow(head)
    for value, summary in groups.items():
        for spec in LATENCY_METRICS:
            stats = distribution_ms(summary.metrics[spec.name])
            writer.writerow(
                ([value] if by else [])
                + [display_name(spec.name, naming), "ms", *(clean(stats[k]) for k in STAT_KEYS)]
            )
        for row in outcome_csv_rows(summary):
            writer.writerow(([value] if by else []) + row)
    return out.getvalue()
