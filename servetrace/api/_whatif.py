"""``servetrace whatif`` from Python: calibrate on a trace, validate by replay, predict.

>>> result = servetrace.whatif("trace.parquet", [("chunked", {"max_batch_tokens": 512})])
...                                                                   # doctest: +SKIP
>>> result.trusted, result.predictions[0].figures["ttft"]["p99"]     # doctest: +SKIP

The trace is read as ``analyze`` reads one run (every input form it takes), in memory:
the calibration needs its events. ``steps`` is a file of engine step records (any format
of ``servetrace.sources.steps``), read on the trace's clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servetrace.api._analyze import PathsLike, analyze
from servetrace.errors import UsageError
from servetrace.sim.config import LIMITS, Policy
from servetrace.whatif.calibration import Calibration
from servetrace.whatif.model import WhatIf
from servetrace.whatif.model import whatif as run_whatif


def _limits(given: Mapping[str, int | None], where: str) -> dict[str, int | None]:
    unknown = sorted(set(given) - set(LIMITS))
    if unknown:
        raise UsageError(
            f"{where}: unknown limit {', '.join(unknown)}", hint=f"limits: {', '.join(LIMITS)}"
        )
    for name, value in given.items():
        if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
            raise UsageError(f"{where}: {name} must be a whole number >= 1 (got {value})")
    return {k: (None if v is None else int(v)) for k, v in given.items()}


def whatif(
    trace: PathsLike,
    policies: Sequence[tuple[str, Mapping[str, int | None]]],
    *,
    steps: str | Path | None = None,
    steps_format: str | None = None,
    calibration: str | Path | Calibration | None = None,
    trace_limits: Mapping[str, int | None] | None = None,
    trace_policy: str | None = None,
    force: bool = False,
    extrapolate: bool = False,
    reading: Mapping[str, Any] | None = None,
    priority_by: str | None = None,
) -> WhatIf:
    """What each (policy, limits) of ``policies`` would have done on ``trace``; the
    ``priority`` policy orders its queue by the trace's attribute ``priority_by``."""
    for policy, _ in policies:
        if policy not in {p.value for p in Policy}:
            raise UsageError(
                f"unknown policy {policy!r}", hint="policies: " + ", ".join(p.value for p in Policy)
            )
    chosen = [(p, _limits(limits, f"--policy {p}")) for p, limits in policies]
    analysis = analyze(trace, streaming=False, **(reading or {}))
    events = analysis.events("whatif calibrates on the events").collect()
    step_frame = None
    if steps is not None:
        from servetrace.sources.steps.detect import detect_step_format
        from servetrace.sources.steps.formats import read_steps

        path = Path(steps)
        ticks = events.filter(events["event"].is_in(["first_token", "token"]))["ts"]
        fmt = steps_format or detect_step_format(path)
        step_frame = read_steps(path, fmt, ticks.unique().sort()).frame
    model = (
        Calibration.read(Path(calibration)) if isinstance(calibration, (str, Path)) else calibration
    )
    return run_whatif(
        analysis,
        events,
        chosen,
        steps=step_frame,
        calibration=model,
        own_limits=_limits(trace_limits or {}, "--trace-limit"),
        own_policy=trace_policy,
        force=force,
        extrapolate=extrapolate,
        priority_by=priority_by,
    )
