"""Every ``--by`` group's concurrency (``concurrency.concurrency_by``) in flat arrays.

The definition is ``concurrency_by``'s, per group over its own span [start, end]: the
levels are the running sums of the group's transitions summed per timestamp, in time
order; each level is held from its timestamp (clipped to the span) to the group's next
one at or before ``end`` (or to ``end``); the mean is Σ level · held / (end − start), the
peak the highest level at or before ``end``.

``concurrency_by`` runs that as a join, a hash group-by, a sort and three window
expressions over frames of the transitions (~70 CPU ms for the 170 k transitions of
10^7 events in 300 groups). Here each transition's group is looked up from its request
key (``grouped_gaps.lookup_codes``), one sort of a packed (group, time) key orders them,
``reduceat`` sums the deltas per (group, time), the running levels are one cumulative sum
less each group's sum before it (integers: exact), and the weighted levels are summed by
one Polars ``group_by`` as ``concurrency_by`` summed them. Each product level · held is a
whole number of ns, so the sums are exact below 2^53 in any order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.concurrency import CONCURRENCY
from servetrace.analysis.grouped_gaps import lookup_codes
from servetrace.analysis.lifecycle import KEY
from servetrace.stats.grouped_order import packed_bits

Ints = npt.NDArray[np.int64]


def _order(code: Ints, stamps: Ints, groups: int) -> Ints:
    """The order of the transitions by (group, time); the order among ties is free."""
    low, high = int(stamps.min()), int(stamps.max())
    bits = packed_bits(groups, high - low)
    if bits is None:
        return np.lexsort((stamps, code))
    key = code << bits
    key += stamps - low
    return np.argsort(key)  # ties are one (group, time): summed, so any order of them


def concurrency_of_groups(
    transitions: pl.DataFrame,
    requests: pl.DataFrame,
    values: Sequence[Any],
    spans: Mapping[Any, Mapping[str, Any]],
    admissions: Mapping[Any, bool],
    code_column: str,
) -> dict[Any, dict[str, float | int | None]]:
    """Per value of ``values`` (group ``i`` is ``values[i]``; ``requests`` map ``KEY`` to
    ``code_column``): ``concurrency_by``'s figures over the span in ``spans``. A group
    without a span there, without a transition at or before its end, or whose span has
    no length, is left out (it has no concurrency)."""
    if transitions.height == 0 or requests.height == 0:
        return {}
    groups = len(values)
    start = np.zeros(groups, dtype=np.int64)
    end = np.zeros(groups, dtype=np.int64)  # no span: start == end, left out below
    for i, value in enumerate(values):
        span = spans.get(value)
        if span is not None and span["start"] is not None and span["end"] is not None:
            start[i], end[i] = span["start"], span["end"]
    code = lookup_codes(
        requests[KEY].to_numpy(), requests[code_column].to_numpy(), transitions[KEY].to_numpy()
    )
    stamps = transitions["ts"].to_numpy()
    mine = code >= 0
    if not mine.all():  # transitions of requests in no group, as by the inner join
        code, stamps = code[mine], stamps[mine]
    if code.size == 0:
        return {}
    order = _order(code, stamps, groups)
    code, stamps = code[order], stamps[order]
    first = np.flatnonzero(
        np.concatenate(([True], (code[1:] != code[:-1]) | (stamps[1:] != stamps[:-1])))
    )
    step_code, times = code[first], stamps[first]
    runs = np.flatnonzero(np.concatenate(([True], step_code[1:] != step_code[:-1])))
    run_sizes = np.diff(np.append(runs, step_code.size))
    # steps at or before their group's end, in groups whose span has a length
    kept = (times <= end[step_code]) & (end[step_code] > start[step_code])
    levels = {}
    for name in CONCURRENCY:
        delta = transitions[f"d_{name}"].to_numpy()
        delta = (delta if mine.all() else delta[mine])[order]
        level = np.add.reduceat(delta, first, dtype=np.int64)
        np.cumsum(level, out=level)
        # the running sum restarts at each group: take off what came before its first step
        level -= np.repeat(np.concatenate(([0], level[runs[1:] - 1])), run_sizes)
        levels[name] = level[kept]
    step_code, times = step_code[kept], times[kept]
    if step_code.size == 0:
        return {}
    at = np.clip(times, start[step_code], end[step_code])
    change = step_code[1:] != step_code[:-1]
    last = np.append(change, True)  # a group's last kept step
    heads = np.flatnonzero(np.concatenate(([True], change)))  # and its first
    following = np.append(at[1:], 0)
    held = np.where(last, end[step_code] - at, following - at).astype(np.float64)
    weighted = {n: levels[n].astype(np.float64) * held for n in CONCURRENCY}
    head_codes = step_code[heads].tolist()
    # Each product level · held is a whole number of ns: while their total stays below
    # 2^53 every partial sum is exact, so any order of summing gives the bits Polars'
    # group_by gives (``reduceat`` over the runs, no frame); beyond, Polars sums them.
    if all(float(np.abs(w).sum()) < 2.0**53 for w in weighted.values()):
        totals = {n: np.add.reduceat(weighted[n], heads).tolist() for n in CONCURRENCY}
    else:
        frame = pl.DataFrame({"_c": step_code, **weighted})
        sums = frame.group_by("_c").agg(pl.col(n).sum() for n in CONCURRENCY)
        by_code = {row[0]: row[1:] for row in sums.iter_rows()}
        totals = {n: [by_code[c][k] for c in head_codes] for k, n in enumerate(CONCURRENCY)}
    peaks = {n: np.maximum.reduceat(levels[n], heads).tolist() for n in CONCURRENCY}
    out: dict[Any, dict[str, float | int | None]] = {}
    for j, c in enumerate(head_codes):
        value, width = values[c], float(end[c] - start[c])
        out[value] = {}
        for n in CONCURRENCY:
            known = n == "in_system" or admissions.get(value, False)
            out[value][f"{n}_mean"] = float(totals[n][j] / width) if known else None
            out[value][f"{n}_peak"] = int(peaks[n][j]) if known else None
    return out
