"""Percentiles, confidence intervals and significance tests: pure functions on arrays.

Everything here takes numpy arrays or Polars Series (nulls and NaNs are dropped) and
returns plain floats or small frozen dataclasses; nothing reads files or prints.

Method (DESIGN §6, STYLE "compare"):

- Percentiles use linear interpolation between order statistics (numpy's default,
  ``PERCENTILE_METHOD``), population standard deviation (ddof=0).
- A change is the ratio ``candidate / baseline`` of one statistic. Its confidence
  interval is a percentile bootstrap of that same statistic, so a p99 row is judged on
  the p99 and not on the median:

  * paired (the same requests ran in both traces): requests are resampled as pairs, the
    statistic is computed on both sides of each resample and their ratio kept;
  * unpaired: each side is resampled on its own. For percentiles the resampled order
    statistics are drawn exactly from their Beta distributions (the k-th smallest of m
    uniform draws is Beta(k, m-k+1)), which is the ordinary bootstrap of the percentile
    at O(resamples) cost, for any sample size; means and standard deviations resample
    values.
  * Resamples that would hold more than ``max_resample_size`` values are drawn with
    ``max_resample_size`` values instead and their spread is rescaled by
    ``sqrt(m / n)`` (the m-out-of-n bootstrap), which bounds time and memory.
  * Clustered samples (ITL gaps, many per request) pass an effective sample size
    ``n / design_effect``: the bootstrap then has the spread of ``n_eff`` independent
    values, not of ``n`` correlated ones.

  The two-sided bootstrap p-value is ``2 * min(P*(ratio <= 1), P*(ratio >= 1))`` with
  the usual +1 correction; the interval and the p-value come from the same resamples.
- Rank tests describe the whole distribution: Wilcoxon signed-rank on paired
  differences, Mann-Whitney U for independent samples (``paired_test``/``unpaired_test``).
- Rates (requests/s, tokens/s) and event counts have no per-resample statistic: their
  ratio gets a Wald interval on the log scale with compound-Poisson variance
  (``rate_ratio_ci``).
- Every random step is seeded; resamples for one side depend only on the seed and that
  side's data, so swapping baseline and candidate inverts every ratio and interval.
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import stats as sps

FloatArray = npt.NDArray[np.float64]
ArrayLike = pl.Series | npt.NDArray[np.generic] | Sequence[float] | Sequence[int]
Better = Literal["lower", "higher"]
Verdict = Literal["slower", "faster", "no significant change"]

PERCENTILE_METHOD: Final = "linear"
# The summary statistics of every metric, in report order (DESIGN §6).
STATISTICS: tuple[str, ...] = (
    "count",
    "mean",
    "std",
    "min",
    "p50",
    "p90",
    "p95",
    "p99",
    "p99_9",
    "max",
)
DEFAULT_COMPARE_STATS: tuple[str, ...] = ("mean", "p50", "p90", "p99")
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
# Resamples larger than this are drawn m-out-of-n and rescaled; see the module docstring.
DEFAULT_MAX_RESAMPLE_SIZE = 5000
# Below this many values on either side no change is called significant.
MIN_SAMPLES = 10
# Values gathered per bootstrap block: bounds memory whatever the sample size.
_BLOCK_VALUES = 4_000_000

STAT_ALIASES: dict[str, str] = {"median": "p50", "avg": "mean", "average": "mean", "p999": "p99_9"}
_PERCENTILE_RE = re.compile(r"^p(\d{1,2}|100)(?:_(\d+))?$")


# --------------------------------------------------------------------------- statistics
def canonical_stat(stat: str) -> str:
    """The canonical spelling of a statistic name (``median`` → ``p50``)."""
    stat = stat.strip().lower()
    return STAT_ALIASES.get(stat, stat)


def percentile_of(stat: str) -> float | None:
    """The percentile (0-100) a statistic stands for, or None if it is not one.

    ``p50`` → 50, ``p99_9`` → 99.9, ``min`` → 0, ``max`` → 100.
    """
    stat = canonical_stat(stat)
    if stat == "min":
        return 0.0
    if stat == "max":
        return 100.0
    match = _PERCENTILE_RE.match(stat)
    if match is None:
        return None
    value = float(match.group(1) + ("." + match.group(2) if match.group(2) else ""))
    return value if value <= 100.0 else None


def is_statistic(stat: str) -> bool:
    """Whether ``stat`` names a statistic of a distribution (``count``, ``mean``, ``p75``…)."""
    stat = canonical_stat(stat)
    return stat in ("count", "mean", "std") or percentile_of(stat) is not None


def to_array(values: ArrayLike) -> FloatArray:
    """Float64 numpy array of the values, nulls and NaNs dropped."""
    if isinstance(values, pl.Series):
        values = values.drop_nulls().cast(pl.Float64).to_numpy()
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size and np.isnan(array).any():
        array = array[~np.isnan(array)]
    return array


def statistic(values: ArrayLike, stat: str) -> float | None:
    """One statistic of the values (None when there are none)."""
    array = to_array(values)
    stat = canonical_stat(stat)
    if stat == "count":
        return float(array.size)
    if array.size == 0:
        return None
    if stat == "mean":
        return float(array.mean())
    if stat == "std":
        return float(array.std())
    q = percentile_of(stat)
    if q is None:
        raise ValueError(f"unknown statistic {stat!r}")
    return float(np.percentile(array, q, method=PERCENTILE_METHOD))


def describe(values: ArrayLike) -> dict[str, float | int | None]:
    """count, mean, std (population), min, p50, p90, p95, p99, p99_9, max.

    Percentiles use linear interpolation. With no values, count is 0 and the rest None.
    A Polars Series is described by Polars itself (multi-threaded, no Float64 copy of a
    pooled ITL column of millions of gaps); its linear quantiles equal numpy's.
    """
    if isinstance(values, pl.Series) and values.dtype.is_numeric():
        return _describe_series(values)
    array = to_array(values)
    if array.size == 0:
        return {name: (0 if name == "count" else None) for name in STATISTICS}
    names = [name for name in STATISTICS if name not in ("count", "mean", "std")]
    qs = [q for q in map(percentile_of, names) if q is not None]
    points = np.percentile(array, qs, method=PERCENTILE_METHOD)
    result: dict[str, float | int | None] = {
        "count": int(array.size),
        "mean": float(array.mean()),
        "std": float(array.std()),
    }
    result.update({name: float(point) for name, point in zip(names, points, strict=True)})
    return {name: result[name] for name in STATISTICS}


def _describe_series(values: pl.Series) -> dict[str, float | int | None]:
    column = pl.col("v").drop_nulls()
    if values.dtype.is_float():
        column = column.drop_nans()
    exprs = {
        "count": column.count(),
        "mean": column.mean(),
        "std": column.std(ddof=0),
        "min": column.min(),
        "max": column.max(),
    }
    for name in STATISTICS:
        q = percentile_of(name)
        if q is not None and name not in exprs:
            exprs[name] = column.quantile(q / 100, interpolation="linear")
    row = (
        values.rechunk()
        .to_frame("v")
        .select(**{name: expr.cast(pl.Float64) for name, expr in exprs.items()})
        .row(0, named=True)
    )
    count = int(row["count"] or 0)
    if count == 0:
        return {name: (0 if name == "count" else None) for name in STATISTICS}
    return {name: count if name == "count" else row[name] for name in STATISTICS}


def ratio_of(numerator: float, denominator: float) -> float:
    """``numerator / denominator`` with 0/0 = 1 (no change) and x/0 = inf."""
    if denominator == 0:
        return 1.0 if numerator == 0 else math.inf
    return numerator / denominator


def _ratios(numerator: FloatArray, denominator: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = numerator / denominator
    zero = denominator == 0
    if zero.any():
        out[zero] = np.where(numerator[zero] == 0, 1.0, np.inf)
    return out


# --------------------------------------------------------------------------- bootstrap
@dataclass(frozen=True)
class RatioCI:
    """A ratio ``candidate / baseline`` of one statistic with its interval and p-value."""

    stat: str
    baseline: float | None
    candidate: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    confidence: float
    method: str  # "paired bootstrap" | "bootstrap" | "poisson" | "none"
    resamples: int
    seed: int
    n_baseline: int
    n_candidate: int
    m_baseline: int = 0  # values per resample actually drawn (m-out-of-n when < n)
    m_candidate: int = 0

    @property
    def excludes_one(self) -> bool:
        """Whether the interval lies entirely on one side of "no change"."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 1.0 or self.ci_high < 1.0


def _side_keys(base: FloatArray, cand: FloatArray) -> tuple[int, int]:
    """Random-stream ids for the two sides, assigned from their content.

    The side whose data sorts first gets stream 0, so swapping baseline and candidate
    gives each sample the same resamples (exact inversion of ratios and intervals).
    """

    def key(array: FloatArray) -> tuple[int, bytes]:
        return array.size, hashlib.blake2b(array.tobytes(), digest_size=16).digest()

    return (0, 1) if key(base) < key(cand) else (1, 0)


# Purpose tags of the random streams, so no two kinds of draw share one.
_ORDER_STATS = 1
_GATHER = 2
_PAIRED_STREAM = 2  # stream id of paired resamples (unpaired sides use 0 and 1)


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def _order_stat_bootstrap(
    ordered: FloatArray, q: float, m: int, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Percentile ``q`` of ``resamples`` bootstrap samples of size ``m``, exactly.

    The k-th smallest of m uniform draws is Beta(k, m-k+1); the next one is that plus
    (1 - it) times Beta(1, m-k-1). Mapping a uniform u to ``ordered[floor(u n)]`` is one
    draw with replacement, and it keeps order, so these are the resample's order
    statistics without building the resample.
    """
    n = ordered.size
    h = (m - 1) * q / 100.0
    k = min(math.floor(h), m - 1)
    frac = h - k
    lower = rng.beta(k + 1, m - k, size=resamples)
    low_index = np.minimum((lower * n).astype(np.int64), n - 1)
    values = ordered[low_index]
    if frac > 0 and k + 1 < m:
        upper = lower + (1.0 - lower) * rng.beta(1, m - k - 1, size=resamples)
        high_index = np.minimum((upper * n).astype(np.int64), n - 1)
        values = values + frac * (ordered[high_index] - values)
    return values


def _gather_stats(values: FloatArray, stats: Sequence[str]) -> dict[str, FloatArray]:
    """Statistics of each row of a (resamples, m) block; partitions ``values`` in place.

    Percentiles interpolate linearly between the order statistics at ``floor(h)`` and
    ``floor(h) + 1``, ``h = (m - 1) q / 100`` (numpy's "linear" method), found with one
    partition of the block for every percentile at once.
    """
    out: dict[str, FloatArray] = {}
    for stat in stats:
        if stat == "mean":
            out[stat] = values.mean(axis=1)
        elif stat == "std":
            out[stat] = values.std(axis=1)
    m = values.shape[1]
    positions: list[tuple[str, int, float]] = []
    for stat in stats:
        q = percentile_of(stat)
        if q is not None:
            h = (m - 1) * q / 100.0
            low = min(math.floor(h), m - 1)
            positions.append((stat, low, h - low))
    if positions:
        kth = sorted({p for _, low, _ in positions for p in (low, min(low + 1, m - 1))})
        values.partition(kth, axis=1)
        for stat, low, frac in positions:
            below = values[:, low]
            if frac > 0.0:
                out[stat] = below + frac * (values[:, low + 1] - below)
            else:
                out[stat] = below.copy()
    return out


def _blocks(resamples: int, m: int) -> Iterable[tuple[int, int]]:
    rows = max(1, _BLOCK_VALUES // max(m, 1))
    for start in range(0, resamples, rows):
        yield start, min(resamples, start + rows)


def _resample_stats(
    arrays: Sequence[FloatArray],
    stats: Sequence[str],
    m: int,
    resamples: int,
    seed: int,
    stream: int,
) -> list[dict[str, FloatArray]]:
    """Bootstrap statistics of one or more equally long arrays resampled with shared rows."""
    n = arrays[0].size
    results: list[dict[str, list[FloatArray]]] = [{s: [] for s in stats} for _ in arrays]
    dtype = np.int32 if n < 2**31 else np.int64
    for block, (start, stop) in enumerate(_blocks(resamples, m)):
        rng = _rng(seed, _GATHER, stream, n, m, block)
        index = rng.integers(0, n, size=(stop - start, m), dtype=dtype)
        for array, result in zip(arrays, results, strict=True):
            for stat, row in _gather_stats(array[index], stats).items():
                result[stat].append(row)
    return [{s: np.concatenate(rows) for s, rows in result.items()} for result in results]


def _rescale(point: float, boot: FloatArray, scale: float) -> FloatArray:
    """m-out-of-n: shrink the spread of bootstrap values around ``point`` by ``scale``.

    Done on the log scale (``point * (boot / point) ** scale``), which keeps values
    positive and maps a ratio's inverse to the inverse.
    """
    if scale == 1.0 or not math.isfinite(point) or point <= 0:
        return boot
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.asarray(point * np.power(boot / point, scale), dtype=np.float64)


def _interval(boot_ratios: FloatArray, confidence: float) -> tuple[float, float, float]:
    """Percentile interval and two-sided p-value from bootstrap ratios.

    The bounds are the j-th smallest and j-th largest values, j = floor(alpha/2 (B-1)),
    so inverting every ratio exactly swaps and inverts the bounds.
    """
    ordered = np.sort(boot_ratios)
    count = ordered.size
    j = math.floor((1.0 - confidence) / 2.0 * (count - 1))
    low, high = float(ordered[j]), float(ordered[count - 1 - j])
    at_most = int(np.count_nonzero(ordered <= 1.0))
    at_least = int(np.count_nonzero(ordered >= 1.0))
    p_value = min(1.0, 2.0 * (min(at_most, at_least) + 1) / (count + 1))
    return low, high, p_value


def _effective(n: int, n_eff: float | None) -> float:
    if n_eff is None:
        return float(n)
    return float(min(max(n_eff, 1.0), n))


def bootstrap_ratio_cis(
    base: ArrayLike,
    cand: ArrayLike,
    stats: Sequence[str],
    *,
    paired: bool,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    max_resample_size: int = DEFAULT_MAX_RESAMPLE_SIZE,
    n_eff_base: float | Mapping[str, float] | None = None,
    n_eff_cand: float | Mapping[str, float] | None = None,
) -> dict[str, RatioCI]:
    """Bootstrap intervals for ``stat(cand) / stat(base)``, for several statistics at once.

    ``paired``: ``base[i]`` and ``cand[i]`` are the same request (arrays of equal length,
    nulls dropped pairwise). ``n_eff_*``: effective sample sizes of clustered samples
    (one number, or one per statistic), unpaired only. Statistics: ``mean``, ``std``,
    ``min``, ``max`` and percentiles ``pNN``.
    """
    stats = [canonical_stat(s) for s in stats]
    for stat in stats:
        if stat == "count" or not is_statistic(stat):
            raise ValueError(f"cannot bootstrap statistic {stat!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if paired:
        b_raw = _paired_array(base)
        c_raw = _paired_array(cand)
        if b_raw.size != c_raw.size:
            raise ValueError("paired samples must have the same length")
        keep = ~(np.isnan(b_raw) | np.isnan(c_raw))
        b, c = b_raw[keep], c_raw[keep]
    else:
        b, c = to_array(base), to_array(cand)

    points = {stat: (statistic(b, stat), statistic(c, stat)) for stat in stats}

    def empty(stat: str) -> RatioCI:
        pb, pc = points[stat]
        ratio = ratio_of(pc, pb) if pb is not None and pc is not None else None
        return RatioCI(
            stat=stat,
            baseline=pb,
            candidate=pc,
            ratio=ratio,
            ci_low=None,
            ci_high=None,
            p_value=None,
            confidence=confidence,
            method="none",
            resamples=resamples,
            seed=seed,
            n_baseline=int(b.size),
            n_candidate=int(c.size),
        )

    if b.size == 0 or c.size == 0:
        return {stat: empty(stat) for stat in stats}

    boot: dict[str, FloatArray] = {}
    m_b = m_c = 0
    if paired:
        n = b.size
        m = min(n, max_resample_size)
        m_b = m_c = m
        sides = _resample_stats([b, c], stats, m, resamples, seed, stream=_PAIRED_STREAM)
        scale = math.sqrt(m / n)
        for stat in stats:
            ratios = _ratios(sides[1][stat], sides[0][stat])
            point = ratio_of(_known(points[stat][1]), _known(points[stat][0]))
            boot[stat] = _rescale(point, ratios, scale)
        method = "paired bootstrap"
    else:
        stream_b, stream_c = _side_keys(b, c)
        boot_b, m_b = _unpaired_side(
            b,
            stats,
            stream_b,
            n_eff_base,
            resamples,
            seed,
            max_resample_size,
            {stat: _known(points[stat][0]) for stat in stats},
        )
        boot_c, m_c = _unpaired_side(
            c,
            stats,
            stream_c,
            n_eff_cand,
            resamples,
            seed,
            max_resample_size,
            {stat: _known(points[stat][1]) for stat in stats},
        )
        for stat in stats:
            boot[stat] = _ratios(boot_c[stat], boot_b[stat])
        method = "bootstrap"

    out: dict[str, RatioCI] = {}
    for stat in stats:
        pb, pc = _known(points[stat][0]), _known(points[stat][1])
        low, high, p_value = _interval(boot[stat], confidence)
        out[stat] = RatioCI(
            stat=stat,
            baseline=pb,
            candidate=pc,
            ratio=ratio_of(pc, pb),
            ci_low=low,
            ci_high=high,
            p_value=p_value,
            confidence=confidence,
            method=method,
            resamples=resamples,
            seed=seed,
            n_baseline=int(b.size),
            n_candidate=int(c.size),
            m_baseline=m_b,
            m_candidate=m_c,
        )
    return out


def _known(value: float | None) -> float:
    if value is None:
        raise ValueError("statistic of an empty sample")
    return value


def _paired_array(values: ArrayLike) -> FloatArray:
    if isinstance(values, pl.Series):
        return values.cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)
    return np.asarray(values, dtype=np.float64).ravel()


def _unpaired_side(
    array: FloatArray,
    stats: Sequence[str],
    stream: int,
    n_eff: float | Mapping[str, float] | None,
    resamples: int,
    seed: int,
    max_resample_size: int,
    points: Mapping[str, float],
) -> tuple[dict[str, FloatArray], int]:
    """Bootstrap values of each statistic for one side of an unpaired comparison.

    Returns them with the largest number of values per resample that was drawn.
    """
    n = array.size
    ordered = np.sort(array)
    out: dict[str, FloatArray] = {}
    largest_m = 0
    by_size: dict[tuple[int, float], list[str]] = {}
    for stat in stats:
        value = n_eff.get(stat) if isinstance(n_eff, Mapping) else n_eff
        target = _effective(n, value)
        q = percentile_of(stat)
        if q is not None:
            m = max(1, round(target))
            rng = _rng(seed, _ORDER_STATS, stream, round(q * 1_000_000))
            out[stat] = _order_stat_bootstrap(ordered, q, m, resamples, rng)
        else:
            m = int(min(max(1, round(target)), max_resample_size))
            by_size.setdefault((m, target), []).append(stat)
        largest_m = max(largest_m, m)
    for (m, target), group in by_size.items():
        boot = _resample_stats([array], group, m, resamples, seed, stream)[0]
        for stat in group:
            out[stat] = _rescale(points[stat], boot[stat], math.sqrt(m / target))
    return out, largest_m


def bootstrap_ratio_ci(
    base: ArrayLike,
    cand: ArrayLike,
    stat: str,
    paired: bool,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    max_resample_size: int = DEFAULT_MAX_RESAMPLE_SIZE,
    n_eff_base: float | None = None,
    n_eff_cand: float | None = None,
) -> RatioCI:
    """Bootstrap interval for ``stat(cand) / stat(base)``; see ``bootstrap_ratio_cis``."""
    return bootstrap_ratio_cis(
        base,
        cand,
        [stat],
        paired=paired,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
        max_resample_size=max_resample_size,
        n_eff_base=n_eff_base,
        n_eff_cand=n_eff_cand,
    )[canonical_stat(stat)]


def design_effect(values: ArrayLike, clusters: ArrayLike) -> float:
    """Kish design effect of the mean of clustered values (at least 1).

    Ratio of the cluster-robust variance of the mean (clusters resampled whole) to the
    variance it would have if every value were independent. ``clusters`` are integer
    codes ``0..k-1`` aligned with ``values``. Use on indicators ``value <= q`` for the
    design effect of a percentile.
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    codes = np.asarray(clusters, dtype=np.int64).ravel()
    if y.size < 2:
        return 1.0
    centred = y - y.mean()
    total = float(np.dot(centred, centred))
    if total <= 0.0:
        return 1.0
    per_cluster = np.bincount(codes, weights=centred)
    k = int(np.count_nonzero(np.bincount(codes)))
    if k < 2:
        return float(y.size)
    robust = k / (k - 1) * float(np.dot(per_cluster, per_cluster))
    return float(min(max(robust / total, 1.0), y.size))


def rate_ratio_ci(
    base_contributions: ArrayLike,
    cand_contributions: ArrayLike,
    *,
    base_exposure: float = 1.0,
    cand_exposure: float = 1.0,
    base_value: float | None = None,
    cand_value: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    stat: str = "rate",
) -> RatioCI:
    """Ratio of two rates ``sum(x) / exposure`` with a compound-Poisson Wald interval.

    Each element of ``*_contributions`` is what one request adds (1 for a request count,
    its output tokens for a token rate). Treating requests as a Poisson process, the
    variance of ``log(sum x)`` is ``sum(x**2) / sum(x)**2``; the interval is
    ``exp(log ratio ± z se)`` and the p-value two-sided. ``*_value`` overrides the point
    rates (e.g. the summary's own throughput) while the spread still comes from the
    contributions. A side summing to zero gets a continuity correction of half a unit.
    """
    xb, xc = to_array(base_contributions), to_array(cand_contributions)
    sb, sc = float(xb.sum()), float(xc.sum())
    vb = base_value if base_value is not None else (sb / base_exposure if base_exposure else None)
    vc = cand_value if cand_value is not None else (sc / cand_exposure if cand_exposure else None)
    if vb is None or vc is None:
        return RatioCI(
            stat=stat,
            baseline=vb,
            candidate=vc,
            ratio=None,
            ci_low=None,
            ci_high=None,
            p_value=None,
            confidence=confidence,
            method="none",
            resamples=0,
            seed=0,
            n_baseline=int(xb.size),
            n_candidate=int(xc.size),
        )
    ratio = ratio_of(vc, vb)
    if sb == 0 and sc == 0:
        return RatioCI(
            stat=stat,
            baseline=vb,
            candidate=vc,
            ratio=ratio,
            ci_low=None,
            ci_high=None,
            p_value=1.0,
            confidence=confidence,
            method="poisson",
            resamples=0,
            seed=0,
            n_baseline=int(xb.size),
            n_candidate=int(xc.size),
        )

    def rel_var(total: float, squares: float) -> tuple[float, float]:
        if total <= 0:
            return 0.5, 0.25  # continuity correction: half an event of size one
        return total, squares

    tb, qb = rel_var(sb, float(np.dot(xb, xb)))
    tc, qc = rel_var(sc, float(np.dot(xc, xc)))
    se = math.sqrt(qb / tb**2 + qc / tc**2)
    centre = (
        math.log(ratio)
        if 0 < ratio < math.inf
        else math.log((tc / (cand_exposure or 1.0)) / (tb / (base_exposure or 1.0)))
    )
    z = float(sps.norm.ppf(0.5 + confidence / 2.0))
    p_value = float(2.0 * sps.norm.sf(abs(centre) / se)) if se > 0 else 1.0
    return RatioCI(
        stat=stat,
        baseline=vb,
        candidate=vc,
        ratio=ratio,
        ci_low=math.exp(centre - z * se),
        ci_high=math.exp(centre + z * se),
        p_value=p_value,
        confidence=confidence,
        method="poisson",
        resamples=0,
        seed=0,
        n_baseline=int(xb.size),
        n_candidate=int(xc.size),
    )


# --------------------------------------------------------------------------- rank tests
@dataclass(frozen=True)
class TestResult:
    """A rank test of the whole distribution (not of one statistic)."""

    __test__ = False  # not a pytest class

    name: str  # "wilcoxon" | "mannwhitneyu" | "none"
    statistic: float | None
    p_value: float | None
    n_baseline: int
    n_candidate: int


def paired_test(base: ArrayLike, cand: ArrayLike) -> TestResult:
    """Wilcoxon signed-rank test of paired differences ``cand - base`` (two-sided).

    Zero differences are split between the signs (Pratt's treatment is not used: with
    ``zsplit`` an all-zero difference gives p = 1 instead of a division by zero). Fewer
    than two non-zero differences give p = 1 without calling scipy.
    """
    b, c = _paired_array(base), _paired_array(cand)
    if b.size != c.size:
        raise ValueError("paired samples must have the same length")
    keep = ~(np.isnan(b) | np.isnan(c))
    diff = c[keep] - b[keep]
    n = int(diff.size)
    if np.count_nonzero(diff) < 2:
        return TestResult("wilcoxon", 0.0, 1.0 if n else None, n, n)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = sps.wilcoxon(diff, zero_method="zsplit", alternative="two-sided")
    return TestResult("wilcoxon", _finite(result.statistic), _p(result.pvalue), n, n)


def unpaired_test(base: ArrayLike, cand: ArrayLike) -> TestResult:
    """Mann-Whitney U test of two independent samples (two-sided; U of the candidate).

    Empty samples give p = None; samples with a single common value give p = 1.
    """
    b, c = to_array(base), to_array(cand)
    if b.size == 0 or c.size == 0:
        return TestResult("mannwhitneyu", None, None, int(b.size), int(c.size))
    low = min(b.min(), c.min())
    if low == max(b.max(), c.max()):
        return TestResult("mannwhitneyu", b.size * c.size / 2.0, 1.0, int(b.size), int(c.size))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = sps.mannwhitneyu(c, b, alternative="two-sided")
    return TestResult(
        "mannwhitneyu", _finite(result.statistic), _p(result.pvalue), int(b.size), int(c.size)
    )


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _p(value: float) -> float:
    value = float(value)
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 1.0


# --------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Change:
    """The verdict on one ratio: significant only if the interval excludes no change,
    on the side of the point estimate, and the change is larger than ``min_change``."""

    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    significant: bool
    verdict: Verdict
    words: str  # "1.14x slower", "1.08x faster", "no significant change"
    better: Better


def assess_change(
    ci: RatioCI,
    better: Better,
    min_change: float = 0.05,
    *,
    speed: bool = True,
    min_samples: int = MIN_SAMPLES,
) -> Change:
    """Turn a ratio and its interval into a verdict (pyperf's rule).

    A change counts when the interval excludes 1 on the same side as the ratio, the
    effect ``max(r, 1/r) - 1`` exceeds ``min_change``, and each side has at least
    ``min_samples`` values. "slower" means worse in the metric's direction: a higher
    latency or a lower throughput. ``speed=False`` words counts and fractions as
    "worse"/"better" instead of "slower"/"faster".
    """
    ratio = ci.ratio
    significant = False
    verdict: Verdict = "no significant change"
    if ratio is not None and ci.ci_low is not None and ci.ci_high is not None:
        up = ratio > 1.0 and ci.ci_low > 1.0
        down = ratio < 1.0 and ci.ci_high < 1.0
        effect = max(ratio, 1.0 / ratio) - 1.0 if ratio > 0 else math.inf
        enough = ci.method == "poisson" or min(ci.n_baseline, ci.n_candidate) >= min_samples
        if (up or down) and effect > min_change and enough:
            significant = True
            worse = up if better == "lower" else down
            verdict = "slower" if worse else "faster"
    return Change(
        ratio=ratio,
        ci_low=ci.ci_low,
        ci_high=ci.ci_high,
        p_value=ci.p_value,
        significant=significant,
        verdict=verdict,
        words=change_words(ratio, verdict, speed=speed),
        better=better,
    )


def change_words(ratio: float | None, verdict: Verdict, *, speed: bool = True) -> str:
    """ "1.14x slower", "1.08x faster" (pyperf's wording), or "no significant change"."""
    if verdict == "no significant change" or ratio is None:
        return "no significant change"
    word = verdict if speed else ("worse" if verdict == "slower" else "better")
    factor = max(ratio, 1.0 / ratio) if ratio > 0 else math.inf
    if not math.isfinite(factor):
        return f"{word} (from or to zero)"
    return f"{factor:.2f}x {word}"
