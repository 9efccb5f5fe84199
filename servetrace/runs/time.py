"""``analyze``'s time options: the window (given or steady state) and the slices.

``windowed`` runs the engine once (``--window``) or twice (``--steady-state``: the whole
trace to find the plateau, then the window), always through the same ``run`` the plain
analysis uses, so a windowed analysis is the analysis of the filtered trace.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from servetrace.analysis.result import Analysis
from servetrace.analysis.window import (
    Window,
    WindowSpec,
    parse_window,
    resolve,
    restrict,
    steady_state,
    trace_origin,
)
from servetrace.errors import UsageError

Restrict = Callable[[pl.LazyFrame], pl.LazyFrame]
Run = Callable[[Restrict | None], Analysis]


def steady_window(full: Analysis) -> Window:
    """The steady-state window of an analysed (whole) trace."""
    requests = full.per_request
    timeline = full.timeline
    if not full.summary.arrival_known or requests.height == 0 or timeline.trace_end_ns is None:
        raise UsageError("--steady-state needs send times and requests: this trace has none")
    done = requests.filter(pl.col("outcome") == "completed")["e2e_ns"]
    median = done.median() if done.len() else None
    first = int(requests["arrival_ns"].min())  # type: ignore[arg-type]
    return steady_state(
        timeline.transitions,
        first,
        timeline.trace_end_ns,
        float(median) if median is not None else None,  # type: ignore[arg-type]
        timeline.trace_start_ns if timeline.trace_start_ns is not None else first,
    )


def windowed(
    run: Run,
    events: Callable[[], pl.LazyFrame],
    window: str | WindowSpec | None,
    steady: bool,
) -> tuple[Analysis, Window | None]:
    """The analysis of the requests arriving in the window, and the window."""
    if window is not None and steady:
        raise UsageError("--window and --steady-state exclude each other: give one")
    if window is None and not steady:
        return run(None), None
    if steady:
        chosen = steady_window(run(None))
    else:
        spec = parse_window(window) if isinstance(window, str) else window
        origin = trace_origin(events())
        if origin is None:
            raise UsageError("--window: the trace has no timestamps to count from")
        chosen = resolve(spec, origin)  # type: ignore[arg-type]
    inside = restrict(events(), chosen).select(pl.col("request_id").n_unique()).collect().item()
    if not inside:
        end = "the end" if chosen.end_s is None else f"{chosen.end_s:g} s"
        raise UsageError(
            f"no request arrives in the window {chosen.start_s:g} s → {end} "
            "(seconds from the trace start)"
        )

    def keep(frame: pl.LazyFrame) -> pl.LazyFrame:
        return restrict(frame, chosen)

    return run(keep), chosen
