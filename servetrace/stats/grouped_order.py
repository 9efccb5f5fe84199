"""Every group's sample in order, from one sort: order statistics by index arithmetic.

``--by`` needs each group's percentiles and their intervals (order statistics ``X_(r)``)
of the pooled ITL gaps — millions of values in hundreds of groups. One sort of the
values by (group, value) lays each group's sorted sample out in one array; group ``i``
holds ``ordered[offsets[i] : offsets[i] + sizes[i]]``, and ``X_(r)`` of every group is
one gather. Integers whose range fits sort as one int64 key ``code · span + (v − min)``
(NumPy's vectorised sort); other values by value, then stably by group.

``percentiles`` interpolates linearly between order statistics with the arithmetic of
Polars' ``quantile(interpolation="linear")``, which ``stats.describe`` uses: at
``h = (n − 1)·q``, ``X_⌊h⌋ + (h − ⌊h⌋)·(X_⌈h⌉ − X_⌊h⌋)`` (the lower value when the two are
equal), so a group gets the bits ``describe`` of the group alone gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
_KEY_LIMIT = 2**62  # combined sort keys stay below this


@dataclass(frozen=True)
class GroupedSample:
    """``ordered[offsets[i] : offsets[i] + sizes[i]]`` is group ``i``'s sorted sample."""

    ordered: npt.NDArray[np.generic]
    offsets: IntArray
    sizes: IntArray

    def at(self, ranks: IntArray) -> npt.NDArray[np.float64]:
        """``X_(r)`` (1-based) of each group, r clipped into 1..n (0 for an empty group)."""
        if self.ordered.size == 0:
            return np.zeros(self.sizes.size)
        r = np.clip(ranks, 1, np.maximum(self.sizes, 1))
        return self.ordered[np.minimum(self.offsets + r - 1, self.ordered.size - 1)].astype(
            np.float64
        )


def sort_by_group(codes: npt.ArrayLike, values: npt.ArrayLike, groups: int) -> GroupedSample:
    """Group ``codes`` (0..groups−1) and their values, sorted by (group, value)."""
    code = np.asarray(codes, dtype=np.int64)
    value = np.asarray(values)
    sizes = np.bincount(code, minlength=groups).astype(np.int64)
    offsets = np.cumsum(sizes) - sizes
    if value.size == 0:
        return GroupedSample(value, offsets, sizes)
    if value.dtype.kind in "iu":
        low, high = int(value.min()), int(value.max())
        span = high - low + 1
        if groups * span < _KEY_LIMIT:
            key = code * span
            key += value.astype(np.int64, copy=False)
            key -= low
            key.sort()
            # sorted by code first: group i's keys sit at offsets[i]..; take its base off
            key -= np.repeat(np.arange(groups, dtype=np.int64) * span - low, sizes)
            return GroupedSample(key.astype(value.dtype, copy=False), offsets, sizes)
    by_value = np.argsort(value, kind="stable")
    order = by_value[np.argsort(code[by_value], kind="stable")]
    return GroupedSample(value[order], offsets, sizes)


def percentiles(sample: GroupedSample, q: float) -> npt.NDArray[np.float64]:
    """The linear-interpolation ``q``-quantile (0..1) of each non-empty group (NaN for
    an empty one), as Polars computes it for the group alone."""
    n = sample.sizes
    if sample.ordered.size == 0:
        return np.full(n.size, np.nan)
    h = (n.astype(np.float64) - 1.0) * q
    low = np.floor(h).astype(np.int64)
    high = np.ceil(h).astype(np.int64)
    last = sample.ordered.size - 1
    lower = sample.ordered[np.clip(sample.offsets + low, 0, last)].astype(np.float64)
    upper = sample.ordered[np.clip(sample.offsets + high, 0, last)].astype(np.float64)
    out = np.where(lower == upper, lower, (h - low) * (upper - lower) + lower)
    return np.where(n > 0, out, np.nan)
