"""Measure statistics of two analyses: each ``(metric, stat)`` key becomes a ratio
``candidate / baseline`` with its interval and verdict, in internal units.

The engine behind ``compare`` (``servetrace.comparison.compare``) and behind the
regression budgets of ``check``. The baseline comes first (pyperf's rule).

**Statistics.** Paired populations (``servetrace.comparison.population``) compare the
requests completed in both traces with a paired bootstrap; unpaired ones each trace's
completed requests on their own. ITL pools gaps, which do not pair: it is always
bootstrapped unpaired, at the effective sample size of its design effect (gaps of one
request are correlated). Rates use the compound-Poisson interval, fractions the
unpaired bootstrap of the per-request indicator. A rank test of the whole distribution
(Wilcoxon or Mann-Whitney) is kept per metric next to the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.result import Analysis
from servetrace.analysis.summary import GoodputTarget
from servetrace.comparison.catalog import (
    COMPLETED,
    MetricSpec,
    MetricUnavailable,
    check_stat,
    get_metric,
)
from servetrace.comparison.population import Population, population
from servetrace.comparison.values import metric_value, outcome_contributions, window_s
from servetrace.comparison.workload import WorkloadMatch, match_workloads
from servetrace.errors import UsageError
from servetrace.settings import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from servetrace.stats.bootstrap import (
    DEFAULT_MAX_RESAMPLE_SIZE,
    bootstrap_ratio_ci,
    bootstrap_ratio_cis,
)
from servetrace.stats.clusters import design_effect
from servetrace.stats.names import PERCENTILE_METHOD, percentile_of
from servetrace.stats.rank_tests import paired_test, unpaired_test
from servetrace.stats.rates import rate_ratio_ci
from servetrace.stats.ratio import RatioCI
from servetrace.stats.verdicts import Change, assess_change


@dataclass(frozen=True)
class Measured:
    """One compared statistic: its metric, interval and verdict (internal units)."""

    spec: MetricSpec
    stat: str
    ci: RatioCI
    change: Change
    paired: bool


@dataclass(frozen=True)
class Skipped:
    """A metric (or one statistic of it) the traces cannot provide, and why."""

    metric: str
    stat: str | None
    reason: str


@dataclass
class Context:
    """What every measurement of one comparison shares; collects skips and rank tests."""

    base: Analysis
    cand: Analysis
    population: Population
    seed: int
    resamples: int
    confidence: float
    min_change: float
    max_resample_size: int
    goodput: tuple[GoodputTarget, ...]
    skipped: list[Skipped] = field(default_factory=list)
    tests: list[dict[str, Any]] = field(default_factory=list)


def validate(resamples: int, confidence: float, min_change: float) -> None:
    problems = []
    if resamples < 100:
        problems.append(f"resamples must be at least 100 (got {resamples})")
    if not 0.5 <= confidence < 1.0:
        problems.append(f"confidence must be in [0.5, 1) (got {confidence})")
    if min_change < 0:
        problems.append(f"min_change must not be negative (got {min_change})")
    if problems:
        raise UsageError("; ".join(problems))


def context(
    base: Analysis,
    cand: Analysis,
    match: WorkloadMatch,
    *,
    seed: int,
    resamples: int,
    confidence: float,
    min_change: float,
    max_resample_size: int,
    goodput: Sequence[GoodputTarget],
) -> Context:
    validate(resamples, confidence, min_change)
    return Context(
        base,
        cand,
        population(base, cand, match),
        seed,
        resamples,
        confidence,
        min_change,
        max_resample_size,
        tuple(goodput),
    )


# --------------------------------------------------------------------------- latency
def _array(frame: pl.DataFrame, column: str) -> np.ndarray:
    return frame.get_column(column).cast(pl.Float64).fill_null(np.nan).to_numpy()


def _clusters(gaps: pl.DataFrame) -> np.ndarray:
    return gaps.select(pl.col(KEY).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()


def _gap_n_eff(values: np.ndarray, codes: np.ndarray, stats: Sequence[str]) -> dict[str, float]:
    """Effective sample size of pooled gaps per statistic (n / design effect)."""
    out: dict[str, float] = {}
    if values.size == 0:
        return out
    for stat in stats:
        q = percentile_of(stat)
        if q is None:
            y = values
        else:
            cut = np.percentile(values, q, method=PERCENTILE_METHOD)
            y = (values <= cut).astype(np.float64)
        out[stat] = values.size / design_effect(y, codes)
    return out


def _has_gaps(requests: pl.DataFrame) -> bool:
    """Whether some request had two output ticks or more (so ITL gaps should exist)."""
    return bool((requests.get_column("ticks") > 1).any())


def _measure_latency(ctx: Context, spec: MetricSpec, stats: Sequence[str]) -> list[Measured]:
    pop = ctx.population
    boot_stats = [s for s in stats if s != "count"]
    if spec.source == "gaps":
        gb, gc = pop.base_gaps, pop.cand_gaps
        for gaps, requests in ((gb, pop.base), (gc, pop.cand)):
            if gaps.height == 0 and _has_gaps(requests):
                raise MetricUnavailable(
                    "no per-gap samples (a streamed analysis keeps only a histogram)"
                )
        b, c = _array(gb, spec.column), _array(gc, spec.column)
        paired = False
        # Gaps of one request are correlated: resample at the effective sample size.
        n_eff = {
            "n_eff_base": _gap_n_eff(b, _clusters(gb), boot_stats),
            "n_eff_cand": _gap_n_eff(c, _clusters(gc), boot_stats),
        }
        per_request = (_array(pop.base, "itl_mean_ns"), _array(pop.cand, "itl_mean_ns"))
        _rank_test(ctx, spec, *per_request, pop.paired, "itl_mean_ns per request")
    else:
        if spec.column not in pop.base.columns or spec.column not in pop.cand.columns:
            raise MetricUnavailable(f"{spec.name} is not in both analyses ({spec.description})")
        b, c = _array(pop.base, spec.column), _array(pop.cand, spec.column)
        if (b.size or c.size) and np.isnan(b).all() and np.isnan(c).all():
            # e.g. queue_wait and prefill of client-side traces, which see no admission
            raise MetricUnavailable(f"no completed request has a {spec.name} in either trace")
        paired = pop.paired
        n_eff = {}
        _rank_test(ctx, spec, b, c, paired, f"{spec.column} per request")
    cis = (
        bootstrap_ratio_cis(
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
        n_base = pop.base_gaps[KEY].n_unique()
        n_cand = pop.cand_gaps[KEY].n_unique()
        cis = {name: replace(ci, n_baseline=n_base, n_candidate=n_cand) for name, ci in cis.items()}
    out: list[Measured] = []
    for stat in stats:
        if stat == "count":
            ci = rate_ratio_ci(
                np.ones(int(np.count_nonzero(~np.isnan(b)))),
                np.ones(int(np.count_nonzero(~np.isnan(c)))),
                confidence=ctx.confidence,
                stat="count",
            )
        else:
            ci = cis[stat]
        out.append(_measured(ctx, spec, stat, ci, paired))
    return out


def _rank_test(
    ctx: Context, spec: MetricSpec, b: np.ndarray, c: np.ndarray, paired: bool, based_on: str
) -> None:
    result = paired_test(b, c) if paired else unpaired_test(b, c)
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


def _measured(ctx: Context, spec: MetricSpec, stat: str, ci: RatioCI, paired: bool) -> Measured:
    return Measured(spec, stat, ci, assess_change(ci, spec.better, ctx.min_change), paired)


# --------------------------------------------------------------------------- rates
def _measure_rate(ctx: Context, spec: MetricSpec, stats: Sequence[str]) -> list[Measured]:
    """throughput, goodput, cancelled and preemption rows."""
    out: list[Measured] = []
    for stat in stats:
        try:
            out.append(_measure_rate_stat(ctx, spec, stat))
        except MetricUnavailable as error:
            ctx.skipped.append(Skipped(spec.name, stat, error.message))
    return out


def _measure_rate_stat(ctx: Context, spec: MetricSpec, stat: str) -> Measured:
    base, cand = ctx.base, ctx.cand
    vb = metric_value(base, spec.name, stat, goodput=ctx.goodput)
    vc = metric_value(cand, spec.name, stat, goodput=ctx.goodput)
    if spec.name == "throughput" or stat in ("requests_per_s", "count"):
        xb = _rate_contributions(base, spec, stat, vb, ctx)
        xc = _rate_contributions(cand, spec, stat, vc, ctx)
        ci = rate_ratio_ci(
            xb, xc, base_value=vb, cand_value=vc, confidence=ctx.confidence, stat=stat
        )
    else:  # a fraction or mean over requests: the bootstrap of the per-request values
        xb = outcome_contributions(base, spec, stat, ctx.goodput)
        xc = outcome_contributions(cand, spec, stat, ctx.goodput)
        ci = bootstrap_ratio_ci(
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
    analysis: Analysis, spec: MetricSpec, stat: str, value: float | None, ctx: Context
) -> np.ndarray:
    """What each request adds to a rate or count, for its compound-Poisson variance."""
    requests = analysis.per_request
    if spec.name == "throughput":  # completed requests, as servetrace.analysis.summary counts
        done = requests.filter(pl.col("outcome") == COMPLETED)
        if stat == "requests_per_s":
            return np.ones(done.height)
        tokens = pl.col("output_tokens").cast(pl.Float64).fill_null(0)
        if stat == "total_tokens_per_s":
            tokens = tokens + pl.col("prompt_tokens").cast(pl.Float64).fill_null(0)
        return done.select(tokens).to_series().to_numpy()
    if spec.name == "goodput" and not ctx.goodput:
        # Only the summary's rate is known: as many unit events as good requests.
        window = window_s(analysis) or 0.0
        return np.ones(round((value or 0.0) * window))
    return outcome_contributions(analysis, spec, stat, ctx.goodput)


# --------------------------------------------------------------------------- measure
def measure_keys(ctx: Context, keys: Sequence[tuple[str, str]]) -> list[Measured]:
    """Measure ``(metric, stat)`` keys in ``ctx``; what cannot be measured is skipped."""
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
        if spec.is_distribution:
            try:
                out.extend(_measure_latency(ctx, spec, stats))
            except MetricUnavailable as error:
                ctx.skipped.append(Skipped(name, None, error.message))
        else:
            out.extend(_measure_rate(ctx, spec, stats))
    return out


def measure(
    base: Analysis,
    cand: Analysis,
    keys: Sequence[tuple[str, str]],
    *,
    match: WorkloadMatch | None = None,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    min_change: float = 0.05,
    max_resample_size: int = DEFAULT_MAX_RESAMPLE_SIZE,
    goodput: Sequence[GoodputTarget] = (),
    pair_on: str | None = None,
) -> tuple[list[Measured], list[Skipped]]:
    """Compare exactly the given ``(metric, stat)`` keys; returns the rows and the skips."""
    if match is None:
        match = match_workloads(base.per_request, cand.per_request, pair_on)
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
    return measure_keys(ctx, keys), ctx.skipped
