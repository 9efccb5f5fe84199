"""An engine's step file read beside a trace: the one reader ``--steps`` uses everywhere."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from servetrace.analysis.result import Analysis
from servetrace.errors import UsageError
from servetrace.schema import TICK_EVENTS
from servetrace.sources.steps.detect import detect_step_format
from servetrace.sources.steps.formats import STEP_FORMATS, StepFile, aligns_to_ticks, read_steps


@dataclass(frozen=True)
class StepRecords:
    """The steps of ``path``, read as format ``fmt``, on the trace's clock."""

    path: str
    fmt: str
    file: StepFile


def read_step_records(
    analysis: Analysis,
    steps: str | os.PathLike[str],
    steps_from: str | None = None,
    instants: pl.Series | None = None,
) -> StepRecords:
    """Read ``steps`` (format ``steps_from``, one of `STEP_FORMATS`; default: detected),
    aligned, for a format that needs it, to ``instants``: the token ticks of the trace's
    valid requests, in any order (default: read from ``analysis`` when the format aligns)."""
    if steps_from is not None and steps_from not in STEP_FORMATS:
        raise UsageError(
            f"--steps-from {steps_from}: not a step format",
            hint="choose one of: " + ", ".join(STEP_FORMATS),
        )
    path = Path(steps)
    fmt = steps_from or detect_step_format(path)
    if instants is None and aligns_to_ticks(fmt):
        valid = analysis.per_request.select(pl.col("request_id").cast(pl.String))
        instants = (
            analysis.events("--steps places the engine's steps on the trace's clock")
            .filter(pl.col("event").is_in(TICK_EVENTS))
            .select(pl.col("request_id").cast(pl.String), "ts")
            .collect()
            .join(valid, on="request_id")["ts"]
        )
    return StepRecords(str(path), fmt, read_steps(path, fmt, instants))
