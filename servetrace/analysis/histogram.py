"""Pooled ITL gaps of a streamed trace: exact while they fit, a log histogram beyond.

A streamed trace cannot always keep every gap (1e9 events ⇒ ~8 GB of gaps), so each
batch hands its gaps to a ``PooledGaps``. It keeps them as they are until a budget of
``EXACT_GAPS`` values is used up: its distribution is then computed by the very function
the in-memory engine uses (``stats.describe``), so the percentiles, min, max and count
are identical. Beyond the budget the gaps go into a ``LogHistogram``:

- count, min and max are exact; mean and std come from exact integer sums (Σv, Σv²);
- each bucket holds the values whose ``floor(log1p(v) · RESOLUTION)`` is its key, and
  remembers its own smallest and largest value;
- a percentile is linear interpolation, as in memory, between the order statistics of
  rank ``⌊h⌋`` and ``⌊h⌋ + 1`` (``h = q · (n − 1)``). Each order statistic is read from
  its bucket: exactly when it is the bucket's first or last value (or the bucket holds
  one value), otherwise as the bucket's log-midpoint ``expm1((log1p(lo) + log1p(hi))/2)``.

The bound (``RELATIVE_BOUND``). In a bucket ``log1p(hi) − log1p(lo) < 1/R``, so the
midpoint ``x̂`` of a value ``x`` in it satisfies ``|log1p(x̂) − log1p(x)| ≤ δ = 1/(2R)``,
hence ``|x̂ − x| ≤ (e^δ − 1)(1 + x)``. Two integers share a bucket only when
``ln((k + 2)/(k + 1)) < 1/R``, i.e. ``k ≥ R − 2``, so an estimated (not exact) value is at
least ``m = R − 2`` ns and ``|x̂ − x| ≤ (e^δ − 1)(1 + 1/m) · x = ε · x``. The percentile
is a convex combination ``(1 − f)·x_j + f·x_{j+1}`` of two non-negative order statistics;
the same combination of their estimates is off by at most ``(1 − f)·ε·x_j + f·ε·x_{j+1}
= ε · P``. With ``R = 4096``: ε = 1.2211e-4, every streamed percentile is within ±0.01222 %
of the in-memory one (so within the ±0.0123 % the docs state), on every input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from servetrace.analysis.metric_names import PERCENTILES, Distribution
from servetrace.stats.describe import describe
from servetrace.stats.moments import integer_moments, integer_sums
from servetrace.stats.names import STATISTICS

RESOLUTION = 4096  # buckets per e-fold of (1 + v): log-width 1/4096
EXACT_GAPS = 4_000_000  # gaps kept as they are (32 MB of Int64) before the histogram
# Worst relative error of a percentile read from the histogram (derivation above).
RELATIVE_BOUND = math.expm1(1 / (2 * RESOLUTION)) * (1 + 1 / (RESOLUTION - 2))
# The gap frame of an engine (``metrics.gap_frame``): request key, gap.
GAP_SCHEMA: dict[str, pl.DataType] = {"_key": pl.Int64(), "itl_ns": pl.Int64()}


def _empty() -> Distribution:
    return {name: (0 if name == "count" else None) for name in STATISTICS}


def _combined(buckets: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Bucket frames of several histograms as one: counts added, extremes kept."""
    return (
        pl.concat(buckets)
        .group_by("b")
        .agg(pl.col("n").sum(), pl.col("lo").min(), pl.col("hi").max())
    )


@dataclass
class LogHistogram:
    """Mergeable log-bucketed histogram of non-negative integer gaps (ns)."""

    buckets: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(
            schema={"b": pl.Int64, "n": pl.Int64, "lo": pl.Int64, "hi": pl.Int64}
        )
    )
    n: int = 0
    total: int = 0  # Σ v, exact
    total_sq: int = 0  # Σ v², exact (Int128 inside Polars, a Python int here)

    def add(self, values: pl.Series) -> None:
        values = values.drop_nulls().cast(pl.Int64)
        if values.len() == 0:
            return
        raw = values.to_numpy()
        n, total, total_sq = integer_sums(raw)  # exact, as the Int128 sums were
        self.n += n
        self.total += total
        self.total_sq += total_sq
        # The bucket key in Polars (the same log1p as every histogram ever written), the
        # per-bucket count, min and max in NumPy over a dense range of keys: a batch's
        # ~2 M gaps fall in a few thousand buckets, so this is three linear passes
        # instead of a hash group-by (a third of the time at 1e8 events).
        key = (values.cast(pl.Float64).clip(lower_bound=0.0).log1p() * RESOLUTION).floor()
        keys = key.cast(pl.Int64).to_numpy()
        base = int(keys.min())
        offsets = keys - base
        counts = np.bincount(offsets)
        lows = np.full(counts.size, np.iinfo(np.int64).max, dtype=np.int64)
        highs = np.full(counts.size, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(lows, offsets, raw)
        np.maximum.at(highs, offsets, raw)
        used = np.flatnonzero(counts)
        added = pl.DataFrame(
            {
                "b": used.astype(np.int64) + base,
                "n": counts[used].astype(np.int64),
                "lo": lows[used],
                "hi": highs[used],
            },
            schema=self.buckets.schema,
        )
        self.buckets = added if self.buckets.height == 0 else _combined([self.buckets, added])

    @classmethod
    def merged(cls, histograms: Sequence[LogHistogram]) -> LogHistogram:
        """One histogram of every value of ``histograms``: buckets added, sums exact."""
        merged = cls()
        frames = [h.buckets for h in histograms if h.n]
        if frames:
            merged.buckets = _combined(frames)
        merged.n = sum(h.n for h in histograms)
        merged.total = sum(h.total for h in histograms)
        merged.total_sq = sum(h.total_sq for h in histograms)
        return merged

    def describe(self) -> Distribution:
        if self.n == 0:
            return _empty()
        ordered = self.buckets.sort("b")
        counts = ordered["n"].to_numpy()
        lows = ordered["lo"].to_numpy().astype(np.float64)
        highs = ordered["hi"].to_numpy().astype(np.float64)
        ends = np.cumsum(counts)  # rank just past each bucket's last value
        starts = ends - counts

        def order_statistic(rank: int) -> float:
            i = int(np.searchsorted(ends, rank, side="right"))
            lo, hi = lows[i], highs[i]
            if rank == starts[i] or lo == hi:
                return float(lo)
            if rank == ends[i] - 1:
                return float(hi)
            return float(np.expm1((np.log1p(lo) + np.log1p(hi)) / 2))

        n = self.n
        # The exact sums rounded once, as the in-memory describe does: the same bits.
        mean, std = integer_moments(n, 0, self.total, self.total_sq)
        out: Distribution = {
            "count": n,
            "mean": mean,
            "std": std,
            "min": float(lows[0]),
        }
        for name, q in PERCENTILES.items():
            h = q * (n - 1)  # linear interpolation between order statistics, as in memory
            j = math.floor(h)
            fraction = h - j
            low = order_statistic(j)
            value = low if fraction == 0 else low + fraction * (order_statistic(j + 1) - low)
            out[name] = min(max(value, float(lows[0])), float(highs[-1]))
        out["max"] = float(highs[-1])
        return {name: out[name] for name in STATISTICS}


@dataclass
class GapBudget:
    """How many exact gaps the ``PooledGaps`` sharing this budget may hold together."""

    limit: int = EXACT_GAPS
    held: int = 0


class PooledGaps:
    """Every gap pooled across batches: exact within its budget, then a ``LogHistogram``.

    Several pools may share one ``GapBudget`` (one per ``--by`` group) so that together
    they never hold more than ``limit`` exact gaps; a pool that would exceed it moves its
    gaps into its histogram and frees its share.
    """

    def __init__(self, budget: GapBudget | None = None) -> None:
        self.budget = budget if budget is not None else GapBudget()
        self._exact: list[pl.Series] = []
        self._frames: list[pl.DataFrame] = []  # add_frame: the gaps with their request keys
        self._held = 0
        self.histogram: LogHistogram | None = None

    @property
    def exact(self) -> bool:
        """True while the distribution equals the in-memory one."""
        return self.histogram is None

    def add(self, values: pl.Series) -> None:
        values = values.drop_nulls()
        if values.len() == 0:
            return
        if self.histogram is None:
            if self.budget.held + values.len() <= self.budget.limit:
                self._exact.append(values)
                self._held += values.len()
                self.budget.held += values.len()
                return
            self._spill()
        assert self.histogram is not None
        self.histogram.add(values)

    def add_frame(self, gaps: pl.DataFrame, column: str = "itl_ns") -> None:
        """Gaps with their request keys (a gap frame): kept whole while exact, so a
        batched engine can hand on the very gap frame the in-memory engine has (the
        frame's column shares the kept values' memory: no copy)."""
        gaps = gaps.filter(pl.col(column).is_not_null())
        if gaps.height == 0:
            return
        fits = self.budget.held + gaps.height <= self.budget.limit
        if self.histogram is None and fits:
            self._frames.append(gaps)
        self.add(gaps[column])

    def frame(self, schema: dict[str, pl.DataType]) -> pl.DataFrame | None:
        """Every gap given to ``add_frame``, while exact; None once in the histogram."""
        if self.histogram is not None:
            return None
        if not self._frames:
            return pl.DataFrame(schema=schema)
        return pl.concat(self._frames, how="vertical_relaxed").select(list(schema))

    def _spill(self) -> None:
        histogram = LogHistogram()
        if self._exact:
            histogram.add(pl.concat(self._exact))
        self.budget.held -= self._held
        self._held = 0
        self._exact = []
        self._frames = []
        self.histogram = histogram

    def describe(self) -> Distribution:
        if self.histogram is not None:
            return self.histogram.describe()
        if not self._exact:
            return _empty()
        return describe(pl.concat(self._exact))


def add_by_group(
    pools: dict[object, PooledGaps], gaps: pl.DataFrame, by: str, budget: GapBudget
) -> None:
    """Each group's ``itl_ns`` into its pool (``--by`` streamed), the groups in the order
    of their values — not of the rows, which a join may shuffle, nor of hashing — so
    which pool spills past the shared budget is the same on every run."""
    parts = gaps.partition_by(by, as_dict=True)
    for value in gaps[by].unique().sort(nulls_last=True).to_list():
        pools.setdefault(value, PooledGaps(budget)).add(parts[(value,)]["itl_ns"])
