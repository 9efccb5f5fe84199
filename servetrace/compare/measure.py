"""Workload matching and the comparison of a baseline trace with a candidate.

The baseline comes first (pyperf's rule): every ratio is ``candidate / baseline``.

Workloads are matched first (``servetrace.compare.workload``); the explanation of a difference
lives in ``servetrace.compare.attribution``.

**Statistics.** ``identical`` and ``same_requests`` workloads are *paired*: latency
metrics compare the requests completed in both traces, with a paired bootstrap. Other
workloads are compared unpaired, each trace's completed requests on their own. ITL
pools gaps, which do not pair: it is always bootstrapped unpaired, with the effective
sample size of its design effect (gaps of one request are correlated). Rates use the
compound-Poisson interval, fractions the unpaired bootstrap of the per-request
indicator. See ``servetrace.stats`` for the methods, and why a row's p-value is that of
its own statistic (a Wilcoxon/Mann-Whitney test per metric is reported next to it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from servetrace import stats as st
from servetrace.compare.attribution import decompose, length_buckets
from servetrace.compare.catalog import (
    COMPLETED,
    DEFAULT_COMPARE_METRICS,
    NS_PER_MS,
    AnalysisLike,
    GoodputTarget,
    MetricSpec,
    MetricUnavailable,
    check_stat,
    get_metric,
    metric_value,
    outcome_contributions,
    to_display,
    window_s,
)
from servetrace.compare.workload import (
    DEFAULT_ARRIVAL_TOLERANCE_NS,
    WorkloadMatch,
    match_workloads,
)
from servetrace.errors import UsageError

# Below this many values above a percentile, the percentile is flagged as unreliable.
TAIL_VALUES = 10

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
    "words": pl.String,
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


# --------------------------------------------------------------------------- populations
@dataclass(frozen=True)
class _Population:
    """The requests (and their gaps) that latency statistics describe, per side."""

    paired: bool
    base: pl.DataFrame
    cand: pl.DataFrame
    base_gaps: pl.DataFrame
    cand_gaps: pl.DataFrame


def _gap_key(gaps: pl.DataFrame) -> str:
    """The column tying gaps to requests: the analysis' internal key, else the id."""
    return "_key" if "_key" in gaps.columns else "request_id"


def _gaps_of(analysis: AnalysisLike, requests: pl.DataFrame) -> pl.DataFrame:
    gaps = analysis.gaps
    if gaps.height == 0 or requests.height == 0:
        return gaps.clear()
    key = _gap_key(gaps)
    # Gaps in the order of ``requests`` (arrival order), so a seeded bootstrap draws the
    # same resamples on every run: the analysis' own gap order follows internal keys.
    order = requests.select(pl.col(key).cast(gaps.schema[key]), pl.int_range(pl.len()).alias("_o"))
    return (
        gaps.join(order, on=key, how="inner", maintain_order="left")
        .sort("_o", maintain_order=True)
        .drop("_o")
    )


def _population(base: AnalysisLike, cand: AnalysisLike, match: WorkloadMatch) -> _Population:
    if match.paired:
        rows = (
            match.pairs.join(
                base.requests.with_row_index("base_row").select(
                    pl.col("base_row").cast(pl.Int64), (pl.col("outcome") == COMPLETED).alias("b")
                ),
                on="base_row",
            )
            .join(
                cand.requests.with_row_index("cand_row").select(
                    pl.col("cand_row").cast(pl.Int64), (pl.col("outcome") == COMPLETED).alias("c")
                ),
                on="cand_row",
            )
            .filter(pl.col("b") & pl.col("c"))
            .sort("base_row")
        )
        b = base.requests[rows.get_column("base_row").to_numpy()]
        c = cand.requests[rows.get_column("cand_row").to_numpy()]
    else:
        b = base.requests.filter(pl.col("outcome") == COMPLETED)
        c = cand.requests.filter(pl.col("outcome") == COMPLETED)
    return _Population(match.paired, b, c, _gaps_of(base, b), _gaps_of(cand, c))


# --------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class Measured:
    """One compared statistic: its metric, interval and verdict (internal units)."""

    spec: MetricSpec
    stat: str
    ci: st.RatioCI
    change: st.Change
    paired: bool


@dataclass
class _Context:
    base: AnalysisLike
    cand: AnalysisLike
    population: _Population
    seed: int
    resamples: int
    confidence: float
    min_change: float
    max_resample_size: int
    goodput: tuple[GoodputTarget, ...]
    notes: list[str] = field(default_factory=list)
    tests: list[dict[str, Any]] = field(default_factory=list)


def _array(frame: pl.DataFrame, column: str) -> np.ndarray:
    if column not in frame.columns:
        raise MetricUnavailable(f"the trace has no {column} column")
    return frame.get_column(column).cast(pl.Float64).fill_null(np.nan).to_numpy()


def _clusters(gaps: pl.DataFrame) -> np.ndarray:
    codes = gaps.select(pl.col(_gap_key(gaps)).rank("dense").cast(pl.Int64) - 1).to_series()
    return codes.to_numpy()


def _gap_n_eff(values: np.ndarray, codes: np.ndarray, stats: Sequence[str]) -> dict[str, float]:
    """Effective sample size of pooled gaps per statistic (n / design effect)."""
    out: dict[str, float] = {}
    if values.size == 0:
        return out
    for stat in stats:
        q = st.percentile_of(stat)
        if q is None:
            y = values
        else:
            cut = np.percentile(values, q, method=st.PERCENTILE_METHOD)
            y = (values <= cut).astype(np.float64)
        out[stat] = values.size / st.design_effect(y, codes)
    return out


def _measure_latency(ctx: _Context, spec: MetricSpec, stats: Sequence[str]) -> list[Measured]:
    pop = ctx.population
    boot_stats = [s for s in stats if s != "count"]
    out: list[Measured] = []
    if spec.source == "gaps":
        gb, gc = pop.base_gaps, pop.cand_gaps
        for gaps, requests in ((gb, pop.base), (gc, pop.cand)):
            if gaps.height == 0 and _has_gaps(requests):
                raise MetricUnavailable(
                    "no per-gap samples (a streamed analysis keeps only a histogram)"
                )
        b = _array(gb, spec.column)
        c = _array(gc, spec.column)
        paired = False
        # Gaps of one request are correlated: resample at the effective sample size.
        n_eff = {
            "n_eff_base": _gap_n_eff(b, _clusters(gb), boot_stats),
            "n_eff_cand": _gap_n_eff(c, _clusters(gc), boot_stats),
        }
        if "itl_mean_ns" in pop.base.columns and "itl_mean_ns" in pop.cand.columns:
            _rank_test(
                ctx,
                spec,
                _array(pop.base, "itl_mean_ns"),
                _array(pop.cand, "itl_mean_ns"),
                pop.paired,
                "itl_mean_ns per request",
            )
    else:
        b = _array(pop.base, spec.column)
        c = _array(pop.cand, spec.column)
        if (b.size or c.size) and np.isnan(b).all() and np.isnan(c).all():
            # e.g. queue_wait and prefill of client-side traces, which see no admission
            raise MetricUnavailable(f"no completed request has a {spec.name} in either trace")
        paired = pop.paired
        n_eff = {}
        _rank_test(ctx, spec, b, c, paired, f"{spec.column} per request")
    cis = (
        st.bootstrap_ratio_cis(
            b,
            c,
            boot_stats,
            paired=paired,
            resamples=ctx.resamples,
            seed=ctx.seed,
            confidence=ctx.confidence,
            max_resample_size=ctx.max_resample_size,
            **n_eff,
        )
        if boot_stats
        else {}
    )
    if spec.source == "gaps":
        # Significance needs enough *requests*: gaps of one request are not independent
        # samples, so the minimum-sample rule counts the requests that produced them.
        n_base = pop.base_gaps[_gap_key(pop.base_gaps)].n_unique()
        n_cand = pop.cand_gaps[_gap_key(pop.cand_gaps)].n_unique()
        cis = {name: replace(ci, n_baseline=n_base, n_candidate=n_cand) for name, ci in cis.items()}
    for stat in stats:
        if stat == "count":
            ci = st.rate_ratio_ci(
                np.ones(int(np.count_nonzero(~np.isnan(b)))),
                np.ones(int(np.count_nonzero(~np.isnan(c)))),
                confidence=ctx.confidence,
                stat="count",
            )
        else:
            ci = cis[stat]
        out.append(_measured(ctx, spec, stat, ci, paired))
    return out


def _has_gaps(requests: pl.DataFrame) -> bool:
    """Whether some request had two output ticks or more (so ITL gaps should exist)."""
    return "ticks" in requests.columns and bool((requests.get_column("ticks") > 1).any())


def _rank_test(
    ctx: _Context, spec: MetricSpec, b: np.ndarray, c: np.ndarray, paired: bool, based_on: str
) -> None:
    result = st.paired_test(b, c) if paired else st.unpaired_test(b, c)
    ctx.tests.append(
        {
            "metric": spec.name,
            "test": result.name,
            "based_on": based_on,
            "n_baseline": result.n_baseline,
            "n_candidate": result.n_candidate,
            "statistic": result.statistic,
            "p_value": result.p_value,
        }
    )


def _measured(ctx: _Context, spec: MetricSpec, stat: str, ci: st.RatioCI, paired: bool) -> Measured:
    change = st.assess_change(
        ci,
        spec.better,
        ctx.min_change,
        speed=spec.kind != "outcome" and stat not in ("fraction", "count"),
    )
    return Measured(spec, stat, ci, change, paired)


def _measure_rate(ctx: _Context, spec: MetricSpec, stats: Sequence[str]) -> list[Measured]:
    """throughput, goodput, cancelled and preemption rows."""
    out: list[Measured] = []
    for stat in stats:
        try:
            out.append(_measure_rate_stat(ctx, spec, stat))
        except MetricUnavailable as error:
            ctx.notes.append(f"{spec.name}.{stat} skipped: {error.message}")
    return out


def _measure_rate_stat(ctx: _Context, spec: MetricSpec, stat: str) -> Measured:
    base, cand = ctx.base, ctx.cand
    vb = metric_value(base, spec.name, stat, goodput=ctx.goodput)
    vc = metric_value(cand, spec.name, stat, goodput=ctx.goodput)
    if spec.name == "throughput" or stat in ("requests_per_s", "count"):
        xb = _rate_contributions(base, spec, stat, vb, ctx)
        xc = _rate_contributions(cand, spec, stat, vc, ctx)
        ci = st.rate_ratio_ci(
            xb, xc, base_value=vb, cand_value=vc, confidence=ctx.confidence, stat=stat
        )
    else:  # a fraction or mean over requests: the bootstrap of the per-request values
        xb = outcome_contributions(base, spec, stat, ctx.goodput)
        xc = outcome_contributions(cand, spec, stat, ctx.goodput)
        ci = st.bootstrap_ratio_ci(
            xb,
            xc,
            "mean",
            paired=False,
            resamples=ctx.resamples,
            seed=ctx.seed,
            confidence=ctx.confidence,
            max_resample_size=ctx.max_resample_size,
        )
        ci = replace(ci, stat=stat)
        _rank_test(ctx, spec, xb, xc, False, f"{spec.name} per request ({stat})")
    return _measured(ctx, spec, stat, ci, False)


def _rate_contributions(
    analysis: AnalysisLike, spec: MetricSpec, stat: str, value: float | None, ctx: _Context
) -> np.ndarray:
    """What each request adds to a rate or count, for its compound-Poisson variance."""
    requests = analysis.requests
    if spec.name == "throughput":  # completed requests, as servetrace.analysis.summary counts them
        done = requests.filter(pl.col("outcome") == COMPLETED)
        if stat == "requests_per_s":
            return np.ones(done.height)
        if "output_tokens" not in requests.columns:
            raise MetricUnavailable("the trace has no output_tokens column")
        tokens = pl.col("output_tokens").cast(pl.Float64).fill_null(0)
        if stat == "total_tokens_per_s" and "prompt_tokens" in requests.columns:
            tokens = tokens + pl.col("prompt_tokens").cast(pl.Float64).fill_null(0)
        return done.select(tokens).to_series().to_numpy()
    if spec.name == "goodput" and not ctx.goodput:
        # Only the summary's rate is known: as many unit events as good requests.
        window = window_s(analysis) or 0.0
        return np.ones(round((value or 0.0) * window))
    return outcome_contributions(analysis, spec, stat, ctx.goodput)


# --------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class Comparison:
    """The comparison of one candidate with the baseline.

    ``rows`` follows the JSON contract (values in reporting units: ms for times, plus
    ``words``, ``paired``, ``method``, ``n_baseline``, ``n_candidate``); ``tests`` has a
    rank test per metric; ``decomposition`` the queue-wait/prefill/decode/delivery-tail
    deltas of mean and p50 (ms); ``buckets`` (paired only) the mean per-request deltas
    by prompt-length and output-length quartile.
    """

    baseline_label: str
    candidate_label: str
    workload: WorkloadMatch
    rows: pl.DataFrame
    tests: pl.DataFrame
    decomposition: pl.DataFrame
    buckets: pl.DataFrame | None
    tradeoff: str | None
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    seed: int
    resamples: int
    confidence: float
    min_change: float
    max_resample_size: int
    measured: tuple[Measured, ...] = field(repr=False, default=())

    @property
    def significant(self) -> pl.DataFrame:
        return self.rows.filter(pl.col("significant"))

    def method(self) -> dict[str, Any]:
        return {
            "bootstrap": "paired" if self.workload.paired else "independent",
            "resamples": self.resamples,
            "seed": self.seed,
            "confidence": self.confidence,
            "min_change": self.min_change,
            "max_resample_size": self.max_resample_size,
            "percentiles": st.PERCENTILE_METHOD,
            "rates": "compound-Poisson Wald interval on the log ratio",
            "significant": (
                f"{self.confidence:.0%} interval of the ratio excludes 1 and the change "
                f"exceeds {self.min_change:.0%}"
            ),
        }


def _resolve(metrics: Sequence[str], stats: Sequence[str]) -> tuple[list[MetricSpec], list[str]]:
    problems: list[str] = []
    specs: list[MetricSpec] = []
    for name in metrics:
        try:
            spec = get_metric(name)
        except UsageError as error:
            problems.append(error.message)
            continue
        if spec not in specs:
            specs.append(spec)
    canonical: list[str] = []
    for stat in stats:
        name = st.canonical_stat(stat)
        if not st.is_statistic(name):
            problems.append(f"unknown statistic {stat!r}")
        elif name not in canonical:
            canonical.append(name)
    if problems:
        raise UsageError(
            "; ".join(problems),
            hint="metrics: "
            + ", ".join(DEFAULT_COMPARE_METRICS)
            + "; statistics: mean, std, min, max, p50, p90, p99, p99_9 or any pNN",
        )
    return specs, canonical


def _validate(resamples: int, confidence: float, min_change: float) -> None:
    problems = []
    if resamples < 100:
        problems.append(f"resamples must be at least 100 (got {resamples})")
    if not 0.5 <= confidence < 1.0:
        problems.append(f"confidence must be in [0.5, 1) (got {confidence})")
    if min_change < 0:
        problems.append(f"min_change must not be negative (got {min_change})")
    if problems:
        raise UsageError("; ".join(problems))


def _context(
    base: AnalysisLike,
    cand: AnalysisLike,
    match: WorkloadMatch,
    *,
    seed: int,
    resamples: int,
    confidence: float,
    min_change: float,
    max_resample_size: int,
    goodput: Sequence[GoodputTarget],
) -> _Context:
    _validate(resamples, confidence, min_change)
    return _Context(
        base,
        cand,
        _population(base, cand, match),
        seed,
        resamples,
        confidence,
        min_change,
        max_resample_size,
        tuple(goodput),
    )


def _measure(ctx: _Context, keys: Sequence[tuple[str, str]]) -> list[Measured]:
    grouped: dict[str, list[str]] = {}
    for metric, stat in keys:
        spec = get_metric(metric)
        canonical = check_stat(spec, stat)
        stats = grouped.setdefault(spec.name, [])
        if canonical not in stats:
            stats.append(canonical)
    out: list[Measured] = []
    for name, stats in grouped.items():
        spec = get_metric(name)
        if spec.kind == "latency":
            try:
                out.extend(_measure_latency(ctx, spec, stats))
            except MetricUnavailable as error:
                ctx.notes.append(f"{name} skipped: {error.message}")
        else:
            out.extend(_measure_rate(ctx, spec, stats))
    return out


def measure(
    base: AnalysisLike,
    cand: AnalysisLike,
    keys: Sequence[tuple[str, str]],
    *,
    match: WorkloadMatch | None = None,
    seed: int = 0,
    resamples: int = st.DEFAULT_RESAMPLES,
    confidence: float = st.DEFAULT_CONFIDENCE,
    min_change: float = 0.05,
    max_resample_size: int = st.DEFAULT_MAX_RESAMPLE_SIZE,
    goodput: Sequence[GoodputTarget] = (),
    pair_on: str | None = None,
) -> tuple[list[Measured], list[str]]:
    """Compare exactly the given ``(metric, stat)`` keys; returns the rows and notes.

    The engine behind ``compare`` and behind the regression budgets of ``check``.
    """
    if match is None:
        match = match_workloads(base.requests, cand.requests, pair_on)
    ctx = _context(
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
    return _measure(ctx, keys), ctx.notes


def compare(
    base: AnalysisLike,
    cand: AnalysisLike,
    *,
    metrics: Sequence[str] = DEFAULT_COMPARE_METRICS,
    stats: Sequence[str] = st.DEFAULT_COMPARE_STATS,
    seed: int = 0,
    resamples: int = st.DEFAULT_RESAMPLES,
    min_change: float = 0.05,
    confidence: float = st.DEFAULT_CONFIDENCE,
    pair_on: str | None = None,
    arrival_tolerance_ns: int = DEFAULT_ARRIVAL_TOLERANCE_NS,
    goodput: Sequence[GoodputTarget] = (),
    baseline_label: str = "baseline",
    candidate_label: str = "candidate",
    max_resample_size: int = st.DEFAULT_MAX_RESAMPLE_SIZE,
) -> Comparison:
    """Compare a candidate trace with the baseline (the reference).

    Latency metrics get one row per statistic in ``stats``; throughput, goodput,
    cancelled and preemptions one row per statistic of their own. Metrics the traces
    cannot provide (no goodput targets, no prompt lengths) are skipped with a note.
    """
    specs, stat_names = _resolve(metrics, stats)
    match = match_workloads(base.requests, cand.requests, pair_on, arrival_tolerance_ns)
    ctx = _context(
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
    keys = [
        (spec.name, stat)
        for spec in specs
        for stat in (stat_names if spec.kind == "latency" else spec.stats)
    ]
    measured = _measure(ctx, keys)
    population = ctx.population
    rows = _rows_frame(measured, candidate_label)
    tests = pl.DataFrame(
        [{"candidate": candidate_label, **test} for test in ctx.tests], schema=TEST_SCHEMA
    )
    warnings = _warnings(match, population, stat_names, baseline_label, candidate_label)
    return Comparison(
        baseline_label=baseline_label,
        candidate_label=candidate_label,
        workload=match,
        rows=rows,
        tests=tests,
        decomposition=decompose(population.base, population.cand),
        buckets=length_buckets(population.base, population.cand) if match.paired else None,
        tradeoff=_tradeoff(measured, candidate_label),
        warnings=tuple(warnings),
        notes=tuple(ctx.notes),
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        min_change=min_change,
        max_resample_size=max_resample_size,
        measured=tuple(measured),
    )


def _rows_frame(measured: Sequence[Measured], label: str) -> pl.DataFrame:
    records = []
    for row in measured:
        spec, stat, ci, change = row.spec, row.stat, row.ci, row.change
        records.append(
            {
                "candidate": label,
                "metric": spec.name,
                "stat": stat,
                "unit": spec.unit_of(stat),
                "baseline": to_display(spec, stat, ci.baseline),
                "candidate_value": to_display(spec, stat, ci.candidate),
                "ratio": change.ratio,
                "ci_low": change.ci_low,
                "ci_high": change.ci_high,
                "p_value": change.p_value,
                "significant": change.significant,
                "better": spec.better,
                "verdict": change.verdict,
                "words": change.words,
                "paired": row.paired,
                "method": ci.method,
                "n_baseline": ci.n_baseline,
                "n_candidate": ci.n_candidate,
            }
        )
    return pl.DataFrame(records, schema=ROW_SCHEMA)


def _warnings(
    match: WorkloadMatch,
    population: _Population,
    stats: Sequence[str],
    base_label: str,
    cand_label: str,
) -> list[str]:
    out: list[str] = []
    if not match.paired:
        out.append(f"{cand_label}: {match.message}")
    sides: tuple[tuple[str, int], ...] = (
        (base_label, population.base.height),
        (cand_label, population.cand.height),
    )
    if match.paired and min(population.base.height, population.cand.height) == 0:
        out.append(
            "no request completed in both traces, so there are no completed requests to "
            "compare: no latency can be compared "
            "(see cancelled.* and the outcomes)"
        )
        sides = ()
    for label, n in sides:
        if n == 0:
            out.append(f"{label} has no completed requests to compare")
        elif n < st.MIN_SAMPLES:
            out.append(
                f"only {n} completed requests in {label}: too few to call any latency "
                f"change significant (need {st.MIN_SAMPLES})"
            )
    n = min(population.base.height, population.cand.height)
    for stat in stats:
        q = st.percentile_of(stat)
        if q is None or q >= 100.0 or n == 0:
            continue
        if n * (1.0 - q / 100.0) < TAIL_VALUES:
            need = math.ceil(TAIL_VALUES / (1.0 - q / 100.0))
            out.append(
                f"{stat} rests on fewer than {TAIL_VALUES} requests above it (n={n}); "
                f"treat it as unreliable (it needs about {need} completed requests)"
            )
    return out


def _tradeoff(measured: Sequence[Measured], label: str) -> str | None:
    """ "B trades 27 ms of TTFT p50 for 155 ms of ITL p99": when TTFT moves one way and
    ITL (TPOT when ITL was not compared) the other, both significantly, the largest such
    move of each, by absolute delta."""

    def moves(metric: str) -> list[tuple[str, float, Measured]]:
        out: list[tuple[str, float, Measured]] = []
        for m in measured:
            delta = _delta_ms(m)
            if m.spec.name == metric and m.change.significant and delta is not None:
                out.append((m.change.verdict, abs(delta), m))
        return out

    ttft = moves("ttft")
    stream = moves("itl") or moves("tpot")
    for worse_side, better_side in ((ttft, stream), (stream, ttft)):
        worse = [x for x in worse_side if x[0] == "slower"]
        better = [x for x in better_side if x[0] == "faster"]
        if worse and better:
            _, lost, w = max(worse, key=lambda x: x[1])
            _, gained, b = max(better, key=lambda x: x[1])
            return (
                f"{label} trades {_short(lost)} of {w.spec.name.upper()} {w.stat} for "
                f"{_short(gained)} of {b.spec.name.upper()} {b.stat}"
            )
    return None


def _delta_ms(row: Measured) -> float | None:
    if row.ci.baseline is None or row.ci.candidate is None:
        return None
    return (row.ci.candidate - row.ci.baseline) / NS_PER_MS


def _short(ms: float) -> str:
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1000:.3g} µs"
