"""The Kaplan–Meier estimator of a right-censored latency, and its quantiles.

Each sample is a duration and whether it was observed (the event happened) or
right-censored (all we know is that it would have taken longer). At each distinct
event time ``t_i`` with ``d_i`` events and ``n_i`` samples at risk (duration ≥ t_i; a
sample censored at ``t_i`` is still at risk at ``t_i``)::

    S(t) = Π_{t_i ≤ t} (1 − d_i / n_i)

The **q-quantile** of the latency is the smallest event time with ``S(t) ≤ 1 − q`` (the
convention of lifelines' ``KaplanMeierFitter.percentile`` / ``median_survival_time_``,
``qth_survival_time``). ``S`` is a product of floats, so ``S(t) ≤ 1 − q`` is tested
with a tolerance of 1e-12: at an exact tie (``S`` = 0.5 after half the samples) the
smaller time is taken, as exact arithmetic would. When ``S`` never drops that far — the
largest durations are censored — the quantile is unavailable and ``floor`` says how low
``S`` got. Everything is numpy over sorted arrays; no loop per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
TOLERANCE = 1e-12


@dataclass(frozen=True)
class KaplanMeier:
    """The fitted step function: ``survival[i]`` holds on ``[times[i], times[i+1])``."""

    times: FloatArray  # distinct event times, ascending
    survival: FloatArray  # S just after each event time
    at_risk: npt.NDArray[np.int64]
    events: int
    censored: int

    @property
    def floor(self) -> float:
        """The lowest survival the data reach (1.0 when there is no event)."""
        return float(self.survival[-1]) if self.survival.size else 1.0

    def quantile(self, q: float) -> float | None:
        """Smallest event time with ``S(t) ≤ 1 − q``; None if the data never get there."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {q}")
        reached = np.flatnonzero(self.survival <= (1.0 - q) + TOLERANCE)
        return float(self.times[reached[0]]) if reached.size else None

    def at(self, t: float) -> float:
        """S(t), right-continuous (1 before the first event)."""
        i = int(np.searchsorted(self.times, t, side="right"))
        return 1.0 if i == 0 else float(self.survival[i - 1])


def kaplan_meier(durations: npt.ArrayLike, observed: npt.ArrayLike) -> KaplanMeier:
    """Fit Kaplan–Meier to durations (any unit) and their observed flags."""
    times = np.asarray(durations, dtype=np.float64).ravel()
    seen = np.asarray(observed, dtype=bool).ravel()
    if times.shape != seen.shape:
        raise ValueError("durations and observed flags differ in length")
    if times.size and not np.all(np.isfinite(times)):
        raise ValueError("durations must be finite")
    order = np.argsort(times, kind="stable")
    times, seen = times[order], seen[order]
    unique, first = np.unique(times, return_index=True)
    deaths = np.add.reduceat(seen.astype(np.int64), first) if times.size else np.zeros(0, int)
    at_risk = times.size - first  # samples with duration ≥ t (ties included)
    had_event = deaths > 0
    event_times = unique[had_event]
    d, n = deaths[had_event], at_risk[had_event]
    survival = np.cumprod(1.0 - d / n).astype(np.float64)
    events = int(seen.sum())
    return KaplanMeier(
        times=event_times,
        survival=survival,
        at_risk=n.astype(np.int64),
        events=events,
        censored=int(times.size - events),
    )
