"""Summaries (DESIGN §6): outcomes, latency distributions, throughput, goodput,
concurrency, and the accounting that proves no row was lost — of the whole trace
(``summarize``) or of each value of a request attribute (``summarize_groups``, ``--by``),
by the same code: the trace is the one group of ``Groups.whole``, and each group is
summarised over its own span, as if analysed alone.

Latency statistics describe **completed** requests only, as the peer tools do, so the
numbers are comparable; cancelled and in-flight requests are described apart. ``itl``
pools every gap (gap-weighted); every other metric has one value per request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

import numpy as np
import polars as pl

from servetrace.analysis import figures
from servetrace.analysis.accounting import Accounting, Violation, accounting, violations
from servetrace.analysis.concurrency import concurrency_by_group
from servetrace.analysis.figures import CANCEL_STAGES, EXAMPLES_SHOWN, OUTCOMES, THROUGHPUT_KEYS
from servetrace.analysis.formula import FormulaReport, formula_by_group
from servetrace.analysis.formula_steps import step_formula_by_group
from servetrace.analysis.groups import CODE, Groups, Sample
from servetrace.analysis.intervals import intervals_by_group
from servetrace.analysis.lifecycle import EVENT_TIMES, Timeline
from servetrace.analysis.metric_names import LATENCY_METRICS, Distribution
from servetrace.analysis.survival import estimate_by_group
from servetrace.analysis.unavailable import blank_unavailable
from servetrace.stats.describe import describe_sorted


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
    # failed requests by code, and what they delivered before failing
    errors: dict[str, int] = field(default_factory=dict)
    errored: dict[str, Any] = field(default_factory=dict)
    # Completed requests whose output-token count the trace does not know
    # (analysis.output_counts): output tok/s is null, and all of them means no tpot.
    output_uncounted: int = 0
    # Preemption events and requests preempted at least once; None: the trace cannot see
    # them (no admissions).
    preemptions: dict[str, int] | None = None


def completed_columns(columns: Sequence[str], targets: Sequence[GoodputTarget]) -> list[str]:
    """What the summary reads of completed requests: outcome, the per-request latency
    columns, the token counts and the goodput targets' metrics (in frame order)."""
    wanted = {"outcome", "output_tokens", "prompt_tokens", CODE}
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
    """The whole trace's summary, from the timeline and the per-request frame; ``gaps``
    is the gap frame or, streamed, the ITL distribution merged from the batches."""
    groups = Groups.whole(requests)
    first = requests["arrival_ns"].min() if requests.height else None
    span = {
        "start": first,
        "end": timeline.trace_end_ns,
        "admissions": timeline.has_admissions,
        "releases": timeline.has_releases,
    }
    pooled = gaps if isinstance(gaps, pl.DataFrame) else [gaps]
    tolerance = formula_tolerance or (1_000_000, 0.01)
    (summary,) = _summaries(timeline, groups, requests, pooled, [span], targets, tolerance)
    notes = [*warnings, *summary.warnings]
    return replace(
        summary,
        accounting=accounting(timeline),
        violations=violations(timeline),
        warnings=tuple(notes),
    )


def summarize_groups(
    timeline: Timeline,
    requests: pl.DataFrame,
    gaps: pl.DataFrame | Mapping[Any, Distribution],
    column: str,
    targets: Sequence[GoodputTarget] = (),
    formula_tolerance: tuple[int, float] = (1_000_000, 0.01),
) -> dict[Any, Summary]:
    """One summary per value of ``column`` (nulls last), each over its own span; ``gaps``
    is the gap frame or, streamed, the ITL distribution of each value. Only the valid
    requests of a group are in it (invalid ones are in the trace's summary)."""
    groups = Groups.by(requests, column)
    spans = _spans(timeline, groups)
    pooled = (
        gaps
        if isinstance(gaps, pl.DataFrame)
        else [gaps.get(value, describe_sorted(np.zeros(0))) for value in groups.values]
    )
    found = _summaries(timeline, groups, requests, pooled, spans, targets, formula_tolerance)
    return {
        value: replace(summary, accounting=Accounting.valid(span["rows"], span["requests"]))
        for value, summary, span in zip(groups.values, found, spans, strict=True)
    }


def _spans(timeline: Timeline, groups: Groups) -> list[dict[str, Any]]:
    """Each group's span: first arrival, last event, whether it has admissions and
    releases, its requests and rows (from the timeline rows of its requests)."""
    rows = groups.coded(timeline.requests)
    times = [c for c in EVENT_TIMES if c in rows.columns]
    found = groups.rows(
        rows,
        pl.col("arrival_ns").min().alias("start"),
        pl.max_horizontal(pl.col(c).max() for c in times).alias("end"),
        pl.col("admission_ns").is_not_null().any().alias("admissions"),
        (pl.col("n_release").fill_null(0) > 0).any().alias("releases"),
        pl.len().alias("requests"),
        pl.col("rows").sum().alias("rows"),
    )
    empty = {"start": None, "end": None, "admissions": False, "releases": False}
    return [row or {**empty, "requests": 0, "rows": 0} for row in found]


def _summaries(
    timeline: Timeline,
    groups: Groups,
    requests: pl.DataFrame,
    gaps: pl.DataFrame | Sequence[Distribution],
    spans: Sequence[Mapping[str, Any]],
    targets: Sequence[GoodputTarget],
    tolerance: tuple[int, float],
) -> list[Summary]:
    """Every group's summary, by one pass per figure over all groups; ``gaps`` is the gap
    frame or, streamed, each group's ITL distribution."""
    frame, streamed = (gaps, None) if isinstance(gaps, pl.DataFrame) else (None, gaps)
    requests = groups.coded(requests)
    # Only the columns read of completed requests, and dropped before the passes over
    # every request (concurrency, formula, survival): a copy of the whole frame was
    # 0.65 GB for the 4 M requests of 1e9 events, held through all of them.
    completed = requests.select(completed_columns(requests.columns, targets)).filter(
        pl.col("outcome") == "completed"
    )
    known = figures.known(requests, groups)
    arrival = [bool(k["arrival_known"]) for k in known]
    samples: dict[str, Sample | None] = {
        spec.column: groups.sample(completed, spec.column)
        for spec in LATENCY_METRICS
        if spec.per != "gap"
    }
    samples["itl_ns"] = None if frame is None else groups.sample(groups.coded(frame), "itl_ns")
    tokens = {c: groups.sample(completed, c) for c in ("output_tokens", "prompt_tokens")}
    metrics = [
        {
            spec.name: streamed[g]
            if streamed is not None and spec.per == "gap"
            else describe_sorted(samples[spec.column].of(g))  # type: ignore[union-attr]
            for spec in LATENCY_METRICS
        }
        for g in groups
    ]
    itl_counts = [m["itl"]["count"] for m in metrics]
    intervals = intervals_by_group(samples, itl_counts, len(groups))  # type: ignore[arg-type]
    good = figures.goodput(completed, groups, targets)
    windows = groups.rows(requests, *figures.window_aggregates())
    admissions = [bool(span["admissions"]) and timeline.has_admissions for span in spans]
    busy = concurrency_by_group(
        groups.coded(timeline.transitions),
        groups,
        [s["start"] if a else None for s, a in zip(spans, arrival, strict=True)],
        [s["end"] if a else None for s, a in zip(spans, arrival, strict=True)],
        admissions,
    )
    formula = formula_by_group(requests, groups, *tolerance)
    in_steps = step_formula_by_group(requests, groups, *tolerance)
    formula = [replace(f, steps=s) if s else f for f, s in zip(formula, in_steps, strict=True)]
    ends = [span["end"] for span in spans]
    cancelled = figures.ended(requests, groups, "cancelled", "time_to_cancel_ns")
    flying = figures.ended(requests, groups, "in_flight", "age_at_end_ns", ends)
    errored = figures.ended(requests, groups, "errored", "time_to_error_ns")
    codes = figures.error_codes(requests, groups)
    leaked = _leaked(timeline, groups, spans)
    survival = estimate_by_group(requests, groups, metrics, ends, admissions, arrival)
    out = []
    for g in groups:
        kind, met = known[g], good[g]["requests_met"] if good[g] else None
        rates = figures.rates(windows[g], met) if arrival[g] else dict.fromkeys(THROUGHPUT_KEYS)
        done = int(kind.get("outcome:completed") or 0)
        summary = Summary(
            accounting=Accounting.valid(0, 0),
            outcomes=figures.counted(kind, "outcome", OUTCOMES),
            cancelled_in=figures.counted(kind, "cancelled_in", CANCEL_STAGES),
            violations={},
            metrics=metrics[g],
            tokens={c: describe_sorted(sample.of(g)) for c, sample in tokens.items()},
            cancelled=cancelled[g],
            in_flight=flying[g],
            throughput=rates,
            goodput=good[g],
            concurrency=busy[g],
            formula=formula[g],
            leaked_state=leaked[g],
            source=kind["source"] or "server",
            arrival_known=arrival[g],
            ticks_available=bool(kind["ticks_available"]),
            warnings=tuple(figures.notes(done, arrival[g])),
            window_source="trace" if rates["window_s"] is not None else None,
            survival=survival[g],
            intervals=intervals[g],
            errors=codes[g],
            errored=errored[g],
            # completed requests without an output count
            output_uncounted=done - int(tokens["output_tokens"].sizes[g]),
            preemptions=figures.preemptions(kind, admissions[g]),
        )
        out.append(blank_unavailable(summary))
    return out


def _leaked(
    timeline: Timeline, groups: Groups, spans: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any] | None]:
    """Per group: finished requests that never released their state (only traces, and
    groups, with releases report it)."""
    if not timeline.has_releases:
        return [None] * len(groups)
    rows = groups.coded(timeline.requests).filter(
        pl.col("rule").is_null()
        & pl.col("terminal_ns").is_not_null()
        & (pl.col("n_release").fill_null(0) == 0)
    )
    counts = groups.rows(rows, pl.len().alias("n"))
    examples = groups.examples(rows, EXAMPLES_SHOWN)
    out: list[dict[str, Any] | None] = []
    for g in groups:
        found = counts[g]
        shown = spans[g]["releases"] or groups.column is None
        out.append(
            {"requests": int(found["n"]) if found else 0, "examples": examples[g]}
            if shown
            else None
        )
    return out
