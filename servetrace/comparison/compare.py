"""``compare``: one candidate trace against the baseline, as numbers.

It matches the workloads (``workload``), chooses the requests to describe
(``population``), measures every requested statistic (``measure``), says where the e2e
difference comes from (``attribution``) and when not to trust the result (``caveats``).
The result is data in internal units (ns for times); ``servetrace.render.compare``
converts it and words it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from servetrace.analysis.result import Analysis
from servetrace.analysis.summary import GoodputTarget
from servetrace.analysis.unavailable import unavailable
from servetrace.comparison.attribution import Tradeoff, decompose, length_buckets, tradeoff
from servetrace.comparison.catalog import (
    CHECK_ONLY,
    COMPARED_METRICS,
    DEFAULT_COMPARE_METRICS,
    DEFAULT_COMPARE_STATS,
    METRICS,
    MetricSpec,
    get_metric,
    stats_help,
)
from servetrace.comparison.caveats import Caveat, caveats
from servetrace.comparison.load import LoadMatch
from servetrace.comparison.measure import Measured, Skipped, context, measure_keys
from servetrace.comparison.stall_shift import StallShift, stall_shift
from servetrace.comparison.workload import WorkloadMatch, match_workloads
from servetrace.errors import UsageError
from servetrace.settings import DEFAULT_ARRIVAL_TOLERANCE_NS, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from servetrace.stats.bootstrap import DEFAULT_MAX_RESAMPLE_SIZE
from servetrace.stats.names import canonical_stat, is_statistic

# One row per compared statistic. ``unit`` is the unit of ``baseline`` and
# ``candidate_value``: ns for times, req/s or tok/s for rates, "" for counts/fractions.
ROW_SCHEMA: dict[str, Any] = {
    "candidate": pl.String,
    "metric": pl.String,
    "stat": pl.String,
    "unit": pl.String,
    "baseline": pl.Float64,
    "candidate_value": pl.Float64,
    "ratio": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_value": pl.Float64,
    "significant": pl.Boolean,
    "better": pl.String,
    "verdict": pl.String,
    "paired": pl.Boolean,
    "method": pl.String,
    "n_baseline": pl.Int64,
    "n_candidate": pl.Int64,
}
TEST_SCHEMA: dict[str, Any] = {
    "candidate": pl.String,
    "metric": pl.String,
    "test": pl.String,
    "based_on": pl.String,
    "n_baseline": pl.Int64,
    "n_candidate": pl.Int64,
    "statistic": pl.Float64,
    "p_value": pl.Float64,
}


@dataclass(frozen=True)
class Comparison:
    """The comparison of one candidate with the baseline, in internal units.

    ``rows`` has one row per statistic (``ROW_SCHEMA``); ``tests`` a rank test per
    metric; ``decomposition`` the queue-wait/prefill/decode/delivery-tail deltas of mean
    and p50 (ns); ``buckets`` (paired only) the mean per-request deltas by prompt-length
    and output-length quartile (ns); ``tradeoff`` what the candidate traded, if anything;
    ``caveats`` when to distrust it; ``skipped`` what the traces could not provide.
    """

    baseline_label: str
    candidate_label: str
    workload: WorkloadMatch
    rows: pl.DataFrame
    tests: pl.DataFrame
    decomposition: pl.DataFrame
    buckets: pl.DataFrame | None
    tradeoff: Tradeoff | None
    caveats: tuple[Caveat, ...]
    skipped: tuple[Skipped, ...]
    seed: int
    resamples: int
    confidence: float
    min_change: float
    max_resample_size: int
    measured: tuple[Measured, ...] = field(repr=False, default=())
    # Did both runs declare the same offered load (comparison.load)? None: not asked.
    load: LoadMatch | None = None
    # metrics a side cannot express, with the reason (``analysis/unavailable.py``)
    unavailable: dict[str, str] = field(default_factory=dict)
    # errored requests by code (``Summary.errors``) of the baseline, the candidate
    errors: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))
    # each side's ITL stall shares by cause (with --steps on either side)
    stalls: StallShift | None = None

    @property
    def significant(self) -> pl.DataFrame:
        return self.rows.filter(pl.col("significant"))


def resolve(metrics: Sequence[str], stats: Sequence[str]) -> tuple[list[MetricSpec], list[str]]:
    """The specs of ``metrics`` and the canonical ``stats``; one UsageError naming every
    unknown one, with the names the catalog accepts."""
    problems: list[str] = []
    specs: list[MetricSpec] = []
    for name in metrics:
        try:
            spec = get_metric(name)
        except UsageError as error:
            problems.append(error.message)
            continue
        if spec.name in CHECK_ONLY:
            needs = "--server-metrics" if spec.kind == "consistency" else "--steps"
            problems.append(f"{spec.name} is gated by check (with {needs}), not compared")
        elif spec not in specs:
            specs.append(spec)
    canonical: list[str] = []
    for stat in stats:
        name = canonical_stat(stat)
        if not is_statistic(name):
            problems.append(f"unknown statistic {stat!r}")
        elif name not in canonical:
            canonical.append(name)
    if problems:
        raise UsageError(
            "; ".join(problems),
            hint=f"metrics: {', '.join(COMPARED_METRICS)}; "
            f"statistics: {stats_help(METRICS['ttft'])}",
        )
    return specs, canonical


def _rows_frame(measured: Sequence[Measured], label: str) -> pl.DataFrame:
    records = [
        {
            "candidate": label,
            "metric": row.spec.name,
            "stat": row.stat,
            "unit": row.spec.unit_of(row.stat),
            "baseline": row.ci.baseline,
            "candidate_value": row.ci.candidate,
            "ratio": row.change.ratio,
            "ci_low": row.change.ci_low,
            "ci_high": row.change.ci_high,
            "p_value": row.change.p_value,
            "significant": row.change.significant,
            "better": row.spec.better,
            "verdict": row.change.verdict,
            "paired": row.paired,
            "method": row.ci.method,
            "n_baseline": row.ci.n_baseline,
            "n_candidate": row.ci.n_candidate,
        }
        for row in measured
    ]
    return pl.DataFrame(records, schema=ROW_SCHEMA)


def compare(
    base: Analysis,
    cand: Analysis,
    *,
    metrics: Sequence[str] = DEFAULT_COMPARE_METRICS,
    stats: Sequence[str] = DEFAULT_COMPARE_STATS,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    min_change: float = 0.05,
    confidence: float = DEFAULT_CONFIDENCE,
    pair_on: str | None = None,
    arrival_tolerance_ns: int = DEFAULT_ARRIVAL_TOLERANCE_NS,
    goodput: Sequence[GoodputTarget] = (),
    baseline_label: str = "baseline",
    candidate_label: str = "candidate",
    max_resample_size: int = DEFAULT_MAX_RESAMPLE_SIZE,
) -> Comparison:
    """Compare a candidate trace with the baseline (the reference).

    Latency metrics get one row per statistic in ``stats``; throughput, goodput,
    cancelled and preemptions one row per statistic of their own. Metrics the traces
    cannot provide (no goodput targets, no prompt lengths) are skipped, and say why.
    """
    specs, stat_names = resolve(metrics, stats)
    match = match_workloads(base.per_request, cand.per_request, pair_on, arrival_tolerance_ns)
    ctx = context(
        base,
        cand,
        match,
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        min_change=min_change,
        max_resample_size=max_resample_size,
        goodput=goodput,
    )
    # A metric either side cannot express is listed as unavailable, never measured: its
    # values there would be placeholders (a client trace's zero requeue time).
    gone = _unavailable(base, cand)
    every = [
        (spec, stat)
        for spec in specs
        for stat in (stat_names if spec.is_distribution else spec.stats)
    ]
    keys = [(s.name, stat) for s, stat in every if s.name not in gone and stat not in gone]
    measured = measure_keys(ctx, keys)
    unmeasured = [(s, stat) for s, stat in every if s.name in gone or stat in gone]
    pop = ctx.population
    tests = pl.DataFrame(
        [{"candidate": candidate_label, **test} for test in ctx.tests], schema=TEST_SCHEMA
    )
    return Comparison(
        baseline_label=baseline_label,
        candidate_label=candidate_label,
        workload=match,
        rows=_in_order(
            pl.concat(
                [
                    _rows_frame(measured, candidate_label),
                    _unavailable_rows(unmeasured, candidate_label, match.paired),
                ]
            ),
            [(spec.name, stat) for spec, stat in every],
        ),
        tests=tests,
        decomposition=decompose(pop.base, pop.cand).filter(~pl.col("component").is_in(list(gone))),
        buckets=length_buckets(pop.base, pop.cand) if match.paired else None,
        tradeoff=tradeoff(measured),
        caveats=tuple(caveats(match, pop, stat_names)),
        skipped=tuple(ctx.skipped),
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        min_change=min_change,
        max_resample_size=max_resample_size,
        measured=tuple(measured),
        unavailable=gone,
        errors=(dict(base.summary.errors), dict(cand.summary.errors)),
        stalls=stall_shift(base.stalls, cand.stalls),
    )


def _in_order(rows: pl.DataFrame, keys: Sequence[tuple[str, str]]) -> pl.DataFrame:
    """Rows in the order of the keys asked for (metric by metric)."""
    order = pl.DataFrame(
        {"metric": [m for m, _ in keys], "stat": [st for _, st in keys]},
        schema={"metric": pl.String, "stat": pl.String},
    ).with_row_index("_order")
    ranked = rows.join(order, on=["metric", "stat"], how="left", maintain_order="left")
    return ranked.sort("_order", nulls_last=True, maintain_order=True).drop("_order")


def _unavailable_rows(
    keys: Sequence[tuple[MetricSpec, str]], label: str, paired: bool
) -> pl.DataFrame:
    """A row per statistic of a metric a side cannot express: no value, verdict
    ``unavailable`` (the reason is in ``Comparison.unavailable``)."""
    records = [
        {
            "candidate": label,
            "metric": spec.name,
            "stat": stat,
            "unit": spec.unit_of(stat),
            "significant": False,
            "better": spec.better,
            "verdict": "unavailable",
            "paired": paired,
            "n_baseline": 0,
            "n_candidate": 0,
        }
        for spec, stat in keys
    ]
    return pl.DataFrame(records, schema=ROW_SCHEMA)


def _unavailable(base: Analysis, cand: Analysis) -> dict[str, str]:
    """Metrics either trace cannot express; a reason true of one side only names it."""
    left, right = unavailable(base.summary), unavailable(cand.summary)
    out: dict[str, str] = {}
    for name in (*left, *(k for k in right if k not in left)):
        if name in left and name in right:
            out[name] = left[name]
        else:
            out[name] = f"{left.get(name) or right[name]}: " + (
                "baseline" if name in left else "candidate"
            )
    return out
