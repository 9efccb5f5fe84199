"""Bootstrap intervals of ``stat(candidate) / stat(baseline)``: pure functions on arrays.

A change is the ratio of one statistic. Its confidence interval is a percentile bootstrap
of that same statistic, so a p99 row is judged on the p99 and not on the median:

- paired (the same requests ran in both traces): requests are resampled as pairs, the
  statistic is computed on both sides of each resample and their ratio kept;
- unpaired: each side is resampled on its own. For percentiles the resampled order
  statistics are drawn exactly from their Beta distributions (the k-th smallest of m
  uniform draws is Beta(k, m-k+1)), which is the ordinary bootstrap of the percentile at
  O(resamples) cost, for any sample size; means and standard deviations resample values.
- Resamples that would hold more than ``max_resample_size`` values are drawn with
  ``max_resample_size`` values instead and their spread is rescaled by ``sqrt(m / n)``
  (the m-out-of-n bootstrap), which bounds time and memory.
- Clustered samples (ITL gaps, many per request) pass an effective sample size
  ``n / design_effect``: the bootstrap then has the spread of ``n_eff`` independent
  values, not of ``n`` correlated ones.

The two-sided bootstrap p-value is ``2 * min(P*(ratio <= 1), P*(ratio >= 1))`` with the
usual +1 correction; the interval and the p-value come from the same resamples. Every
random step is seeded; resamples for one side depend only on the seed and that side's
data, so swapping baseline and candidate inverts every ratio and interval.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from servetrace.settings import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from servetrace.stats.describe import ArrayLike, FloatArray, paired_array, statistic, to_array
from servetrace.stats.names import canonical_stat, is_statistic, percentile_of
from servetrace.stats.ratio import RatioCI, ratio_of, ratios

# Resamples larger than this are drawn m-out-of-n and rescaled; see the module docstring.
DEFAULT_MAX_RESAMPLE_SIZE = 5000
# Values gathered per bootstrap block: bounds memory whatever the sample size.
_BLOCK_VALUES = 4_000_000


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
        b_raw = paired_array(base)
        c_raw = paired_array(cand)
        if b_raw.size != c_raw.size:
            raise ValueError("paired samples must have the same length")
        keep = ~(np.isnan(b_raw) | np.isnan(c_raw))
        b, c = b_raw[keep], c_raw[keep]
    else:
        b, c = to_array(base), to_array(cand)

    points = {stat: (statistic(b, stat), statistic(c, stat)) for stat in stats}

    def result(
        stat: str,
        method: str = "none",
        interval: tuple[float | None, float | None, float | None] = (None, None, None),
        m: tuple[int, int] = (0, 0),
    ) -> RatioCI:
        pb, pc = points[stat]
        low, high, p_value = interval
        return RatioCI(
            stat=stat,
            baseline=pb,
            candidate=pc,
            ratio=ratio_of(pc, pb) if pb is not None and pc is not None else None,
            ci_low=low,
            ci_high=high,
            p_value=p_value,
            confidence=confidence,
            method=method,
            resamples=resamples,
            seed=seed,
            n_baseline=int(b.size),
            n_candidate=int(c.size),
            m_baseline=m[0],
            m_candidate=m[1],
        )

    if b.size == 0 or c.size == 0:
        return {stat: result(stat) for stat in stats}

    boot: dict[str, FloatArray] = {}
    m_b = m_c = 0
    if paired:
        n = b.size
        m = min(n, max_resample_size)
        m_b = m_c = m
        sides = _resample_stats([b, c], stats, m, resamples, seed, stream=_PAIRED_STREAM)
        scale = math.sqrt(m / n)
        for stat in stats:
            paired_ratios = ratios(sides[1][stat], sides[0][stat])
            point = ratio_of(_known(points[stat][1]), _known(points[stat][0]))
            boot[stat] = _rescale(point, paired_ratios, scale)
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
            boot[stat] = ratios(boot_c[stat], boot_b[stat])
        method = "bootstrap"

    return {
        stat: result(stat, method, _interval(boot[stat], confidence), (m_b, m_c)) for stat in stats
    }


def _known(value: float | None) -> float:
    if value is None:
        raise ValueError("statistic of an empty sample")
    return value


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
