"""Kaplan–Meier of every group at once: ``stats.survival.kaplan_meier`` per group.

``kaplan_meier_codes`` (what ``--by`` runs) over flat arrays, ``kaplan_meier_by`` in
Polars — the statement it is tested against. The same estimator, in one sort of
(group, duration) and running sums and products, for
``--by`` (hundreds of groups): at each distinct event time ``t_i`` of a group, with
``d_i`` events and ``n_i`` of the group's samples at risk (duration ≥ t_i),
``S(t) = Π_{t_i ≤ t} (1 − d_i / n_i)``, a running product in time order within the
group — the very operations, in the same order, as ``kaplan_meier`` of the group alone,
so each group gets the same bits. The q-quantile is the smallest event time with
``S ≤ 1 − q`` (tolerance ``TOLERANCE``), None when S never gets there; ``floor`` is the
lowest S (1.0 without an event).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.stats.grouped_order import packed_bits
from servetrace.stats.survival import TOLERANCE

Ints = npt.NDArray[np.int64]


def kaplan_meier_by(
    samples: pl.DataFrame, group: str, quantiles: Mapping[str, float]
) -> dict[Any, dict[str, Any]]:
    """Per value of ``group`` in ``samples`` (columns ``group``, ``duration_ns``,
    ``observed``): ``{"floor": S_min, name: quantile or None, ...}``."""
    for q in quantiles.values():
        if not 0.0 < q < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {q}")
    duration, observed = pl.col("duration_ns"), pl.col("observed")
    sizes = samples.group_by(group).agg(pl.len().alias("_size"))
    steps = (
        samples.group_by(group, "duration_ns")
        .agg(observed.sum().cast(pl.Int64).alias("_deaths"), pl.len().alias("_tied"))
        .sort(group, "duration_ns", nulls_last=True)
        .join(sizes, on=group, how="left", nulls_equal=True)
        .with_columns(
            # samples at risk at t: the group's size less those that ended before t
            (pl.col("_size") - pl.col("_tied").cum_sum().over(group) + pl.col("_tied"))
            .cast(pl.Int64)
            .alias("_at_risk")
        )
        .filter(pl.col("_deaths") > 0)
        .with_columns(
            (1.0 - pl.col("_deaths") / pl.col("_at_risk")).cum_prod().over(group).alias("_s")
        )
    )
    survival = pl.col("_s")
    fitted = steps.group_by(group).agg(
        survival.last().alias("floor"),
        *[
            duration.filter(survival <= (1.0 - q) + TOLERANCE).min().alias(name)
            for name, q in quantiles.items()
        ],
    )
    out: dict[Any, dict[str, Any]] = {
        value: {"floor": 1.0, **dict.fromkeys(quantiles)} for value in sizes[group].to_list()
    }
    for row in fitted.iter_rows(named=True):
        value = row.pop(group)
        out[value] = {
            "floor": float(row["floor"]),
            **{k: (None if row[k] is None else float(row[k])) for k in quantiles},
        }
    return out


def _running_products(factors: npt.NDArray[np.float64], starts: Ints) -> None:
    """Each run's (``starts``) running product of ``factors``, in place, in order: the
    same sequential ``multiply.accumulate`` as ``np.cumprod`` of the run alone. Runs of a
    similar length (within 2×) are stacked as the rows of one matrix padded with 1.0 on
    the right (x · 1.0 = x: the padding changes no bit before it) and accumulated along
    the rows: one accumulate per power of two of run length, not one per group."""
    lengths = np.diff(np.append(starts, factors.size))
    exponents = np.frexp(lengths.astype(np.float64))[1]  # 2^(e−1) ≤ length < 2^e
    for e in np.unique(exponents).tolist():
        rows = np.flatnonzero(exponents == e)
        width = int(lengths[rows].max())
        at = starts[rows, None] + np.arange(width)
        inside = np.arange(width) < lengths[rows, None]
        block = np.where(inside, factors[np.minimum(at, factors.size - 1)], 1.0)
        np.multiply.accumulate(block, axis=1, out=block)
        factors[at[inside]] = block[inside]


def kaplan_meier_codes(
    code: Ints,
    durations: Ints,
    observed: npt.NDArray[np.bool_],
    groups: int,
    quantiles: Mapping[str, float],
) -> dict[int, dict[str, Any]]:
    """``kaplan_meier_by`` over flat arrays: per group code with samples (``code``,
    integer ``durations``, ``observed``), ``{"floor": S_min, name: quantile or None}``.

    One sort of (group, duration) — a packed int64 key with the observed flag as its
    lowest bit when it fits (``grouped_order.packed_bits``), else a lexsort — then per
    run of one (group, duration): its deaths (``reduceat``), the samples at risk (those
    of the group from the run on: the group's end less the run's start), the factor
    ``1 − d/n`` of each run with an event and its running product per group
    (``_running_products``): the operations of ``kaplan_meier`` of the group alone."""
    for q in quantiles.values():
        if not 0.0 < q < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {q}")
    if code.size == 0:
        return {}
    low, high = int(durations.min()), int(durations.max())
    bits = packed_bits(2 * groups, high - low) if high < 2**62 else None
    if bits is not None:
        key = code.astype(np.int64) << (bits + 1)
        key += (durations - low) << 1
        key += observed
        key.sort()
        seen = (key & 1).astype(np.bool_)
        key >>= 1
        code = key >> bits
        stamp = key  # (group, duration) as one number: runs are where it changes
    else:
        order = np.lexsort((durations, code))
        code, seen = code[order], observed[order]
        stamp = durations[order]
    change = np.empty(code.size, dtype=np.bool_)
    change[0] = True
    np.not_equal(stamp[1:], stamp[:-1], out=change[1:])
    change[1:] |= code[1:] != code[:-1]
    first = np.flatnonzero(change)
    run_code = code[first]
    if bits is not None:
        times = ((stamp[first] & ((1 << bits) - 1)) + low).astype(np.float64)
    else:
        times = stamp[first].astype(np.float64)
    sizes = np.bincount(code, minlength=groups)
    ends = np.cumsum(sizes)
    deaths = np.add.reduceat(seen.astype(np.int64), first)
    at_risk = ends[run_code] - first
    had = deaths > 0
    event_code, event_times = run_code[had], times[had]
    survival = 1.0 - deaths[had] / at_risk[had]
    out: dict[int, dict[str, Any]] = {
        int(c): {"floor": 1.0, **dict.fromkeys(quantiles)} for c in np.flatnonzero(sizes)
    }
    if survival.size == 0:
        return out
    starts = np.flatnonzero(np.append(True, event_code[1:] != event_code[:-1]))
    _running_products(survival, starts)
    last = np.append(starts[1:], survival.size) - 1
    position = np.arange(survival.size)
    reached = {}
    for name, q in quantiles.items():
        hit = np.where(survival <= (1.0 - q) + TOLERANCE, position, survival.size)
        reached[name] = np.minimum.reduceat(hit, starts)
    found = {
        name: np.where(at < survival.size, event_times[np.minimum(at, survival.size - 1)], np.nan)
        for name, at in reached.items()
    }
    columns = [survival[last].tolist(), *(found[name].tolist() for name in quantiles)]
    names = ["floor", *quantiles]
    for c, *row in zip(event_code[starts].tolist(), *columns, strict=True):
        out[c] = {n: (None if v != v else v) for n, v in zip(names, row, strict=True)}
    return out
