"""The whole trace's concurrency (``concurrency.concurrency``) in a few flat arrays.

The definition is ``concurrency.concurrency_by``'s for one group: levels are the running
sums of the transitions summed per timestamp, in time order; each level is held from
its timestamp (clipped to [start, end]) to the next one (or ``end``); the mean is
Σ level · held / (end − start), the peak the highest level at or before ``end``.

``concurrency_by`` computes this with a hash group-by, a sort, a join and window
expressions over frames of every transition: at 1e9 events (16 M transitions) that
peaked at 3.2 GB and took 19 CPU-s. Here one stable argsort of the timestamps, one
``reduceat`` per level and one product column give the same figures, in the same
order of summation (the products are summed by Polars over one column in time order, as
its group-by summed them), holding a few 8-byte columns of the transitions at a time.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import CONCURRENCY


def trace_levels(
    transitions: pl.DataFrame, start: int, end: int
) -> dict[str, tuple[float, int]] | None:
    """Per level name: (time-weighted mean, peak) over [start, end]; None when no
    transition is at or before ``end`` or the window has no length."""
    if transitions.height == 0 or end <= start:
        return None
    # Each array is freed as soon as the next step no longer needs it, and the deltas are
    # reordered in their own (one-byte, when batched) type: 16 M transitions at 1e9
    # events peaked at +1.2 GB with every step's array alive.
    stamps = transitions["ts"].to_numpy()
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    deltas = {name: transitions[f"d_{name}"].to_numpy()[order] for name in CONCURRENCY}
    del order
    first = np.flatnonzero(np.concatenate(([True], stamps[1:] != stamps[:-1])))
    times = stamps[first]
    del stamps
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
    for name in CONCURRENCY:
        level = np.add.reduceat(deltas.pop(name), first, dtype=np.int64)
        np.cumsum(level, out=level)
        level = level[:kept]
        weighted = level.astype(np.float64)
        weighted *= held
        out[name] = (float(pl.Series(weighted).sum()) / width, int(level.max()))
        del weighted
    return out
