"""The step-record formats servetrace reads, and the one entry point that reads any of them.

Each format is a module with ``read(path, ticks) -> StepFile``; ``ticks`` are the trace's
token-tick instants (sorted, unique, Int64 ns) when a trace is given beside the steps, so a
format whose clock is coarse (a log prefix with one-second resolution) can align its steps
to the trace and state the alignment error. Modules are imported only when their format is
read.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from servetrace.errors import InputError, UsageError

if TYPE_CHECKING:
    import polars as pl


@dataclass(frozen=True)
class StepFile:
    """The steps of one file: an importer's frame holds step columns by their canonical
    names (``duration`` may stand for ``ts_start``); `read_steps` conforms it."""

    frame: pl.DataFrame
    # Facts the user is told beside the result: how the steps were aligned, what was skipped.
    notes: tuple[str, ...] = ()
    # How far the aligned step ends may be from the true ones (ns); None when not aligned.
    alignment_error_ns: int | None = None


# format name → module implementing ``read``.
STEP_FORMATS: dict[str, str] = {
    "canonical": "servetrace.sources.steps.canonical",
    "vidur": "servetrace.sources.steps.vidur",
    "vllm-log": "servetrace.sources.steps.vllm_log",
    "sglang-log": "servetrace.sources.steps.sglang_log",
    "trtllm-iterations": "servetrace.sources.steps.trtllm_iterations",
    "forward-pass": "servetrace.sources.steps.forward_pass",
}


def aligns_to_ticks(fmt: str) -> bool:
    """Whether step format ``fmt`` places its steps by the trace's tick instants (a log
    whose clock has only whole seconds), so a reader must be given them."""
    return bool(getattr(importlib.import_module(STEP_FORMATS[fmt]), "ALIGNS_TO_TICKS", False))


def read_steps(path: Path, fmt: str, ticks: pl.Series | None = None) -> StepFile:
    """Read ``path`` as step format ``fmt`` (a key of `STEP_FORMATS`), checked by the rules
    every format obeys (`validate`): a broken one is an `InputError` naming the record.
    ``ticks``: the trace's tick instants, in any order; a format that aligns its steps to
    them (``ALIGNS_TO_TICKS``) gets them distinct and sorted, the others as they are."""
    from servetrace.sources.steps.schema import conform
    from servetrace.sources.steps.validate import validate

    if fmt not in STEP_FORMATS:
        raise UsageError(
            f"unknown step format {fmt!r}", hint="choose one of: " + ", ".join(STEP_FORMATS)
        )
    if not path.is_file():
        raise InputError(f"{path}: no such step file")
    module = importlib.import_module(STEP_FORMATS[fmt])
    if ticks is not None and aligns_to_ticks(fmt):
        ticks = ticks.unique().sort()
    result: StepFile = module.read(path, ticks)
    frame = conform(result.frame)
    findings = validate(path, frame, ends_known=getattr(module, "ENDS_KNOWN", True))
    return replace(result, frame=frame, notes=(*result.notes, *findings))
