"""Restrict an analysis to the requests arriving in a time window, or find the steady state.

**The window.** ``--window START:END`` keeps every event of every request whose (first)
arrival falls in ``[START, END)``; the analysis of what remains is, by construction, the
analysis of that filtered trace (``tests/analysis/test_window.py`` holds it to that). A
bound is a time from the trace start, in any unit of the rule grammar (``30`` seconds,
``2.5``, ``90s``, ``1500ms``, ``1ns``, ``2min``, ``1h``: ``units.duration_ns``), or an
ISO-8601 timestamp (``2025-01-01T10:00:30``; naive means UTC); an empty bound is open
(``:60``, ``600:``). Every bound must be a time a trace can hold (Int64 ns). Requests
with no arrival cannot arrive in a window and are left out.

**The steady-state rule** (``--steady-state``), on the in-system concurrency of valid
requests (the level the summary's ``concurrency.in_system`` describes):

1. Cut the span first arrival → trace end into ``BINS`` (100) equal bins and take the
   time-weighted mean in-system level of each bin (exact: the integral of the step
   function at the bin edges).
2. Smooth with a centred running median of ``SMOOTH`` (5) bins: a median of a monotone
   ramp is its centre value, so smoothing removes spikes without moving the ramp.
3. The plateau level ``L`` is the median of the smoothed levels of the middle half of
   the bins (25 %–75 % of the span): warm-up and drain cannot move it.
4. The band is ``|level − L| ≤ max(BAND · L, spread, 1 request)``, ``BAND`` = 5 % and
   ``spread`` the plateau's own noise (1.4826 × the median absolute deviation of the
   middle half), so a noisy plateau is not cut to pieces by its own fluctuation.
5. Score each bin +1 in the band, −1 outside, and take the maximum-sum run of bins
   (``longest_majority_span``): warm-up ends where it starts, the drain starts where it
   ends. A lone noisy bin in the band during warm-up or drain cannot extend it; a short
   excursion inside (a burst) cannot split it — it is part of the sustained behaviour.
6. A request arriving just before the drain lives through it: the window's end is the
   drain start minus the median e2e of completed requests (a request arriving then
   finishes, typically, before the level leaves the band).

The window is ``[warm-up end, drain start − median e2e)``; if that is empty (no plateau
that outlives a request), it is an error that says so rather than a window of nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import step_function
from servetrace.analysis.lifecycle import PLACEABLE
from servetrace.errors import UsageError
from servetrace.units import (
    DURATION_UNITS_TEXT,
    NS_PER_DAY,
    NS_PER_S,
    NS_PER_US,
    duration_ns,
)

BINS = 100
SMOOTH = 5
BAND = 0.05
RULE_TEXT = (
    "steady state: the majority span of 100 bins whose in-system concurrency (running "
    "median of 5) is within ±5% (or its own noise) of the plateau (median of the middle "
    "half), ending one median e2e before the drain"
)
INT64_MAX = 2**63 - 1
TOO_LONG = "longer than any trace can be (timestamps are Int64 ns: about 292 years)"
WINDOW_HINT = "e.g. --window 60:600, --window 1min:10min, --window 2025-01-01T10:00:00:"


@dataclass(frozen=True)
class Bound:
    """One side of a window: ns from the trace start, or an absolute time in ns."""

    relative_ns: int | None = None
    absolute_ns: int | None = None

    def resolve(self, origin_ns: int) -> int:
        if self.absolute_ns is not None:
            return self.absolute_ns
        return origin_ns + (self.relative_ns or 0)


@dataclass(frozen=True)
class WindowSpec:
    """``--window`` as written; an absent bound is open."""

    start: Bound | None
    end: Bound | None
    text: str = ""


@dataclass(frozen=True)
class Window:
    """A resolved window in absolute ns, ``[start_ns, end_ns)``, and how it was chosen."""

    start_ns: int
    end_ns: int | None  # None: open to the end of the trace
    origin_ns: int  # the trace start that start_s/end_s count from
    rule: str
    plateau_in_system: float | None = None

    @property
    def start_s(self) -> float:
        return (self.start_ns - self.origin_ns) / NS_PER_S

    @property
    def end_s(self) -> float | None:
        return None if self.end_ns is None else (self.end_ns - self.origin_ns) / NS_PER_S


def _bound(text: str, flag: str) -> Bound | None:
    text = text.strip()
    if not text:
        return None
    relative = duration_ns(text)
    if relative is not None:
        if relative < 0:
            raise UsageError(
                f"{flag} {text!r}: a bound is a time from the trace start, not before it",
                hint=WINDOW_HINT,
            )
        if relative > INT64_MAX:
            raise UsageError(f"{flag} {text!r}: {TOO_LONG}", hint=WINDOW_HINT)
        return Bound(relative_ns=relative)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{flag}: {text!r} is neither a time from the trace start ({DURATION_UNITS_TEXT}) "
            "nor an ISO timestamp",
            hint=WINDOW_HINT,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    ns = delta.days * NS_PER_DAY + delta.seconds * NS_PER_S + delta.microseconds * NS_PER_US
    return Bound(absolute_ns=ns)


def parse_window(text: str, flag: str = "--window") -> WindowSpec:
    """``START:END`` → WindowSpec. Timestamps contain colons: the split is the one colon
    at which both sides read as bounds."""
    colons = [i for i, ch in enumerate(text) if ch == ":"]
    if not colons:
        raise UsageError(f"{flag} {text!r}: write START:END", hint="e.g. --window 60:600")
    found: list[WindowSpec] = []
    errors: list[UsageError] = []
    for at in colons:
        try:
            found.append(WindowSpec(_bound(text[:at], flag), _bound(text[at + 1 :], flag), text))
        except UsageError as error:
            errors.append(error)
    if len(found) != 1:
        if not found:
            raise errors[0]
        raise UsageError(f"{flag} {text!r} is ambiguous", hint="e.g. --window 60:600")
    return found[0]


def resolve(spec: WindowSpec, origin_ns: int) -> Window:
    start = spec.start.resolve(origin_ns) if spec.start else origin_ns
    end = spec.end.resolve(origin_ns) if spec.end else None
    if not all(-INT64_MAX - 1 <= t <= INT64_MAX for t in (start, end) if t is not None):
        raise UsageError(
            f"--window {spec.text!r}: reaches beyond the times a trace can hold "
            "(Int64 ns since 1970, up to the year 2262)",
            hint=WINDOW_HINT,
        )
    if end is not None and end <= start:
        raise UsageError(f"--window {spec.text!r}: the end must come after the start")
    return Window(start, end, origin_ns, "given: --window " + spec.text)


def trace_origin(events: pl.LazyFrame | pl.DataFrame) -> int | None:
    """The trace start: the earliest timestamp of any placeable row (as the lifecycle has it)."""
    value = events.lazy().filter(PLACEABLE).select(pl.col("ts").min()).collect().item()
    return None if value is None else int(value)


def restrict(events: pl.LazyFrame, window: Window) -> pl.LazyFrame:
    """Every row of every request whose first arrival lies in ``[start, end)``."""
    arrival = pl.col("ts").filter(pl.col("event") == "arrival").min()
    inside = pl.col("arrival") >= window.start_ns
    if window.end_ns is not None:
        inside = inside & (pl.col("arrival") < window.end_ns)
    chosen = (
        events.filter(pl.col("request_id").is_not_null())
        .group_by("request_id")
        .agg(arrival.alias("arrival"))
        .filter(inside)
        .select("request_id")
    )
    return events.join(chosen, on="request_id", how="semi")


# --------------------------------------------------------------------------- steady state
def bin_levels(transitions: pl.DataFrame, start: int, end: int, bins: int) -> np.ndarray:
    """Time-weighted mean in-system level of each of ``bins`` equal bins of [start, end]."""
    times, in_system = step_function(transitions, "in_system")
    ts, level = times.astype(np.float64), in_system.astype(np.float64)
    # The integral of a step function is piecewise linear: exact at any edge by interp.
    knots = np.concatenate(([min(start, ts[0] if ts.size else start)], ts, [max(end, 0)]))
    held = np.concatenate(([0.0], level))
    area = np.concatenate(([0.0], np.cumsum(held * np.diff(knots))))
    edges = np.linspace(start, end, bins + 1)
    integral = np.interp(edges, knots, area)
    return np.diff(integral) / np.diff(edges)


def running_median(values: np.ndarray, width: int) -> np.ndarray:
    half = width // 2
    padded = np.pad(values, half, mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width), axis=1)


def longest_majority_span(inside: np.ndarray) -> tuple[int, int]:
    """Bins ``[first, last)`` maximising (bins in band) − (bins out of band): the
    maximum-sum run of ±1 (its cumulative sum minus its running minimum), the earliest
    such run on ties. A lone noisy bin outside the plateau cannot extend it, a short
    excursion inside cannot split it."""
    score = np.concatenate(([0], np.cumsum(np.where(inside, 1, -1))))
    lowest = np.minimum.accumulate(score)
    last = int(np.argmax(score - lowest))
    first = int(np.flatnonzero(score[: last + 1] == lowest[last])[0])
    return first, last


def steady_state(
    transitions: pl.DataFrame,
    first_arrival_ns: int,
    trace_end_ns: int,
    median_e2e_ns: float | None,
    origin_ns: int,
) -> Window:
    """The steady-state window by the rule of the module docstring."""
    if trace_end_ns <= first_arrival_ns or transitions.height == 0:
        raise UsageError("--steady-state: the trace has no span to find a plateau in")
    levels = running_median(bin_levels(transitions, first_arrival_ns, trace_end_ns, BINS), SMOOTH)
    middle = levels[BINS // 4 : BINS - BINS // 4]
    plateau = float(np.median(middle))
    if plateau <= 0:
        raise UsageError("--steady-state: no request is in the system mid-trace: no plateau")
    spread = 1.4826 * float(np.median(np.abs(middle - plateau)))  # robust sd of the plateau
    band = max(BAND * plateau, spread, 1.0)
    first, last = longest_majority_span(np.abs(levels - plateau) <= band)
    width = (trace_end_ns - first_arrival_ns) / BINS
    start = first_arrival_ns + round(first * width)
    drain = first_arrival_ns + round(last * width)
    end = drain - round(median_e2e_ns or 0)
    if end <= start:
        raise UsageError(
            "--steady-state: the plateau is shorter than a typical request "
            f"(in band {(drain - start) / NS_PER_S:.1f} s, median e2e "
            f"{(median_e2e_ns or 0) / NS_PER_S:.1f} s): no steady state to analyse",
            hint="choose a window yourself with --window START:END",
        )
    return Window(start, end, origin_ns, RULE_TEXT, plateau)
