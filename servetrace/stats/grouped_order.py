"""Every group's sample in order, from one sort: order statistics by index arithmetic.

``--by`` needs each group's percentiles and their intervals (order statistics ``X_(r)``)
of the pooled ITL gaps — millions of values in hundreds of groups. One sort of the
values by (group, value) lays each group's sorted sample out in one array; group ``i``
holds ``ordered[offsets[i] : offsets[i] + sizes[i]]``, and ``X_(r)`` of every group is
one gather. Integers whose range fits sort as one int64 key ``code << bits | (v − min)``
(NumPy's vectorised sort, in the key's memory: ``sort_packed``); other values (floats,
integers too wide for the bits the group codes leave) by value, then stably by group.

``percentiles`` interpolates linearly between order statistics with the arithmetic of
Polars' ``quantile(interpolation="linear")``, which ``stats.describe`` uses: at
``h = (n − 1)·q``, ``X_⌊h⌋ + (h − ⌊h⌋)·(X_⌈h⌉ − X_⌊h⌋)`` (the lower value when the two are
equal), so a group gets the bits ``describe`` of the group alone gives.
"""

from __future__ import annotations

from collections.abc import Sequence
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
        """``X_(r)`` (1-based) of each group, r clipped into 1..n (0 for an empty group);
        ``ranks`` may have rows (one per percentile), each over every group."""
        if self.ordered.size == 0:
            return np.zeros(np.shape(ranks))
        r = np.clip(ranks, 1, np.maximum(self.sizes, 1))
        return self.ordered[np.minimum(self.offsets + r - 1, self.ordered.size - 1)].astype(
            np.float64
        )


def sort_by_group(codes: npt.ArrayLike, values: npt.ArrayLike, groups: int) -> GroupedSample:
    """Group ``codes`` (0..groups−1) and their values, sorted by (group, value)."""
    code = np.asarray(codes)
    value = np.asarray(values)
    if value.size and value.dtype.kind in "iu":
        low, high = int(value.min()), int(value.max())
        bits = packed_bits(groups, high - low)
        if bits is not None and high < 2**63:
            key = code.astype(np.int64)  # a copy: the caller's codes serve other columns
            key <<= bits
            return sort_packed(key, value, key_offset(low, high, bits), bits, groups)
    code = code.astype(np.int64, copy=False)
    sizes = np.bincount(code, minlength=groups).astype(np.int64)
    offsets = np.cumsum(sizes) - sizes
    if value.size == 0:
        return GroupedSample(value, offsets, sizes)
    by_value = np.argsort(value, kind="stable")
    # NumPy's stable sort of 16-bit integers is a radix sort: O(n), ~10× a merge sort
    narrow = code.astype(np.int16) if groups <= 2**15 else code
    order = by_value[np.argsort(narrow[by_value], kind="stable")]
    return GroupedSample(value[order], offsets, sizes)


def first_of_each_group(order: IntArray, code: IntArray, groups: int, n: int) -> IntArray:
    """The first ``n`` entries of ``order`` within each group: ``order`` holds row indices
    sorted by their group code (``code[row]``, 0..groups−1) first."""
    ordered = code[order]
    starts = np.searchsorted(ordered, np.arange(groups, dtype=np.int64))
    return order[np.arange(order.size) - starts[ordered] < n]


def group_sums(
    code: IntArray, values: npt.NDArray[np.integer], keep: npt.NDArray[np.bool_], groups: int
) -> IntArray:
    """Exact int64 sums per group code of ``values`` over the rows in ``keep``."""
    total = np.zeros(groups, dtype=np.int64)
    np.add.at(total, code[keep], values[keep])
    return total


def packed_bits(groups: int, width: int) -> int | None:
    """The low bits a value of range ``width`` (max − min) takes in a packed key
    ``code << bits | (v − min)``; None when ``groups`` codes above it leave no room."""
    bits = max(int(width).bit_length(), 1)
    return bits if (max(groups, 1) - 1) < (_KEY_LIMIT >> bits) else None


def key_offset(low: int, high: int, bits: int) -> int:
    """What ``sort_packed`` subtracts from values in ``low..high`` packed in ``bits``: 0 when
    they fit as they are (non-negative, below 2^bits: no pass to subtract it and none to
    add it back over the whole key), else their minimum."""
    return 0 if low >= 0 and high < (1 << bits) else low


def sort_packed(
    key: IntArray, values: npt.NDArray[np.integer], low: int, bits: int, groups: int
) -> GroupedSample:
    """``sort_by_group`` from ``key`` = each value's group code shifted left by ``bits``
    (``packed_bits``; ``key`` is overwritten): the key becomes ``code << bits | (v − low)``
    in place, one NumPy sort orders it by (group, value), each group's bounds are binary
    searches for ``g << bits``, and masking the low bits gives the values back — all in
    the key's own memory: no argsort, no gather, no temporary as large as the sample.
    Every value must fit int64; ``low`` is at most their minimum, with every ``v − low``
    below 2^bits (``key_offset``)."""
    # uint64 below 2^63 reads as the same int64 (int64 + uint64 would add in float64)
    key += values.view(np.int64) if values.dtype == np.uint64 else values
    if low:
        key -= low
    key.sort()
    bounds = np.searchsorted(key, np.arange(groups + 1, dtype=np.int64) << bits)
    key &= (1 << bits) - 1
    if low:
        key += low
    offsets = bounds[:-1].astype(np.int64)
    sizes = np.diff(bounds).astype(np.int64)
    return GroupedSample(key.astype(values.dtype, copy=False), offsets, sizes)


def percentiles(sample: GroupedSample, q: float) -> npt.NDArray[np.float64]:
    """The linear-interpolation ``q``-quantile (0..1) of each non-empty group (NaN for
    an empty one), as Polars computes it for the group alone."""
    return percentiles_at(sample, [q])[0]


def percentiles_at(sample: GroupedSample, qs: Sequence[float]) -> npt.NDArray[np.float64]:
    """``percentiles`` at each of ``qs``: row ``k`` is the ``qs[k]``-quantile of every
    group. One gather per end of the interpolation for all of them (``describe`` asks for
    five), each element by the same operations as one quantile alone."""
    n = sample.sizes
    if sample.ordered.size == 0:
        return np.full((len(qs), n.size), np.nan)
    h = (n.astype(np.float64) - 1.0) * np.asarray(qs, dtype=np.float64)[:, None]
    low = np.floor(h).astype(np.int64)
    high = np.ceil(h).astype(np.int64)
    last = sample.ordered.size - 1
    lower = sample.ordered[np.clip(sample.offsets + low, 0, last)].astype(np.float64)
    upper = sample.ordered[np.clip(sample.offsets + high, 0, last)].astype(np.float64)
    out = np.where(lower == upper, lower, (h - low) * (upper - lower) + lower)
    return np.where(n > 0, out, np.nan)
