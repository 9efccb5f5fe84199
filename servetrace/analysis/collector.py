"""Pause Python's cyclic garbage collector while a report is assembled from many objects.

``--by`` builds hundreds of thousands of small dicts, lists and floats (300 groups × 11
metrics × distributions, intervals, Kaplan–Meier estimates). None of them forms a
reference cycle — reference counting frees them — but every 700 allocations CPython runs
a collection, and its older generations walk every tracked object of the process (the
imported Polars, NumPy and Rich included): about 60 ms of a 300-group summary at 1e6
events that found nothing to collect (``benchmarks/bench_by.py``). ``paused`` switches
the collector off for the duration of the call and restores the state it found (off
stays off), also when the call raises.

What the call built is then still young: the first allocation after it ran a collection
of the youngest generation that walked all of it (~50,000 containers at 300 groups,
4–6 ms), and a later one of the middle generation walked it again before it reached the
oldest. ``paused`` moves it there at once instead (``gc.freeze`` then ``gc.unfreeze``:
two list splices, no walk), where only a full collection looks at it — as after those
two scans. Not when the process has frozen objects of its own (a pre-fork server): those
stay frozen.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def paused(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run with the cyclic collector off (as it was found afterwards)."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if was_on:
                if not gc.get_freeze_count():  # what the call built: to the oldest generation
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()

    return run
