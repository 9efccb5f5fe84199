"""Figures per time slice (``--slice 10s``): how the run changed over its course.

Slice ``k`` is ``[origin + k·w, origin + (k+1)·w)``; the last is cut short by the end of
the analysed trace (its last event, which belongs to it). ``origin`` is the window's start
under ``--window``/``--steady-state``, else the trace start. Per slice, by one definition
each (every figure one ``group_by`` over the slice index, never a loop over slices):

- ``arrivals``: requests arriving in the slice;
- ``completed``, ``requests_per_s``: requests *completing* in the slice, per second of it;
- ``output_tokens_per_s``: output tokens *emitted* in the slice (by tick time), per
  second (null when the ticks are not at hand, or are synthetic: a request-level trace);
- ``goodput_requests_per_s``: completing requests that met every ``--goodput`` target;
- ``ttft_p50/p99``, ``tpot_p50/p99``: of completed requests that *arrived* in the slice
  (so a slice's latencies are those of ``--window`` over it), linear interpolation;
- ``queued_mean``, ``running_mean``, ``in_system_mean``: time-weighted mean levels over
  the slice (queued and running null for a trace without admissions).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import CONCURRENCY, mean_levels
from servetrace.analysis.result import Analysis, events_of
from servetrace.analysis.summary import GoodputTarget
from servetrace.analysis.window import INT64_MAX, TOO_LONG
from servetrace.errors import UsageError
from servetrace.schema import TICK_EVENTS
from servetrace.units import DURATION_UNITS_TEXT, NS_PER_MS, duration_ns

MAX_SLICES = 10_000


def slice_count(origin: int, end: int, width: int) -> int:
    count = max(1, -(-(end - origin) // width))
    if count > MAX_SLICES:
        raise UsageError(
            f"--slice: {count:,} slices over this trace (at most {MAX_SLICES:,})",
            hint="choose a longer slice",
        )
    return count


def _index(ts: pl.Expr, origin: int, width: int, count: int) -> pl.Expr:
    return pl.min_horizontal((ts - origin) // width, pl.lit(count - 1)).alias("slice")


def _tokens(
    events: pl.DataFrame | pl.LazyFrame, analysis: Analysis, origin: int, width: int, count: int
) -> pl.DataFrame:
    ticks = events_of(events.filter(pl.col("event").is_in(TICK_EVENTS)), analysis.per_request)
    has_tokens = "tokens" in ticks.collect_schema().names()
    tokens = pl.col("tokens").fill_null(1).sum() if has_tokens else pl.len()
    return (
        ticks.group_by(_index(pl.col("ts"), origin, width, count))
        .agg(tokens.cast(pl.Int64).alias("tokens"))
        .collect()
    )


def slice_figures(
    analysis: Analysis,
    width_ns: int,
    origin_ns: int | None = None,
    events: pl.DataFrame | pl.LazyFrame | None = None,
    targets: Sequence[GoodputTarget] = (),
) -> pl.DataFrame:
    """One row per slice (the module docstring's figures; times in ns)."""
    if width_ns <= 0:
        raise UsageError("--slice must be longer than 0")
    timeline = analysis.timeline
    origin = timeline.trace_start_ns if origin_ns is None else origin_ns
    end = timeline.trace_end_ns
    if origin is None or end is None or not analysis.summary.arrival_known:
        raise UsageError("--slice needs send times: this trace has none to place requests in time")
    count = slice_count(origin, end, width_ns)
    grid = pl.DataFrame({"slice": pl.arange(0, count, eager=True).cast(pl.Int64)}).with_columns(
        (pl.col("slice") * width_ns + origin).alias("start_ns"),
        pl.min_horizontal((pl.col("slice") + 1) * width_ns + origin, pl.lit(end)).alias("end_ns"),
    )
    requests = analysis.per_request
    done = pl.col("outcome") == "completed"
    good = pl.all_horizontal([t.expr() for t in targets]) if targets else pl.lit(None, pl.Boolean)
    arrived = requests.group_by(_index(pl.col("arrival_ns"), origin, width_ns, count)).agg(
        pl.len().alias("arrivals"),
        *[
            pl.col(f"{m}_ns")
            .filter(done)
            .cast(pl.Float64)
            .quantile(q / 100, interpolation="linear")
            .alias(f"{m}_p{q}_ns")
            for m in ("ttft", "tpot")
            for q in (50, 99)
        ],
    )
    finished = (
        requests.filter(done)
        .group_by(_index(pl.col("arrival_ns") + pl.col("e2e_ns"), origin, width_ns, count))
        .agg(pl.len().alias("completed"), good.sum().alias("good"))
    )
    edges = np.append(grid["start_ns"].to_numpy(), end).astype(np.int64)
    means = mean_levels(timeline.transitions, edges)
    grid = grid.with_columns(pl.Series(f"{n}_mean", means[n]) for n in CONCURRENCY)
    frame = grid.join(arrived, on="slice", how="left").join(finished, on="slice", how="left")
    # A request-level trace's one tick per request is synthetic: it says when the first
    # token came, not how many tokens a slice emitted (analysis.output_counts).
    if events is not None and analysis.summary.ticks_available:
        frame = frame.join(
            _tokens(events, analysis, origin, width_ns, count), on="slice", how="left"
        )
        tokens = pl.col("tokens").fill_null(0)
    else:
        tokens = pl.lit(None, pl.Int64)
    seconds = (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64) / 1e9
    per_s = pl.when(seconds > 0)
    frame = frame.with_columns(
        pl.col("arrivals").fill_null(0).cast(pl.Int64),
        pl.col("completed").fill_null(0).cast(pl.Int64),
    ).with_columns(
        per_s.then(pl.col("completed") / seconds).alias("requests_per_s"),
        per_s.then(tokens / seconds).alias("output_tokens_per_s"),
        (per_s.then(pl.col("good").fill_null(0) / seconds) if targets else pl.lit(None))
        .cast(pl.Float64)
        .alias("goodput_requests_per_s"),
    )
    if not timeline.has_admissions:
        frame = frame.with_columns(
            pl.lit(None, pl.Float64).alias("queued_mean"),
            pl.lit(None, pl.Float64).alias("running_mean"),
        )
    return frame.select(
        "slice",
        "start_ns",
        "end_ns",
        "arrivals",
        "completed",
        "requests_per_s",
        "output_tokens_per_s",
        "goodput_requests_per_s",
        "ttft_p50_ns",
        "ttft_p99_ns",
        "tpot_p50_ns",
        "tpot_p99_ns",
        "queued_mean",
        "running_mean",
        "in_system_mean",
    ).sort("slice")


def parse_slice(text: str, flag: str = "--slice") -> int:
    """``10s``, ``500ms``, ``2min``, ``1.5`` (seconds): any unit of the rule grammar → ns."""
    width = duration_ns(text)
    hint = "e.g. --slice 10s, --slice 500ms, --slice 2min"
    if width is None:
        raise UsageError(
            f"{flag} {text!r}: give a duration such as 10s, 500ms or 2min "
            f"(units {DURATION_UNITS_TEXT})",
            hint=hint,
        )
    if width <= 0:
        raise UsageError(f"{flag} {text!r}: a slice must be positive", hint=hint)
    if width > INT64_MAX:
        raise UsageError(f"{flag} {text!r}: {TOO_LONG}", hint=hint)
    if width < NS_PER_MS:
        raise UsageError(f"{flag} {text!r}: a slice is at least 1 ms", hint=hint)
    return width
