"""A mergeable log-bucketed histogram for pooled ITL gaps when a trace is streamed.

A streamed trace cannot keep every gap (1e9 events ⇒ ~8 GB of gaps), so each batch adds
its gaps here. Count, mean, std, min and max stay exact (running integer sums, so mean
and std are the bits the in-memory ``describe`` gives); percentiles come
from buckets of ``log1p(value)`` of width ``1 / RESOLUTION`` (0.025% relative), each
reported at its centre, so a percentile is within ±0.0125% of the sample of that rank
(exact percentiles interpolate linearly between two samples; this picks the bucket of
the upper one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from servetrace.stats.moments import integer_moments, integer_sums

RESOLUTION = 4000  # buckets per e-fold: relative bucket width 1/4000 ≈ 0.025%
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99_9": 0.999}


@dataclass
class LogHistogram:
    buckets: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"b": pl.Int64, "n": pl.Int64})
    )
    n: int = 0
    total: int = 0  # Σ gap, exact
    total_sq: int = 0  # Σ gap², exact
    lo: float | None = None
    hi: float | None = None

    def add(self, values: pl.Series) -> None:
        values = values.drop_nulls()
        if values.len() == 0:
            return
        as_float = values.cast(pl.Float64)
        n, total, total_sq = integer_sums(values.cast(pl.Int64).to_numpy())
        self.n += n
        self.total += total
        self.total_sq += total_sq
        lo, hi = float(as_float.min()), float(as_float.max())  # type: ignore[arg-type]
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        bucket = (pl.col("v").clip(lower_bound=0.0).log1p() * RESOLUTION).round(0).cast(pl.Int64)
        added = (
            pl.DataFrame({"v": as_float})
            .group_by(bucket.alias("b"))
            .agg(pl.len().cast(pl.Int64).alias("n"))
        )
        self.buckets = pl.concat([self.buckets, added]).group_by("b").agg(pl.col("n").sum())

    def describe(self) -> dict[str, float | int | None]:
        if self.n == 0:
            return dict.fromkeys(
                ("count", "mean", "std", "min", "p50", "p90", "p95", "p99", "p99_9", "max")
            ) | {"count": 0}
        mean, std = integer_moments(self.n, 0, self.total, self.total_sq)
        ordered = self.buckets.sort("b")
        keys = ordered["b"].to_numpy()
        cumulative = np.cumsum(ordered["n"].to_numpy())
        out: dict[str, float | int | None] = {
            "count": self.n,
            "mean": mean,
            "std": std,
            "min": self.lo,
        }
        for name, q in QUANTILES.items():
            rank = q * (self.n - 1)  # 0-based rank, as linear interpolation uses
            index = int(np.searchsorted(cumulative, rank + 1, side="left"))
            centre = float(np.expm1(keys[min(index, len(keys) - 1)] / RESOLUTION))
            out[name] = min(max(centre, self.lo or 0.0), self.hi or centre)
        out["max"] = self.hi
        return out
