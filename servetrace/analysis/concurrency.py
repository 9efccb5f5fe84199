"""Time-weighted mean and peak of requests queued, running and in the system (design §6).

The levels are the running sums of the lifecycle's transitions
(``lifecycle_rules.transitions``) summed per timestamp, in time order; each level is held
from its timestamp (clipped to [start, end]) to the next one (or ``end``). The mean is
Σ level · held / (end − start), the peak the highest level reached by ``end``. The window
is the trace's (first arrival → last event) or, under ``--by``, each group's own span, so
a group gets the figures of analysing it alone. Queued and running are reported only
where there are admissions: a client-side trace cannot see them.

One stable argsort of the timestamps, one ``reduceat`` per level and one product column
give the figures in a few flat arrays (a trace of 1e9 events has 16 M transitions); the
products are summed by Polars over one column in time order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.groups import Groups

CONCURRENCY = ("queued", "running", "in_system")
Figures = dict[str, float | int | None]


def no_concurrency() -> Figures:
    return {f"{n}_{s}": None for n in CONCURRENCY for s in ("mean", "peak")}


def levels(
    stamps: npt.NDArray[np.int64],
    deltas: dict[str, npt.NDArray[np.integer]],
    start: int,
    end: int,
) -> dict[str, tuple[float, int]] | None:
    """Per level name: (time-weighted mean, peak) over [start, end]; None when no
    transition is at or before ``end`` or the window has no length."""
    if stamps.size == 0 or end <= start:
        return None
    times, steps = _by_timestamp(stamps, deltas)
    kept = int(np.searchsorted(times, end, side="right"))  # ts <= end
    if kept == 0:
        return None
    at = np.clip(times[:kept], start, end)
    del times
    held = np.empty(kept, dtype=np.float64)
    held[:-1] = at[1:] - at[:-1]
    held[-1] = end - at[-1]
    del at
    width = float(end - start)
    out: dict[str, tuple[float, int]] = {}
    for name, level in steps:
        level = level[:kept]
        weighted = level.astype(np.float64)
        weighted *= held
        out[name] = (float(pl.Series(weighted).sum()) / width, int(level.max()))
        del weighted
    return out


def _by_timestamp(
    stamps: npt.NDArray[np.int64], deltas: dict[str, npt.NDArray[np.integer]]
) -> tuple[npt.NDArray[np.int64], Iterator[tuple[str, npt.NDArray[np.int64]]]]:
    """The distinct timestamps in order, and each level (``CONCURRENCY`` order) after
    each of them, one at a time: ``cumsum(reduceat(delta, first))``, ``first`` where each
    timestamp starts in the sorted transitions."""
    # Each array is freed as soon as the next step no longer needs it, and the deltas are
    # reordered in their own (one-byte, when batched) type: 16 M transitions at 1e9
    # events peaked at +1.2 GB with every step's array alive.
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    reordered = {name: deltas[name][order] for name in CONCURRENCY}
    del order
    first = np.flatnonzero(np.concatenate(([True], stamps[1:] != stamps[:-1])))

    def steps() -> Iterator[tuple[str, npt.NDArray[np.int64]]]:
        for name in CONCURRENCY:  # each reordered delta freed once its level is made
            level = np.add.reduceat(reordered.pop(name), first, dtype=np.int64)
            yield name, np.cumsum(level, out=level)

    return stamps[first], steps()


def _deltas(transitions: pl.DataFrame) -> dict[str, npt.NDArray[np.integer]]:
    return {name: transitions[f"d_{name}"].to_numpy() for name in CONCURRENCY}


def step_function(transitions: pl.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The distinct timestamps of ``transitions`` (at least one) in order, and the level
    ``name`` after each."""
    times, steps = _by_timestamp(transitions["ts"].to_numpy(), _deltas(transitions))
    return times, dict(steps)[name]


def levels_at(transitions: pl.DataFrame, instants: npt.NDArray[np.int64]) -> dict[str, np.ndarray]:
    """Each level (queued, running, in system) at each instant, after every transition at
    or before it: the value a gauge scraped at that instant reports (0 before the first)."""
    stamps = transitions["ts"].to_numpy()
    instants = np.asarray(instants, dtype=np.int64)
    if stamps.size == 0:
        return {name: np.zeros(instants.size, dtype=np.int64) for name in CONCURRENCY}
    times, steps = _by_timestamp(stamps, _deltas(transitions))
    at = np.searchsorted(times, instants, side="right") - 1
    return {name: np.where(at >= 0, level[np.maximum(at, 0)], 0) for name, level in steps}


def mean_levels(transitions: pl.DataFrame, edges: npt.NDArray[np.int64]) -> dict[str, np.ndarray]:
    """Each level's time-weighted mean over each interval ``[edges[k], edges[k + 1]]``
    (0 before the first transition): its integral over the interval's length, the integral
    exact in Int64 (a cumulative sum that wraps still differences exactly)."""
    width = np.diff(edges)
    stamps = transitions["ts"].to_numpy()
    if stamps.size == 0:
        return {name: np.zeros(width.size) for name in CONCURRENCY}
    times, steps = _by_timestamp(stamps, _deltas(transitions))
    at = np.searchsorted(times, edges, side="right") - 1
    last = np.maximum(at, 0)
    out = {}
    for name, level in steps:
        area = np.zeros(times.size, dtype=np.int64)
        np.cumsum(level[:-1] * np.diff(times), out=area[1:])
        integral = np.where(at >= 0, area[last] + level[last] * (edges - times[last]), 0)
        with np.errstate(invalid="ignore"):  # an interval of no length has no mean
            out[name] = np.diff(integral) / width
    return out


def _figures(found: dict[str, tuple[float, int]] | None, admissions: bool) -> Figures:
    if found is None:
        return no_concurrency()
    out: Figures = {}
    for n in CONCURRENCY:
        known = n == "in_system" or admissions
        out[f"{n}_mean"] = found[n][0] if known else None
        out[f"{n}_peak"] = found[n][1] if known else None
    return out


def concurrency_by_group(
    transitions: pl.DataFrame,
    groups: Groups,
    starts: Sequence[int | None],
    ends: Sequence[int | None],
    admissions: Sequence[bool],
) -> list[Figures]:
    """Each group's concurrency over its window [start, end] (None: no window, no
    figures); ``transitions`` carry their group (``groups.coded``)."""
    frame, offsets = groups.slices(transitions)
    stamps, deltas = frame["ts"].to_numpy(), _deltas(frame)
    del frame
    out = []
    for g in groups:
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        start, end = starts[g], ends[g]
        if start is None or end is None:
            out.append(no_concurrency())
            continue
        part = {name: deltas[name][lo:hi] for name in CONCURRENCY}
        out.append(_figures(levels(stamps[lo:hi], part, start, end), admissions[g]))
    return out
