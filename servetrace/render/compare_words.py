"""A comparison in reporting units and words: what every compare format shows.

``servetrace.compare`` returns numbers in ns with verdicts as data; this module converts
times to ms (the JSON contract's unit) and writes every sentence: the change
("1.14x slower", pyperf's wording), the trade-off line, caveats, skipped metrics and the
method; and the cells the table and the Markdown share (p-values, intervals, row keys,
the lines of folded and unavailable rows). ``servetrace.render.compare`` lays these out
as a table, Markdown or JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from servetrace.analysis.errors import errors_phrase
from servetrace.analysis.unavailable import phrase, reason_for
from servetrace.comparison.attribution import Tradeoff
from servetrace.comparison.catalog import get_metric
from servetrace.comparison.caveats import Caveat
from servetrace.comparison.compare import Comparison
from servetrace.comparison.measure import Skipped
from servetrace.render.format import display_unit, ns_to_ms, short_ms
from servetrace.render.workload import workload_message
from servetrace.stats.names import PERCENTILE_METHOD
from servetrace.stats.verdicts import Verdict
from servetrace.units import NS_PER_MS

# The row keys of the JSON contract, in order.
ROW_KEYS = (
    "candidate",
    "metric",
    "stat",
    "unit",
    "baseline",
    "candidate_value",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "significant",
    "better",
    "verdict",
    "words",
    "paired",
    "method",
    "n_baseline",
    "n_candidate",
    "unavailable",  # why a side cannot express the metric, else null
)
DECOMPOSITION_KEYS = (
    "baseline_mean",
    "candidate_mean",
    "delta_mean",
    "baseline_p50",
    "candidate_p50",
    "delta_p50",
)


def change_words(ratio: float | None, verdict: Verdict | str, *, speed: bool = True) -> str:
    """ "1.14x slower", "1.08x faster" (pyperf's wording), or "no significant change".

    ``speed=False`` words counts and fractions as "worse"/"better".
    """
    if verdict == "no significant change" or ratio is None:
        return "no significant change"
    word = verdict if speed else ("worse" if verdict == "slower" else "better")
    factor = max(ratio, 1.0 / ratio) if ratio > 0 else math.inf
    if not math.isfinite(factor):
        return f"{word} (from or to zero)"
    return f"{factor:.2f}x {word}"


# --------------------------------------------------------------------------- numbers
def display_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """The rows as the JSON contract has them: times in ms, with their words."""
    out = []
    for row in comparison.rows.iter_rows(named=True):
        spec = get_metric(row["metric"])
        time = row["unit"] == "ns"
        convert = ns_to_ms if time else (lambda value: value)
        shown = {
            **row,
            "unit": display_unit(spec, row["stat"]),
            "baseline": convert(row["baseline"]),
            "candidate_value": convert(row["candidate_value"]),
            "words": change_words(
                row["ratio"], row["verdict"], speed=spec.speaks_of_speed(row["stat"])
            ),
            "unavailable": reason_for(comparison.unavailable, row["metric"], row["stat"]),
        }
        if shown["unavailable"] is not None and not row["significant"]:
            # not "no significant change": the trace cannot say
            shown["verdict"] = "unavailable"
            shown["words"] = f"unavailable: {shown['unavailable']}"

        out.append({key: shown[key] for key in ROW_KEYS})
    return out


def display_decomposition(comparison: Comparison) -> list[dict[str, Any]]:
    """Decomposition rows with ``*_ms`` keys (``share`` is a plain ratio)."""
    out = []
    for row in comparison.decomposition.iter_rows(named=True):
        shown: dict[str, Any] = {"component": row["component"]}
        for key in DECOMPOSITION_KEYS:
            shown[f"{key}_ms"] = ns_to_ms(row[f"{key}_ns"])
            if key == "delta_mean":
                shown["share"] = row["share"]
        out.append(shown)
    return out


def display_buckets(comparison: Comparison) -> list[dict[str, Any]] | None:
    """Length buckets with ``delta_*_ms`` keys; None when the comparison is unpaired."""
    if comparison.buckets is None:
        return None
    out = []
    for row in comparison.buckets.iter_rows(named=True):
        out.append(
            {
                (f"{key.removesuffix('_ns')}_ms" if key.startswith("delta_") else key): (
                    ns_to_ms(value) if key.startswith("delta_") else value
                )
                for key, value in row.items()
            }
        )
    return out


# --------------------------------------------------------------------------- sentences
def tradeoff_text(tradeoff: Tradeoff | None, label: str) -> str | None:
    """ "B trades 27.3 ms of TTFT p50 for 155 ms of ITL p99"."""
    if tradeoff is None:
        return None
    lost, gained = tradeoff.lost, tradeoff.gained
    return (
        f"{label} trades {short_ms(tradeoff.lost_ns / NS_PER_MS)} of {lost.spec.name.upper()} "
        f"{lost.stat} for {short_ms(tradeoff.gained_ns / NS_PER_MS)} of "
        f"{gained.spec.name.upper()} {gained.stat}"
    )


# The overall effect a headline leads with: the latency a request sees from send to end.
OVERALL_METRIC = "e2e"


def _factors(rows: list[dict[str, Any]]) -> str:
    """ "1.47x" or "1.43-1.53x": the spread of the change factors of ``rows``."""
    factors = sorted(max(r["ratio"], 1 / r["ratio"]) if r["ratio"] > 0 else math.inf for r in rows)
    low, high = f"{factors[0]:.2f}", f"{factors[-1]:.2f}"
    return f"{low}x" if low == high else f"{low}-{high}x"


def overall_text(comparison: Comparison) -> str | None:
    """ "e2e 1.43-1.53x faster at every statistic (mean, p50, p90, p99)", or how its
    statistics split; None when e2e was not compared."""
    rows = [
        r
        for r in comparison.rows.iter_rows(named=True)
        if r["metric"] == OVERALL_METRIC and r["ratio"] is not None
    ]
    if not rows:
        return None
    moved: dict[str, list[dict[str, Any]]] = {"faster": [], "slower": []}
    for row in rows:
        if row["significant"] and row["verdict"] in moved:
            moved[row["verdict"]].append(row)
    stats = lambda group: ", ".join(r["stat"] for r in group)  # noqa: E731
    for verdict, group in moved.items():
        if len(group) == len(rows):
            return (
                f"{OVERALL_METRIC} {_factors(group)} {verdict} at every statistic ({stats(group)})"
            )
    parts = [
        f"{verdict} at {stats(group)} ({_factors(group)})"
        for verdict, group in moved.items()
        if group
    ]
    if not parts:
        return f"no significant change in {OVERALL_METRIC} ({stats(rows)})"
    unchanged = [r for r in rows if not any(r in group for group in moved.values())]
    if unchanged:
        parts.append(f"no significant change at {stats(unchanged)}")
    return f"{OVERALL_METRIC} " + ", ".join(parts)


def headline_text(comparison: Comparison) -> str | None:
    """The overall effect first, then the trade-off: "B: e2e 1.47x faster at every
    statistic (mean, p50); it trades 152 ms of TTFT p50 for 486 ms of ITL p99"."""
    label = comparison.candidate_label
    overall = overall_text(comparison)
    tradeoff = tradeoff_text(comparison.tradeoff, "it")
    if overall is None:
        return tradeoff_text(comparison.tradeoff, label)
    return f"{label}: {overall}" + (f"; {tradeoff}" if tradeoff else "")


def caveat_text(caveat: Caveat, comparison: Comparison) -> str:
    """One caveat as the warning line a reader gets."""
    label = {"baseline": comparison.baseline_label, "candidate": comparison.candidate_label}
    side = label.get(caveat.side or "", "")
    if caveat.kind == "unpaired_workload":
        return f"{comparison.candidate_label}: {workload_message(comparison.workload)}"
    if caveat.kind == "no_paired_completions":
        return (
            "no request completed in both traces, so there are no completed requests to "
            "compare: no latency can be compared (see cancelled.* and the outcomes)"
        )
    if caveat.kind == "no_completed":
        return f"{side} has no completed requests to compare"
    if caveat.kind == "few_completed":
        return (
            f"only {caveat.n} completed requests in {side}: too few to call any latency "
            f"change significant (need {caveat.need})"
        )
    return (
        f"{caveat.stat} rests on fewer than {caveat.tail} requests above it (n={caveat.n}); "
        f"treat it as unreliable (it needs about {caveat.need} completed requests)"
    )


def comparison_warnings(comparison: Comparison) -> list[str]:
    from servetrace.render.workload import load_warning

    warnings = [caveat_text(caveat, comparison) for caveat in comparison.caveats]
    load = load_warning(comparison.load)
    return [load, *warnings] if load else warnings


def skipped_text(skipped: Skipped) -> str:
    """ "goodput.fraction skipped: goodput.fraction needs per-request goodput targets"."""
    key = skipped.metric if skipped.stat is None else f"{skipped.metric}.{skipped.stat}"
    return f"{key} skipped: {skipped.reason}"


def comparison_notes(comparison: Comparison) -> list[str]:
    return [skipped_text(skipped) for skipped in comparison.skipped]


def method_line(comparison: Comparison) -> str:
    paired = "paired" if comparison.workload.paired else "independent"
    return (
        f"{paired} bootstrap (ITL: independent, at its effective sample size), "
        f"{comparison.resamples} resamples, seed {comparison.seed}, "
        f"{comparison.confidence:.0%} CI of the ratio candidate/baseline; significant when "
        f"the CI excludes 1 and the change exceeds {comparison.min_change:.0%}; "
        "percentiles: linear interpolation; rates: compound-Poisson interval"
    )


def method_dict(comparison: Comparison) -> dict[str, Any]:
    return {
        "bootstrap": "paired" if comparison.workload.paired else "independent",
        "resamples": comparison.resamples,
        "seed": comparison.seed,
        "confidence": comparison.confidence,
        "min_change": comparison.min_change,
        "max_resample_size": comparison.max_resample_size,
        "percentiles": PERCENTILE_METHOD,
        "rates": "compound-Poisson Wald interval on the log ratio",
        "significant": (
            f"{comparison.confidence:.0%} interval of the ratio excludes 1 and the change "
            f"exceeds {comparison.min_change:.0%}"
        ),
    }


def p_text(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def ci_text(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    if not (math.isfinite(low) or math.isfinite(high)):
        return "-"  # a ratio from zero: no finite bound to show
    return f"{factor_text(low)}-{factor_text(high)}"


def factor_text(value: float) -> str:
    if not math.isfinite(value):
        return "inf"
    return f"{value:.3f}" if value < 10 else f"{value:.3g}"


def row_key(row: Mapping[str, Any]) -> str:
    return f"{row['metric']}.{row['stat']}"


def change_text(row: Mapping[str, Any]) -> str:
    return str(row["words"]) if row["significant"] else "no significant change"


def shown_rows(
    comparison: Comparison, verbose: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The rows a table speaks of, those it lists (the significant ones; every one with
    ``verbose``) and the keys of those it folds into one line. A row a side cannot express
    is not "no significant change": it is left to the unavailable line."""
    rows = [r for r in display_rows(comparison) if r["significant"] or r["unavailable"] is None]
    shown = [r for r in rows if r["significant"] or verbose]
    hidden = [row_key(r) for r in rows if not (r["significant"] or verbose)]
    return rows, shown, hidden


def errored_line(comparison: Comparison) -> str | None:
    """``Errored (failed, not cancelled): baseline none; candidate 130 × HTTP 429``."""
    base, cand = comparison.errors
    if not base and not cand:
        return None
    return (
        "Errored (failed, not cancelled): baseline "
        + (errors_phrase(base) if base else "none")
        + "; candidate "
        + (errors_phrase(cand) if cand else "none")
    )


def unavailable_line(comparison: Comparison) -> str:
    """``Unavailable: itl (request-level export), preemptions (client trace)``."""
    return "Unavailable: " + phrase(comparison.unavailable)


def hidden_line(hidden: Sequence[str], total: int) -> str:
    if len(hidden) == total:
        return f"No significant change in any of the {total} statistics compared."
    return f"No significant change ({len(hidden)}): " + ", ".join(hidden)


def negligible(value: float | None) -> bool:
    return value is None or abs(value) < 1e-6


def tidy(value: float | None) -> float | None:
    """Float noise of a sum of means shows as 0."""
    return 0.0 if value is not None and abs(value) < 1e-9 else value
