"""vLLM's iteration-details log (``vllm serve --enable-logging-iteration-details``).

Pinned to vllm-project/vllm:

- the line: ``vllm/v1/engine/core.py`` at ac3cb2e2eca80290181abb9365d572af6d287473
  (``EngineCore.log_iteration_details``): ``Iteration(<index>): <n> context requests,
  <n> context tokens, <n> generation requests, <n> generation tokens, iteration elapsed
  time: <ms, 2 decimals> ms``, one per engine step, logged by the ``EngineCore`` process
  (prefix ``(EngineCore_DP<rank> pid=<pid>)`` with data parallelism);
- the idle variant: a data-parallel rank with no requests still runs a dummy forward
  pass with its peers and logs it as an all-zero line ending ``(dummy)``
  (vllm-project/vllm#41406);
- newer versions (vllm-project/vllm#46647; ``core.py`` at
  00080ee13c7a451fce071ccb8d0e94d395acf5a7, ``capture_iteration_details``) build the
  same fields as ``SchedulerIterationDetails`` and log the line from the front end,
  appending ``, GPU KV cache usage: <x>%`` and, with multimodal inputs, encoder counts;
- the prefix: vLLM's logger format ``LEVEL MM-DD HH:MM:SS [file:line] message``
  (``vllm/logger.py``, ``_DATE_FORMAT = "%m-%d %H:%M:%S"`` at
  00656a8e7442dec75d69881cee20ffe38f46f606, whose older ``file:line]`` is read too),
  resolution one second, no year, no time zone.

Mapping: ``Iteration(i)`` → ``step``; the DP rank (or the front end's ``Engine <n>:``)
→ ``replica``; context requests/tokens → ``prefill_requests``/``prefill_tokens``;
generation requests/tokens → ``decode_requests``/``decode_tokens``; elapsed time →
the step's duration; KV cache usage → ``kv_usage``. The elapsed time is measured
around the engine's wait for the forward pass's result: under async scheduling or a
batch queue it is only the part of the pass not overlapped with scheduling, and it never
counts the time between steps. Cached tokens, queue, preemptions and batch membership
are not in the line (null).

Times: with a trace's ticks the steps are aligned to them (`align`), else each step
ends at its prefix second read as UTC in 1972 (the prefix has no year; 1972 is a leap
year, so a 02-29 prefix reads).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.steps.align import align_to_ticks, describe, tick_year, zone_shift
from servetrace.sources.steps.formats import StepFile
from servetrace.sources.steps.logtext import log_lines, parse_marked

FORMAT = "vllm-log"
_NO_YEAR = 1972
_MARKER = r"\bIteration\(\d+\): "
_PATTERN = (
    r"^(?:\((?P<process>[A-Za-z]+)(?:_DP(?P<dp>\d+))?[^)]*\)\s+)?"
    r"[A-Z]+\s+(?P<month>\d{2})-(?P<day>\d{2})\s+"
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})(?:[.,]\d+)?\s+(?:\[[^\]]*\]|\S+\])\s+"
    r"(?:Engine (?P<engine>\d+): )?"
    r"Iteration\((?P<step>\d+)\): (?P<prefill_requests>\d+) context requests, "
    r"(?P<prefill_tokens>\d+) context tokens, (?P<decode_requests>\d+) generation requests, "
    r"(?P<decode_tokens>\d+) generation tokens, "
    r"iteration elapsed time: (?P<elapsed_ms>\d+(?:\.\d+)?) ms(?P<tail>.*)$"
)
_RULE = (
    "an iteration line that is not vLLM's (expected '(EngineCore_DP0 pid=…) INFO MM-DD "
    "HH:MM:SS [core.py:N] Iteration(i): a context requests, b context tokens, c generation "
    "requests, d generation tokens, iteration elapsed time: x ms')"
)
_COUNTS = ("step", "prefill_requests", "prefill_tokens", "decode_requests", "decode_tokens")
# The prefix's date and time, as the pattern's groups name them.
_PARTS = ("month", "day", "hour", "minute", "second")


# `formats.read_steps` gives this format the trace's distinct tick instants, sorted.
ALIGNS_TO_TICKS = True


def read(path: Path, ticks: pl.Series | None) -> StepFile:
    parsed = parse_marked(log_lines(path), _MARKER, _PATTERN, "step", path, _RULE)
    if parsed.height == 0:
        raise InputError(
            f"{path}: no vLLM iteration-details lines in the file",
            hint="vLLM writes them when started with --enable-logging-iteration-details",
        )
    steps = parsed.select(
        *_PARTS,
        *(pl.col(name).cast(pl.Int64()) for name in _COUNTS),
        pl.coalesce(
            pl.col("dp").cast(pl.Int64()).cast(pl.String()),
            pl.col("engine").cast(pl.Int64()).cast(pl.String()),
        ).alias("replica"),
        duration=(pl.col("elapsed_ms").cast(pl.Float64()) * 1e6).round().cast(pl.Int64()),
        kv_usage=pl.col("tail")
        .str.extract(r"GPU KV cache usage: (\d+(?:\.\d+)?)%")
        .cast(pl.Float64())
        / 100,
        dummy=pl.col("tail").str.contains(r"\(dummy\)"),
    )
    notes = [
        "vllm-log: a step's duration is vLLM's 'iteration elapsed time', the wait for the "
        "forward pass's result (under async scheduling only the part not overlapped); "
        "cached tokens, queue and batch membership are not in the log (unavailable)"
    ]
    dummies = int(steps["dummy"].sum())
    if dummies:
        notes.append(
            f"vllm-log: {dummies} dummy steps (a data-parallel rank with no requests ran a "
            "forward pass to keep step with its peers), kept with zero requests"
        )
    ts_end, error = _place(steps, ticks, notes)
    frame = steps.with_columns(ts_end=ts_end).drop("dummy", *_PARTS)
    return StepFile(frame, tuple(notes), error)


def _place(
    steps: pl.DataFrame, ticks: pl.Series | None, notes: list[str]
) -> tuple[pl.Series, int | None]:
    """Each step's end, and the measured alignment error when aligned to ``ticks``."""
    fallback = steps.select(_seconds_ns(_NO_YEAR)).to_series()
    reason = "no trace was given"
    if ticks is not None and ticks.len():
        year = tick_year(ticks)
        if year is None:
            reason = "the trace's clock is not wall-clock time"
        else:
            anchor = steps.select(_seconds_ns(year)).to_series()
            shift = zone_shift(anchor, ticks)
            if shift is None:
                reason = "no token tick of the trace falls in the log's seconds"
            else:
                frame = pl.DataFrame(
                    {
                        "replica": steps["replica"].fill_null(""),
                        "anchor": anchor + shift,
                        "duration": steps["duration"],
                        # A dummy pass and a step with no output emit no token.
                        "emits": ~steps["dummy"]
                        & ((steps["decode_tokens"] > 0) | (steps["prefill_requests"] > 0)),
                    }
                )
                ts_end, alignment = align_to_ticks(frame, ticks)
                notes.append(describe(alignment, shift, FORMAT))
                return ts_end.fill_null(frame["anchor"]), alignment.error_ns
    notes.append(
        f"vllm-log: not aligned ({reason}): each step ends at its log second, read as UTC "
        f"in {_NO_YEAR} (the prefix has no year or time zone); resolution 1 s"
    )
    return fallback.alias("ts_end"), None


def _seconds_ns(year: int) -> pl.Expr:
    """The epoch ns of each prefix's date and time in ``year`` (UTC: it names no zone)."""
    parts = (pl.col(part).cast(pl.Int32()) for part in _PARTS)
    return pl.datetime(pl.lit(year), *parts, time_unit="ns").dt.epoch("ns")
