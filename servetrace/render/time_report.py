"""The window, the time slices and the fluidity of an analysis: JSON keys, table, Markdown, CSV.

Keys are present only when their option was given (as ``by``): ``window: {start_s,
end_s, rule, ...}``, ``slices: [{start_s, end_s, ...}]`` (seconds from the trace start,
latencies in ms) and ``fluidity: {...}``.
"""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from servetrace.analysis.fluidity import SOURCE, FluidityTargets, fluidity_summary
from servetrace.analysis.result import Analysis
from servetrace.analysis.window import Window
from servetrace.render._csv import rows_writer
from servetrace.render._json import clean
from servetrace.render.fit import plain_lines
from servetrace.render.format import table_number
from servetrace.render.markdown_text import md_table
from servetrace.units import NS_PER_MS, NS_PER_S

SLICE_COLUMNS = (
    ("start_s", "start (s)"),
    ("end_s", "end (s)"),
    ("arrivals", "arrivals"),
    ("completed", "completed"),
    ("requests_per_s", "req/s"),
    ("output_tokens_per_s", "tok/s"),
    ("goodput_requests_per_s", "good/s"),
    ("ttft_p50_ms", "ttft p50"),
    ("ttft_p99_ms", "ttft p99"),
    ("tpot_p50_ms", "tpot p50"),
    ("tpot_p99_ms", "tpot p99"),
    ("queued_mean", "queued"),
    ("running_mean", "running"),
)


def window_dict(window: Window) -> dict[str, Any]:
    return {
        "start_s": window.start_s,
        "end_s": window.end_s,
        "rule": window.rule,
        "origin": "trace start (its earliest event)",
        "plateau_in_system": window.plateau_in_system,
    }


def slice_rows(slices: pl.DataFrame, origin_ns: int) -> list[dict[str, Any]]:
    """``slices`` as the JSON spells them: seconds from ``origin_ns``, latencies in ms."""
    frame = slices.select(
        ((pl.col("start_ns") - origin_ns) / NS_PER_S).alias("start_s"),
        ((pl.col("end_ns") - origin_ns) / NS_PER_S).alias("end_s"),
        "arrivals",
        "completed",
        "requests_per_s",
        "output_tokens_per_s",
        "goodput_requests_per_s",
        *[
            (pl.col(f"{m}_p{q}_ns") / NS_PER_MS).alias(f"{m}_p{q}_ms")
            for m in ("ttft", "tpot")
            for q in (50, 99)
        ],
        "queued_mean",
        "running_mean",
        "in_system_mean",
    )
    return [{k: clean(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def fluidity_dict(analysis: Analysis, targets: FluidityTargets) -> dict[str, Any]:
    numbers = fluidity_summary(analysis.per_request, targets)
    out: dict[str, Any] = {
        "definition": SOURCE,
        "targets": {"ttft_ms": targets.ttft_ns / NS_PER_MS, "tbt_ms": targets.tbt_ns / NS_PER_MS},
        "requests": numbers["requests"],
    }
    if "unavailable" in numbers:
        return {**out, "index": None, "unavailable": numbers["unavailable"]}
    index = {"unit": "fraction", **{k: clean(v) for k, v in numbers["index"].items()}}
    keys = (
        "deadlines",
        "deadlines_missed",
        "deadline_miss_rate",
        "tokens",
        "tokens_missed",
        "token_miss_fraction",
        "requests_at_least_0_9",
    )
    return {**out, "index": index, **{k: clean(numbers[k]) for k in keys}}


def origin_of(analysis: Analysis) -> int:
    if analysis.window is not None:
        return analysis.window.origin_ns
    return analysis.timeline.trace_start_ns or 0


def time_dict(analysis: Analysis) -> dict[str, Any]:
    """The extra JSON keys of the time options given (none without them)."""
    out: dict[str, Any] = {}
    if analysis.window is not None:
        out["window"] = window_dict(analysis.window)
    if analysis.slices is not None:
        out["slices"] = slice_rows(analysis.slices, origin_of(analysis))
    if analysis.fluidity is not None:
        out["fluidity"] = fluidity_dict(analysis, analysis.fluidity)
    return out


# ---------------------------------------------------------------- human-readable forms
def lines(report: dict[str, Any]) -> list[str]:
    """One line for the window and one for fluidity (under the summary)."""
    out: list[str] = []
    window = report.get("window")
    if window:
        end = "end" if window["end_s"] is None else f"{window['end_s']:,.1f} s"
        plateau = (
            f", plateau {window['plateau_in_system']:.1f} in system"
            if window.get("plateau_in_system") is not None
            else ""
        )
        out.append(
            f"window: requests arriving {window['start_s']:,.1f} s → {end} from the trace "
            f"start ({window['rule']}{plateau})"
        )
    fluidity = report.get("fluidity")
    if fluidity:
        t = fluidity["targets"]
        head = f"fluidity (ttft {t['ttft_ms']:g} ms, tbt {t['tbt_ms']:g} ms)"
        if fluidity.get("index") is None:
            out.append(f"{head}: unavailable ({fluidity['unavailable']})")
        else:
            i = fluidity["index"]
            out.append(
                f"{head}: index p50 {i['p50']:.3f}, p10 {i['p10']:.3f}, p1 {i['p1']:.3f}, "
                f"mean {i['mean']:.3f} over {fluidity['requests']:,} completed requests; "
                f"{fluidity['tokens_missed']:,} of {fluidity['tokens']:,} tokens missed their "
                f"deadline ({fluidity['token_miss_fraction']:.1%}), "
                f"{fluidity['requests_at_least_0_9']:.1%} of requests at ≥ 0.9"
            )
    return out


def _shown(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The columns worth showing: goodput only with targets, levels only when known."""
    return [(k, h) for k, h in SLICE_COLUMNS if any(row[k] is not None for row in rows)]


def slice_table(rows: list[dict[str, Any]]) -> str:
    """Plain fixed-width text (every column fits; Rich would squeeze 13 into 80)."""
    columns = _shown(rows)
    cells = [[h for _, h in columns]] + [[table_number(row[k]) for k, _ in columns] for row in rows]
    text = [
        "per slice: ttft/tpot (ms) of requests arriving in it; req/s, tok/s of what "
        "completed or was emitted in it; queued/running: time-weighted mean"
    ]
    return "\n".join(text + plain_lines(cells, right=range(len(columns))))


def slice_markdown(rows: list[dict[str, Any]]) -> str:
    columns = _shown(rows)
    cells = [[table_number(row[k]) for k, _ in columns] for row in rows]
    table = md_table([h for _, h in columns], cells, "r" * len(columns))
    return "\n#### per slice\n\n" + "\n".join(table) + "\n"


def slice_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = rows_writer(out)
    keys = list(rows[0]) if rows else [k for k, _ in SLICE_COLUMNS]
    writer.writerow(keys)
    for row in rows:
        writer.writerow([row[k] for k in keys])
    return out.getvalue()
