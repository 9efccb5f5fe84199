"""The report's comparison sections: overlaid CDFs, bootstrap ratios, decomposition delta,
verdicts — the numbers ``servetrace compare`` computes, drawn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from servetrace.comparison.compare import Comparison
from servetrace.render import charts, compare_charts, series
from servetrace.render.compare import errored_line, unavailable_line
from servetrace.render.compare_words import display_rows, headline_text, method_dict
from servetrace.render.report_sections import Section, TraceView
from servetrace.units import NS_PER_MS


def short_labels(paths: Sequence[str]) -> list[str]:
    """The runs' labels, as ``analyze`` names runs: the parts of the paths that tell them
    apart (``qps_01`` and ``qps_inf`` for two files sharing a 60-character prefix)."""
    from servetrace.runs.labels import make_labels

    return make_labels([Path(p) for p in paths])


STATS = ("p50", "p99")  # the percentiles marked on the overlaid CDFs
VERDICT_HEADER = ["candidate", "statistic", "baseline", "candidate", "ratio", "CI", "verdict"]


def comparison_sections(
    views: Sequence[TraceView], comparisons: Sequence[Comparison]
) -> list[Section]:
    base = views[0]
    short = {v.label: v.short for v in views}
    # The CDF legends say which curve is the baseline (the others are the candidates).
    legend = {v.label: v.short + (" (baseline)" if i == 0 else "") for i, v in enumerate(views)}
    sections = []
    specs = []
    for metric in series.CDF_METRICS:
        drawn = [
            series.cdf_parts(v.analysis, metric, "trace", legend[v.label], STATS) for v in views
        ]
        curves, marks = [d[0] for d in drawn if d], [d[1] for d in drawn if d]
        if curves:
            specs.append(
                (
                    f"cmp-cdf-{metric}",
                    charts.cdf_chart(
                        pl.concat(curves),
                        pl.concat(marks).filter(pl.col("value_ns") > 0),
                        metric,
                        by="trace",
                    ),
                )
            )
    # The rows as the JSON report has them (times in ms), so the page and the JSON agree.
    rows = pl.DataFrame([row for c in comparisons for row in display_rows(c)])
    sig = rows.filter(pl.col("significant"))
    # "slower" is worse in the metric's direction (a higher latency, a lower throughput).
    better = sig.filter(pl.col("verdict") == "faster")
    worse = sig.filter(pl.col("verdict") == "slower")
    trade = "; ".join(text for c in comparisons if (text := headline_text(c)))
    sentence = (
        f"Against {base.label}: {better.height} statistics significantly better, "
        f"{worse.height} worse, "
        f"{rows.height - sig.height} without significant change" + (f"; {trade}." if trade else ".")
    )
    sections.append(
        Section(
            "cmp-cdfs",
            "Comparison: distributions and bootstrap intervals",
            sentence,
            [
                *specs,
                (
                    "cmp-ratios",
                    compare_charts.ratio_chart(
                        rows.with_columns(pl.col("candidate").replace(short))
                    ),
                ),
            ],
            note=_off_scale(rows)
            + method_dict(comparisons[0])["significant"]
            + "; "
            + comparisons[0].workload.verdict
            + "".join(
                f". {c.candidate_label}: {line}"
                for c in comparisons
                for line in (errored_line(c), unavailable_line(c) if c.unavailable else None)
                if line
            ),
        )
    )
    parts = pl.concat(
        c.decomposition.select(
            pl.lit(c.candidate_label).alias("candidate"),
            "component",
            (pl.col("delta_mean_ns") / NS_PER_MS).alias("delta_mean_ms"),
        )
        for c in comparisons
    ).filter(pl.col("component") != "e2e")
    e2e = (
        comparisons[0]
        .decomposition.filter(pl.col("component") == "e2e")
        .with_columns((pl.col("delta_mean_ns") / NS_PER_MS).alias("delta_mean_ms"))
    )
    moved = parts.filter(pl.col("candidate") == comparisons[0].candidate_label).sort(
        pl.col("delta_mean_ms").abs(), descending=True
    )
    sentence = (
        f"{comparisons[0].candidate_label}'s mean e2e moves by {e2e['delta_mean_ms'][0]:+,.1f} ms, "
        f"mostly in {moved['component'][0]} ({moved['delta_mean_ms'][0]:+,.1f} ms)."
        if e2e.height and moved.height and e2e["delta_mean_ms"][0] is not None
        else "The decomposition delta needs paired requests."
    )
    verdict_rows = [
        [
            short.get(r["candidate"], r["candidate"]),
            f"{r['metric']}.{r['stat']}",
            _cell(r["baseline"], r["stat"]),
            _cell(r["candidate_value"], r["stat"]),
            f"{r['ratio']:.3f}" if r["ratio"] is not None else "n/a",
            f"{r['ci_low']:.3f}–{r['ci_high']:.3f}" if r["ci_low"] is not None else "n/a",
            r["verdict"],
        ]
        for r in rows.iter_rows(named=True)
    ]
    sections.append(
        Section(
            "cmp-decomposition",
            "Comparison: where the e2e difference comes from, and verdicts",
            sentence,
            [
                (
                    "cmp-delta",
                    compare_charts.decomposition_delta(
                        parts.with_columns(pl.col("candidate").replace(short))
                    ),
                )
            ],
            table={"header": VERDICT_HEADER, "rows": verdict_rows},
        )
    )
    return sections


def _cell(value: float | None, stat: str) -> str:
    """A verdict-table value: a count as a whole number (``2``, not ``2.000``)."""
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if stat == "count" else f"{value:,.3f}"


def _off_scale(rows: pl.DataFrame) -> str:
    """The statistics whose ratio is 0 or infinite, drawn at the edge of the log axis."""
    ratio = pl.col("ratio").cast(pl.Float64)
    off = rows.filter((ratio <= 0) | ratio.is_infinite())
    if off.height == 0:
        return ""
    names = ", ".join(dict.fromkeys(f"{m}.{s}" for m, s in off.select("metric", "stat").rows()))
    return (
        f"A ratio of 0 or ∞ ({names}) has no place on a log axis: it is drawn at the "
        "axis edge (◀ 0, ▶ ∞). "
    )
