"""Trace-level summaries (DESIGN §6): outcomes, latency distributions, throughput,
goodput, concurrency, and the accounting that proves no row was lost.

Latency statistics describe **completed** requests only, as the peer tools do, so the
numbers are comparable; cancelled and in-flight requests are described apart. ``itl``
pools every gap (gap-weighted); every other metric has one value per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import polars as pl

from servetrace.analysis import intervals, survival
from servetrace.analysis.concurrency import concurrency
from servetrace.analysis.errors import error_counts, errored_report
from servetrace.analysis.figures import (
    CANCEL_STAGES,
    OUTCOMES,
    THROUGHPUT_KEYS,
    failed,
    rates,
    summary_notes,
    window_aggregates,
)
from servetrace.analysis.formula import FormulaReport, check_formula
from servetrace.analysis.lifecycle import Timeline
from servetrace.analysis.lifecycle_rules import RULES
from servetrace.analysis.metrics import LATENCY_METRICS
from servetrace.analysis.output_counts import token_sum, uncounted
from servetrace.analysis.unavailable import blank_unavailable
from servetrace.errors import UsageError
from servetrace.stats.describe import describe
from servetrace.stats.sorting import sorted_series

EXAMPLES_SHOWN = 5


@dataclass(frozen=True)
class GoodputTarget:
    """A per-request service-level target, e.g. ``ttft <= 200 ms`` (limit in ns)."""

    metric: str
    op: str
    limit_ns: float

    def expr(self) -> pl.Expr:
        column = pl.col(f"{self.metric}_ns")
        ops = {"<=": column.le, "<": column.lt, ">=": column.ge, ">": column.gt}
        # A metric a request cannot have (TPOT of a one-token answer) does not fail it.
        return ops[self.op](self.limit_ns).fill_null(True)

    def text(self) -> str:
        return f"{self.metric}{self.op}{self.limit_ns / 1e6:g}ms"


@dataclass(frozen=True)
class Accounting:
    rows: int
    rows_analyzed: int
    rows_quarantined: int
    requests: int
    requests_valid: int
    requests_invalid: int


Distribution = dict[str, float | int | None]


class Violation(TypedDict):
    requests: int
    rows: int
    examples: list[Any]


class GoodputReport(TypedDict):
    targets: list[str]
    requests_met: int
    requests_completed: int
    fraction: float | None
    attainment_by_target: dict[str, float | None]


@dataclass(frozen=True)
class Summary:
    accounting: Accounting
    outcomes: dict[str, int]
    cancelled_in: dict[str, int]
    violations: dict[str, Violation]
    metrics: dict[str, Distribution]  # latencies in ns
    tokens: dict[str, Distribution]  # output/prompt length distributions
    cancelled: dict[str, Any]
    in_flight: dict[str, Any]
    throughput: dict[str, float | None]
    goodput: GoodputReport | None
    concurrency: dict[str, float | int | None]
    formula: FormulaReport
    leaked_state: dict[str, Any] | None
    source: str
    arrival_known: bool
    ticks_available: bool
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # Where the throughput window came from: "trace" (first arrival → last terminal),
    # "declared" (the run's own duration: servetrace.runs.throughput), None (no window).
    window_source: str | None = None
    # Kaplan–Meier estimates (analysis.survival) and percentile intervals (analysis.intervals)
    survival: dict[str, dict[str, Any]] | None = None
    intervals: dict[str, dict[str, Any]] = field(default_factory=dict)
    # issue 9: failed requests by code, and what they delivered before failing
    errors: dict[str, int] = field(default_factory=dict)
    errored: dict[str, Any] = field(default_factory=dict)
    # Completed requests whose output-token count the trace does not know
    # (analysis.output_counts): output tok/s is null, and all of them means no tpot.
    output_uncounted: int = 0


def _ids(frame: pl.DataFrame) -> list[Any]:
    """The first few request ids, earliest arrival first (stable across runs)."""
    ordered = frame.sort("arrival_ns", "request_id", nulls_last=True)
    return ordered["request_id"].head(EXAMPLES_SHOWN).to_list()


def violations(timeline: Timeline) -> dict[str, Violation]:
    """Per rule: how many requests (and rows) broke it, with example request ids."""
    invalid = timeline.requests.filter(pl.col("rule").is_not_null())
    result: dict[str, Violation] = {}
    broken = set(invalid["rule"].unique().to_list()) if invalid.height else set()
    for rule in RULES:
        if rule not in broken:  # a filter per rule costs ~0.3 ms even on an empty frame
            continue
        of_rule = invalid.filter(pl.col("rule") == rule)
        result[rule] = {
            "requests": of_rule.height,
            "rows": int(of_rule["rows"].sum()),
            "examples": _ids(of_rule),
        }
    quarantine = timeline.row_quarantine
    row_rules = dict(quarantine.group_by("rule").len().iter_rows()) if quarantine.height else {}
    for rule in RULES:
        if rule in row_rules:
            result[rule] = {"requests": 0, "rows": row_rules[rule], "examples": []}
    return result


def accounting(timeline: Timeline) -> Accounting:
    requests = timeline.requests
    invalid = requests.filter(pl.col("rule").is_not_null())
    quarantined = int(invalid["rows"].sum()) + timeline.row_quarantine.height
    total = int(requests["rows"].sum()) + timeline.row_quarantine.height
    return Accounting(
        rows=total,
        rows_analyzed=total - quarantined,
        rows_quarantined=quarantined,
        requests=requests.height,
        requests_valid=requests.height - invalid.height,
        requests_invalid=invalid.height,
    )


def latency_distributions(
    completed: pl.DataFrame, gaps: pl.DataFrame | Distribution
) -> dict[str, Distribution]:
    """Every latency metric over completed requests; ``itl`` over the pooled gaps.

    ``gaps`` is the gap frame, or, when the trace was streamed, the ITL distribution
    already merged from its batches.
    """
    out: dict[str, Distribution] = {}
    for spec in LATENCY_METRICS:
        if spec.per == "gap":
            out[spec.name] = gaps if isinstance(gaps, dict) else describe(gaps[spec.column])
        else:
            out[spec.name] = describe(completed[spec.column])
    return out


def throughput(
    requests: pl.DataFrame, arrival_known: bool, goodput_met: int | None
) -> dict[str, float | None]:
    """Rates over the window first arrival → last terminal event, completed requests."""
    if not arrival_known or requests.height == 0:
        return dict.fromkeys(THROUGHPUT_KEYS)
    return rates(requests.select(window_aggregates()).row(0, named=True), goodput_met)


def goodput(completed: pl.DataFrame, targets: Sequence[GoodputTarget]) -> GoodputReport | None:
    if not targets:
        return None
    for target in targets:
        column = f"{target.metric}_ns"
        if completed.height and completed[column].null_count() == completed.height:
            raise UsageError(
                f"goodput target {target.text()}: no completed request has a "
                f"{target.metric} in this trace",
                hint="queue_wait and prefill need admission events (client-side tools have "
                "none); tpot needs outputs of 2+ tokens",
            )
    meets = pl.all_horizontal([t.expr() for t in targets])
    met = int(completed.select(meets.sum()).item()) if completed.height else 0
    per_target = {
        t.text(): (completed.select(t.expr().mean()).item() if completed.height else None)
        for t in targets
    }
    return {
        "targets": [t.text() for t in targets],
        "requests_met": met,
        "requests_completed": completed.height,
        "fraction": met / completed.height if completed.height else None,
        "attainment_by_target": per_target,
    }


def _cancelled(requests: pl.DataFrame) -> dict[str, Any]:
    cancelled = requests.filter(pl.col("outcome") == "cancelled")
    return {
        "count": cancelled.height,
        "with_error": cancelled.filter(failed(cancelled.columns)).height,
        "output_tokens_delivered": token_sum(cancelled),
        "time_to_cancel_ns": describe(cancelled["e2e_ns"]),
        "examples": _ids(cancelled),
    }


def _in_flight(requests: pl.DataFrame, trace_end: int | None) -> dict[str, Any]:
    flying = requests.filter(pl.col("outcome") == "in_flight")
    age = flying.select((pl.lit(trace_end) - pl.col("arrival_ns")).alias("age"))["age"]
    return {
        "count": flying.height,
        "output_tokens_delivered": token_sum(flying),
        "age_at_end_ns": describe(age),
        "examples": _ids(flying),
    }


def _leaked(timeline: Timeline, requests: pl.DataFrame) -> dict[str, Any] | None:
    if not timeline.has_releases:
        return None
    ended = timeline.requests.filter(
        pl.col("rule").is_null()
        & pl.col("terminal_ns").is_not_null()
        & (pl.col("n_release").fill_null(0) == 0)
    )
    return {"requests": ended.height, "examples": _ids(ended)}


def _constant_flag(requests: pl.DataFrame, column: str) -> bool:
    if column not in requests.columns or requests.height == 0:
        return True
    return bool(requests[column].fill_null(True).all())


def completed_columns(columns: Sequence[str], targets: Sequence[GoodputTarget]) -> list[str]:
    """What ``summarize`` reads of completed requests: outcome, the per-request latency
    columns, the token counts and the goodput targets' metrics (in frame order)."""
    wanted = {"outcome", "output_tokens", "prompt_tokens"}
    wanted |= {m.column for m in LATENCY_METRICS if m.per != "gap"}
    wanted |= {f"{t.metric}_ns" for t in targets}
    return [c for c in columns if c in wanted]


def summarize(
    timeline: Timeline,
    requests: pl.DataFrame,
    gaps: pl.DataFrame | Distribution,
    targets: Sequence[GoodputTarget] = (),
    formula_tolerance: tuple[int, float] | None = None,
    warnings: Sequence[str] = (),
) -> Summary:
    """Everything the report shows, from the timeline and the per-request frame."""
    # Only the columns read of completed requests, and dropped before the passes over
    # every request (concurrency, formula, survival): a copy of the whole frame was
    # 0.65 GB for the 4 M requests of 1e9 events, held through all of them.
    completed = requests.select(completed_columns(requests.columns, targets)).filter(
        pl.col("outcome") == "completed"
    )
    outcomes = {name: int((requests["outcome"] == name).sum()) for name in OUTCOMES}
    cancelled_in = {name: int((requests["cancelled_in"] == name).sum()) for name in CANCEL_STAGES}
    arrival_known = _constant_flag(requests, "arrival_known")
    ticks_available = _constant_flag(requests, "ticks_available")
    source = "server"
    if "source" in requests.columns and requests.height:
        values = requests["source"].drop_nulls().unique().to_list()
        source = ",".join(sorted(str(v) for v in values)) or "server"
    good = goodput(completed, targets)
    met = good["requests_met"] if good else None
    if not isinstance(gaps, dict):
        # Sorted once: every percentile and interval of the pooled gaps is then an index
        # (Polars keeps the sorted flag), instead of a selection of millions per statistic.
        gaps = pl.DataFrame(
            [sorted_series(gaps[m.column]) for m in LATENCY_METRICS if m.per == "gap"]
        )
    metrics = latency_distributions(completed, gaps)
    tolerance = formula_tolerance or (1_000_000, 0.01)
    notes = [*warnings, *summary_notes(completed.height, arrival_known)]
    rates = throughput(requests, arrival_known, met)
    tokens = {
        "output_tokens": describe(completed["output_tokens"]),
        "prompt_tokens": describe(completed["prompt_tokens"]),
    }
    percentile_intervals = intervals.metric_intervals(completed, gaps)
    del completed
    summary = Summary(
        accounting=accounting(timeline),
        outcomes=outcomes,
        cancelled_in=cancelled_in,
        violations=violations(timeline),
        metrics=metrics,
        tokens=tokens,
        cancelled=_cancelled(requests),
        in_flight=_in_flight(requests, timeline.trace_end_ns),
        throughput=rates,
        goodput=good,
        concurrency=concurrency(
            timeline.transitions,
            requests["arrival_ns"].min() if requests.height else None,  # type: ignore[arg-type]
            timeline.trace_end_ns,
            timeline.has_admissions,
        )
        if arrival_known
        else concurrency(timeline.transitions, None, None, False),
        formula=check_formula(requests, *tolerance),
        leaked_state=_leaked(timeline, requests),
        source=source,
        arrival_known=arrival_known,
        ticks_available=ticks_available,
        warnings=tuple(notes),
        window_source="trace" if rates["window_s"] is not None else None,
        survival=survival.estimate(
            requests, metrics, timeline.trace_end_ns, timeline.has_admissions, arrival_known
        ),
        intervals=percentile_intervals,
        errors=error_counts(requests),
        errored=errored_report(requests),
        output_uncounted=uncounted(requests),
    )
    return blank_unavailable(summary)
