"""Every ``--by`` group's sample of a metric, sorted once and described from the sort.

A trace's gaps outnumber its requests a thousand to one, so ``--by`` sorts them (and each
per-request metric) once by (group, value) (``stats.grouped_order``) and takes from that
one array each group's
``describe`` (count, min, percentiles, max by index; mean and std from exact integer
sums) and its percentile intervals (``grouped_intervals``). Groups are numbered by
their position in the sorted list of values (column ``CODE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.summary import Distribution
from servetrace.stats.describe import STATISTICS, percentile_of, statistics_row
from servetrace.stats.grouped_order import (
    GroupedSample,
    key_offset,
    packed_bits,
    percentiles_at,
    sort_by_group,
    sort_packed,
)
from servetrace.stats.moments import integer_moments

CODE = "_code"


def codes(frame: pl.DataFrame, group: str, values: Sequence[Any]) -> pl.DataFrame:
    """``frame`` with ``CODE``: the index of each row's group in ``values``, order kept."""
    table = pl.DataFrame(
        {group: list(values), CODE: np.arange(len(values), dtype=np.int64)},
        schema={group: frame.schema[group], CODE: pl.Int64},
    )
    return frame.join(table, on=group, how="left", nulls_equal=True, maintain_order="left")


def sample_of(frame: pl.DataFrame, column: str, groups: int) -> GroupedSample:
    """The non-null, non-NaN values of ``column`` (``frame`` has ``CODE``), by group."""
    return samples_of(frame, [column], groups)[column]


def samples_of(
    frame: pl.DataFrame, columns: Sequence[str], groups: int
) -> dict[str, GroupedSample]:
    """``sample_of`` of each column, from one ``select``: each column's values with its
    nulls filled (so an integer column stays integers in NumPy) and its mask of kept
    values (not null, not NaN), then the masks applied in NumPy, not a query per column."""
    kept: list[pl.Expr] = []
    for column in columns:
        value = pl.col(column)
        known = value.is_not_null()
        if frame.schema[column].is_float():
            known = known & ~value.is_nan().fill_null(True)
        kept.append(known.alias(f"_{len(kept)}"))
    part = frame.select(CODE, *(pl.col(c).fill_null(0) for c in columns), *kept)
    code = part[CODE].to_numpy()
    out: dict[str, GroupedSample] = {}
    for i, column in enumerate(columns):
        values, keep = part[column].to_numpy(), part[f"_{i}"].to_numpy()
        if keep.all():
            out[column] = sort_by_group(code, values, groups)
        else:
            out[column] = sort_by_group(code[keep], values[keep], groups)
    return out


def gap_sample(gaps: pl.DataFrame, requests: pl.DataFrame, groups: int) -> GroupedSample:
    """``sample_of`` the gaps' ``itl_ns`` by their request's group (``requests`` carries
    ``KEY`` and ``CODE``): each gap's code looked up from its key in NumPy — a table when
    the keys are dense, else a binary search — where an inner join of a million gaps took
    a hash join; gaps of requests not in ``requests`` are left out, as by the join.

    When the gaps fit a packed key (``grouped_order.packed_bits``: non-negative ns gaps
    below 2^(62 − bits of the group count)), the table holds each request's code already
    shifted, so the one lookup of 10^7 gaps is the sort key itself (``sort_packed``)."""
    keys = requests[KEY].to_numpy()
    code = requests[CODE].to_numpy()
    gap_keys = gaps[KEY].to_numpy()
    itl = gaps["itl_ns"]
    if keys.size == 0 or gap_keys.size == 0:
        return sort_by_group(np.zeros(0, np.int64), itl.head(0).to_numpy(), groups)
    values = itl.to_numpy() if not itl.null_count() else None
    bits = None
    if values is not None and values.dtype.kind in "iu" and values.size:
        least, most = int(values.min()), int(values.max())
        bits = packed_bits(groups, most - least) if most < 2**63 else None
    shift = bits or 0  # the table's codes shifted by this; -1 stays negative
    found = lookup_codes(keys, code, gap_keys, shift)
    if values is not None and int(found.min()) >= 0:  # every gap kept: no masks
        if bits is not None:
            return sort_packed(found, values, key_offset(least, most, bits), bits, groups)
        return sort_by_group(found, values, groups)
    keep = found >= 0
    if itl.null_count():
        keep &= itl.is_not_null().to_numpy()
    return sort_by_group(found[keep] >> shift, itl.filter(pl.Series(keep)).to_numpy(), groups)


Ints = npt.NDArray[np.int64]


def lookup_codes(keys: Ints, codes: Ints, wanted: Ints, shift: int = 0) -> Ints:
    """The code (shifted left by ``shift``) of each of ``wanted``'s keys in ``keys``
    (unique request keys), −1 for a key not there: a table when the keys are dense
    (request keys from 0: no shift either), else a binary search."""
    low, high = int(keys.min()), int(keys.max())
    if high - low < 4 * keys.size + 1024:
        base = min(low, 0) if high < 4 * keys.size + 1024 else low
        table = np.full(high - base + 1, -1, dtype=np.int64)
        table[keys - base] = codes.astype(np.int64) << shift
        if int(wanted.min()) >= base and int(wanted.max()) <= high:
            return table[wanted - base if base else wanted]  # 10^7 gaps: no temporary
        inside = (wanted >= base) & (wanted <= high)
        return np.where(inside, table[np.clip(wanted - base, 0, high - base)], -1)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    at = np.clip(np.searchsorted(ordered, wanted), 0, ordered.size - 1)
    return np.where(ordered[at] == wanted, codes[order][at].astype(np.int64) << shift, -1)


def describe_sample(
    sample: GroupedSample,
    values: Sequence[Any],
    moments: Sequence[tuple[float, float] | None] | None = None,
) -> dict[Any, Distribution]:
    """``stats.describe`` of each group's sample (``grouped_figures.describe_groups`` of
    its column, from the sort): mean and std exact for integers, else from ``moments``
    by group index (``stats.grouped_moments.float_moments_of`` of a float column).

    Each statistic is one array over the groups (a gather or an interpolation), turned
    into Python numbers by one ``tolist``; each group's dict is then one dict display
    (``statistics_row``)."""
    sizes = sample.sizes
    counts = sizes.tolist()
    columns: dict[str, list[Any]] = {"count": counts}
    interpolated = {}
    for name in STATISTICS:
        q = percentile_of(name)
        if q is None or name in ("mean", "std"):
            continue
        if q == 0.0:
            columns[name] = sample.at(np.ones_like(sizes)).tolist()
        elif q == 100.0:
            columns[name] = sample.at(sizes).tolist()
        else:
            interpolated[name] = q / 100
    found = percentiles_at(sample, list(interpolated.values())).tolist()  # one pass for all
    columns |= dict(zip(interpolated, found, strict=True))
    if moments is None:
        s0, s1, s2 = _deviation_sums(sample)
        moments = [  # one zip, no index lookups per group (thousands in --by)
            integer_moments(n, *sums) if n else None
            for n, *sums in zip(counts, s0, s1, s2, strict=True)
        ]
    columns["mean"] = [m[0] if m is not None else None for m in moments]
    columns["std"] = [m[1] if m is not None else None for m in moments]
    rows = map(statistics_row, *(columns[name] for name in STATISTICS))
    empty: Distribution = {name: (0 if name == "count" else None) for name in STATISTICS}
    return {  # an empty group gets a copy of ``empty`` (groups of rare outcomes: most)
        value: row if n else empty.copy()
        for value, n, row in zip(values, counts, rows, strict=True)
    }


_HALF = 21  # d = hi · 2^21 + lo, as ``stats.moments.integer_sums``
_MAX_SPLIT = 1 << (2 * _HALF)  # |d| below this: both halves fit 21 bits
_BLOCK = 1 << 15  # values per block: 2^15 · 2^42 < 2^63; four 256 KB buffers stay in L2


def _deviation_sums(sample: GroupedSample) -> tuple[list[int], list[int], list[int]]:
    """Per group: a pivot, and the exact ``Σd``, ``Σd²`` of ``d = x − pivot``.

    One pivot (the smallest value of all) serves every group: mean and std from exact
    sums do not depend on it (``stats.moments.integer_moments``). The sorted array is
    summed block by block into four reused buffers, as ``stats.moments.integer_sums``
    does, so every pass stays in cache and allocates nothing (over the whole array at
    once, 10^7 gaps made six 80 MB temporaries; a new temporary per pass and block of
    2^16 cost 40 % more at 10^6): each
    block's per-group sums are ``reduceat`` sums at the group starts inside it, in int64,
    with ``d²`` as ``hi²·2^42 + 2·hi·lo·2^21 + lo²``; they are added up per group in
    Python integers. Deviations beyond 2^42 (hours-long gaps) are summed in Int128."""
    sizes, offsets = sample.sizes, sample.offsets
    filled = np.flatnonzero(sizes > 0)
    n = len(sizes)
    if filled.size == 0:
        return [0] * n, [0] * n, [0] * n
    ordered = sample.ordered.astype(np.int64, copy=False)
    starts = offsets[filled]
    minimum = ordered[starts]  # sorted by (group, value): the first of each group
    pivot = int(minimum.min())
    if int(ordered[starts + sizes[filled] - 1].max()) - pivot >= _MAX_SPLIT:
        return _wide_sums(sample, filled, minimum, ordered - np.repeat(minimum, sizes[filled]))
    sums = [[0] * filled.size for _ in range(4)]  # Σd, Σhi², Σhi·lo, Σlo² per group
    mask = (1 << _HALF) - 1
    if ordered.size <= _BLOCK:  # one block (per-request samples): its sums are the sums
        d = ordered - np.int64(pivot)
        hi, lo = d >> _HALF, d & mask
        sums = [np.add.reduceat(part, starts).tolist() for part in (d, hi * hi, hi * lo, lo * lo)]
    else:
        buffers = [np.empty(_BLOCK, dtype=np.int64) for _ in range(4)]
        for start in range(0, ordered.size, _BLOCK):
            end = min(start + _BLOCK, ordered.size)
            d, hi, lo, product = (buffer[: end - start] for buffer in buffers)
            np.subtract(ordered[start:end], np.int64(pivot), out=d)
            np.right_shift(d, _HALF, out=hi)
            np.bitwise_and(d, np.int64(mask), out=lo)
            first = int(np.searchsorted(starts, start, side="right")) - 1
            last = int(np.searchsorted(starts, end - 1, side="right")) - 1
            at = np.maximum(starts[first : last + 1], start) - start
            parts = [np.add.reduceat(d, at)]
            for x, y in ((hi, hi), (hi, lo), (lo, lo)):
                np.multiply(x, y, out=product)
                parts.append(np.add.reduceat(product, at))
            for total, part in zip(sums, parts, strict=True):
                for j, value in enumerate(part.tolist(), start=first):
                    total[j] += value
    pivots, s1, s2 = [0] * n, [0] * n, [0] * n
    sum_d, hh, hl, ll = sums
    for j, i in enumerate(filled.tolist()):
        pivots[i] = pivot
        s1[i] = sum_d[j]
        s2[i] = (hh[j] << (2 * _HALF)) + (hl[j] << (_HALF + 1)) + ll[j]
    return pivots, s1, s2


def _wide_sums(
    sample: GroupedSample, filled: np.ndarray, minimum: np.ndarray, d: np.ndarray
) -> tuple[list[int], list[int], list[int]]:
    n = len(sample.sizes)
    pivots, s1, s2 = [0] * n, [0] * n, [0] * n
    code = np.repeat(filled, sample.sizes[filled])
    dev = pl.col("d").cast(pl.Int128)
    sums = (
        pl.DataFrame({"c": code, "d": d})
        .group_by("c")
        .agg(dev.sum().alias("s1"), (dev * dev).sum().alias("s2"))
    )
    for c, one, two in sums.iter_rows():
        s1[c], s2[c] = int(one), int(two)
    for j, i in enumerate(filled.tolist()):
        pivots[i] = int(minimum[j])
    return pivots, s1, s2
