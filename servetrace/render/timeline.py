"""Request lifecycles as a Chrome Trace Event Format file (Perfetto UI, chrome://tracing).

Layout. Process 1 holds the requests, packed into *lanes* (threads) so that requests that
overlap in time never share one. Each request is one slice named by its id (arrival →
terminal event, so its duration is its e2e) with its lifecycle phases nested inside:

- ``queued``         arrival → first admission (``queue_wait_ns``);
- ``prefill``        first admission → first token (``prefill_ns``);
- ``ttft``           arrival → first token, only for client traces without admissions;
- ``decode``         first token → last token (``decode_ns``);
- ``delivery_tail``  last token → completion (``delivery_tail_ns``), when non-zero;
- ``awaiting_token`` last token → cancellation (or the end of the trace): nothing came;
- ``requeued``       nested one level deeper, preemption → re-admission (``requeued_ns``);

then an instant marker at the terminal event (``completed``, ``cancelled in decode``…, or
``in flight at end of trace``). The phases partition the request, so they sum to its e2e.
Process 0 holds counter tracks (queued, running, in system, output tokens/s), and, opt-in,
every output tick is an instant event on its request's lane.

Times. The format wants µs; timestamps are written relative to the first event of the
trace (``otherData.trace_start_ns``) as µs with three decimals, which is exact to the ns
for traces shorter than 104 days (2**53 ns) — epoch ns would not fit a double.

Reference: Trace Event Format,
https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
"""

from __future__ import annotations

import gzip
import heapq
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from servetrace import __version__
from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.memory import Analysis
from servetrace.errors import UsageError
from servetrace.schema import TICK_EVENTS

COUNTER_PID, REQUEST_PID = 0, 1
PHASES = ("queued", "ttft", "prefill", "decode", "delivery_tail", "awaiting_token")
MAX_RATE_BINS = 2_000
NICE_STEPS_NS = [m * 10**e for e in range(6, 12) for m in (1, 2, 5)]  # 1 ms … 500 s


@dataclass(frozen=True)
class TimelineOptions:
    """Which requests to draw, and whether to draw every output tick."""

    requests: tuple[str, ...] = ()  # only these request ids
    window_ns: tuple[int, int] | None = None  # relative to the trace start; overlap selects
    slowest: int | None = None  # the N requests with the longest e2e (age, if in flight)
    ticks: bool = False


def parse_window(text: str) -> tuple[int, int]:
    """``a:b`` in seconds from the trace start, or with units: ``500ms:2s``, ``10:``."""
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise UsageError(f"--window {text!r}: expected START:END", hint="e.g. --window 10s:20s")

    def parse(part: str, default: int) -> int:
        part = part.strip()
        if not part:
            return default
        for unit, scale in (("ns", 1), ("us", 10**3), ("ms", 10**6), ("s", 10**9)):
            if part.endswith(unit):
                number, factor = part[: -len(unit)], scale
                break
        else:
            number, factor = part, 10**9
        try:
            return round(float(number) * factor)
        except ValueError:
            raise UsageError(
                f"--window {text!r}: {part!r} is not a time", hint="e.g. --window 10s:20s"
            ) from None

    start, end = parse(start_text, 0), parse(end_text, 2**62)
    if end <= start:
        raise UsageError(f"--window {text!r}: the end must come after the start")
    return start, end


def _bounds(analysis: Analysis) -> pl.DataFrame:
    """Per request: start, end and the phase boundaries, from the per-request metrics."""
    trace_end = analysis.timeline.trace_end_ns or 0
    a = pl.col("arrival_ns")
    end = pl.coalesce(a + pl.col("e2e_ns"), pl.lit(trace_end, pl.Int64))
    return analysis.requests.select(
        KEY,
        pl.col("request_id").cast(pl.String),
        "outcome",
        "cancelled_in",
        a.alias("start"),
        end.alias("end"),
        (a + pl.col("queue_wait_ns")).alias("admitted"),
        (a + pl.col("ttft_ns")).alias("first"),
        (a + pl.col("response_ns")).alias("last"),
        "queue_wait_ns",
        "prefill_ns",
        "ttft_ns",
        "decode_ns",
        "e2e_ns",
        "requeued_ns",
        "output_tokens",
        "preemptions",
    )


def select_requests(analysis: Analysis, options: TimelineOptions) -> pl.DataFrame:
    """The requests to draw, in arrival order."""
    bounds = _bounds(analysis)
    if options.requests:
        wanted = list(options.requests)
        missing = sorted(set(wanted) - set(bounds["request_id"].to_list()))
        if missing:
            shown = ", ".join(missing[:5])
            raise UsageError(
                f"--requests: no valid request with id {shown}"
                + (f" (and {len(missing) - 5} more)" if len(missing) > 5 else "")
            )
        bounds = bounds.filter(pl.col("request_id").is_in(wanted))
    if options.window_ns is not None:
        origin = analysis.timeline.trace_start_ns or 0
        lo, hi = options.window_ns
        bounds = bounds.filter((pl.col("end") >= origin + lo) & (pl.col("start") <= origin + hi))
    if options.slowest is not None:
        bounds = bounds.sort(
            pl.col("end") - pl.col("start"), "request_id", descending=[True, False]
        )
        bounds = bounds.head(options.slowest)
    return bounds.sort("start", "request_id")


def assign_lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane per interval (sorted by start) so that intervals on one lane never overlap.

    Greedy interval partitioning: the lowest free lane, which uses as many lanes as the
    peak concurrency (optimal). It is a heap walk, the one loop over requests here: the
    step cannot be vectorised, costs about 1 µs per request, and a timeline is meant for
    the at most ~1e5 requests a trace viewer can show (``--slowest``/``--window``).
    """
    lanes = np.empty(len(start), dtype=np.int64)
    busy: list[tuple[int, int]] = []  # (end, lane) of requests still open
    free: list[int] = []
    count = 0
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else count
        count = max(count, lane + 1)
        lanes[i] = lane
        heapq.heappush(busy, (e, lane))
    return lanes


def phase_slices(bounds: pl.DataFrame, has_admissions: bool) -> pl.DataFrame:
    """One row per lifecycle phase of each request: name, start, end (ns)."""
    s, e = pl.col("start"), pl.col("end")
    adm, first, last = pl.col("admitted"), pl.col("first"), pl.col("last")
    parts = [
        # A request cancelled while queued has its queue wait up to the cancellation.
        ("queued", s, pl.min_horizontal(pl.coalesce(adm, e), e)) if has_admissions else None,
        None if has_admissions else ("ttft", s, pl.coalesce(first, e)),
        ("prefill", adm, pl.coalesce(first, e)) if has_admissions else None,
        ("decode", first, last),
        (None, last, e),
    ]
    frames = []
    for name, lo, hi in (p for p in parts if p is not None):
        label = (
            pl.lit(name)
            if name
            else pl.when(pl.col("outcome") == "completed")
            .then(pl.lit("delivery_tail"))
            .otherwise(pl.lit("awaiting_token"))
        )
        frames.append(
            bounds.select(KEY, label.alias("name"), lo.alias("lo"), hi.alias("hi")).filter(
                pl.col("lo").is_not_null()
                & pl.col("hi").is_not_null()
                & (pl.col("hi") > pl.col("lo"))
            )
        )
    return pl.concat(frames).sort(KEY, "lo")


def requeued_slices(control: pl.DataFrame, keys: pl.DataFrame, trace_end: int) -> pl.DataFrame:
    """Preemption → next control event (re-admission or cancellation), as the lifecycle
    measures ``requeued_ns``; a request still waiting at the end is requeued until then."""
    if control.height == 0:
        return pl.DataFrame(schema={KEY: pl.Int64, "lo": pl.Int64, "hi": pl.Int64})
    events = (
        control.join(keys, on="request_id", how="inner")
        .filter(~pl.col("event").is_in(TICK_EVENTS))
        .sort(KEY, "ts", "event")
        .with_columns(pl.col("ts").shift(-1).over(KEY).alias("next_ts"))
    )
    return events.filter(pl.col("event") == "preemption").select(
        KEY, pl.col("ts").alias("lo"), pl.col("next_ts").fill_null(trace_end).alias("hi")
    )


def _us(ns: pl.Expr, origin: int) -> pl.Expr:
    # Integer ns → float µs: exact to the ns (three decimals) below 2**53 ns after origin.
    return (ns - origin).cast(pl.Float64) / 1000.0


def _ndjson(frame: pl.DataFrame) -> list[str]:
    return frame.write_ndjson().splitlines() if frame.height else []


def _marker_name() -> pl.Expr:
    outcome = pl.col("outcome")
    return (
        pl.when(outcome == "completed")
        .then(pl.lit("completed"))
        .when(outcome == "cancelled")
        .then(pl.lit("cancelled in ") + pl.col("cancelled_in").fill_null("?"))
        .otherwise(pl.lit("in flight at end of trace"))
    )


def counter_series(analysis: Analysis) -> pl.DataFrame:
    """Queued / running / in-system levels after each change: ts, name, value."""
    levels = (
        analysis.timeline.transitions.sort("ts")
        .with_columns(
            pl.col("d_queued").cum_sum().alias("queued"),
            pl.col("d_running").cum_sum().alias("running"),
            pl.col("d_in_system").cum_sum().alias("in_system"),
        )
        .group_by("ts", maintain_order=True)
        .agg(pl.col("queued", "running", "in_system").last())
    )
    long = levels.unpivot(index="ts", variable_name="name", value_name="value")
    # A counter event only where the level changes: the viewer holds a value until the next.
    changed = pl.col("value") != pl.col("value").shift(1).over("name")
    return long.filter(changed.fill_null(True))


def rate_bin_ns(span_ns: int) -> int:
    """The smallest 1-2-5 bin (≥ 1 ms) giving at most MAX_RATE_BINS bins over the span."""
    for step in NICE_STEPS_NS:
        if span_ns / step <= MAX_RATE_BINS:
            return step
    return NICE_STEPS_NS[-1]


def token_rate(ticks: pl.DataFrame, start_ns: int, end_ns: int) -> pl.DataFrame:
    """Output tokens/s per bin (``ts`` = bin start, ns), empty bins included as zero."""
    step = rate_bin_ns(max(end_ns - start_ns, 1))
    binned = ticks.group_by(((pl.col("ts") - start_ns) // step).alias("bin")).agg(
        pl.col("tokens").sum()
    )
    n_bins = (end_ns - start_ns) // step + 1
    return (
        pl.DataFrame({"bin": pl.arange(0, n_bins, eager=True).cast(pl.Int64)})
        .join(binned, on="bin", how="left")
        .select(
            (pl.col("bin") * step + start_ns).alias("ts"),
            (pl.col("tokens").fill_null(0) * (1e9 / step)).alias("tokens_per_s"),
        )
    )


def build_trace(
    analysis: Analysis,
    events: pl.DataFrame,
    options: TimelineOptions | None = None,
) -> tuple[str, dict[str, Any]]:
    """The trace file's JSON text and a summary of what it holds.

    ``events`` are the canonical events of the trace (the analysis keeps no ticks and no
    preemption times); only rows of valid, selected requests are used.
    """
    options = options or TimelineOptions()
    origin = analysis.timeline.trace_start_ns or 0
    trace_end = analysis.timeline.trace_end_ns or origin
    chosen = select_requests(analysis, options)
    lanes = assign_lanes(chosen["start"].to_numpy(), chosen["end"].to_numpy())
    chosen = chosen.with_columns(pl.Series("tid", lanes + 1))
    lane_of = chosen.select(KEY, "tid", "request_id")
    events = events.with_columns(pl.col("request_id").cast(pl.String))

    def complete(frame: pl.DataFrame, name: pl.Expr, args: pl.Expr, cat: str) -> list[str]:
        out = frame.join(lane_of, on=KEY).select(
            name.alias("name"),
            pl.lit(cat).alias("cat"),
            pl.lit("X").alias("ph"),
            _us(pl.col("lo"), origin).alias("ts"),
            ((pl.col("hi") - pl.col("lo")).cast(pl.Float64) / 1000.0).alias("dur"),
            pl.lit(REQUEST_PID).alias("pid"),
            "tid",
            args.alias("args"),
        )
        return _ndjson(out)

    request_args = pl.struct(
        "request_id",
        "outcome",
        "cancelled_in",
        "queue_wait_ns",
        "prefill_ns",
        "ttft_ns",
        "decode_ns",
        "e2e_ns",
        "requeued_ns",
        "preemptions",
        "output_tokens",
    )
    lines = complete(
        chosen.rename({"start": "lo", "end": "hi"}).drop("tid", "request_id"),
        pl.col("request_id"),
        request_args,
        "request",
    )
    phases = phase_slices(chosen, analysis.timeline.has_admissions)
    lines += complete(
        phases.with_columns((pl.col("hi") - pl.col("lo")).alias("duration_ns")),
        pl.col("name"),
        pl.struct("request_id", "duration_ns"),
        "phase",
    )
    control = events.filter(~pl.col("event").is_in(TICK_EVENTS))
    requeued = requeued_slices(control, lane_of.select(KEY, "request_id"), trace_end)
    lines += complete(
        requeued.with_columns((pl.col("hi") - pl.col("lo")).alias("duration_ns")),
        pl.lit("requeued"),
        pl.struct("request_id", "duration_ns"),
        "phase",
    )
    markers = chosen.select(
        _marker_name().alias("name"),
        pl.lit("lifecycle").alias("cat"),
        pl.lit("i").alias("ph"),
        pl.lit("t").alias("s"),
        _us(pl.col("end"), origin).alias("ts"),
        pl.lit(REQUEST_PID).alias("pid"),
        "tid",
        pl.struct("request_id", "outcome").alias("args"),
    )
    lines += _ndjson(markers)
    ticks = events.filter(pl.col("event").is_in(TICK_EVENTS)).join(
        analysis.requests.select(pl.col("request_id").cast(pl.String)), on="request_id"
    )
    tokens = pl.col("tokens") if "tokens" in ticks.columns else pl.lit(1, pl.Int64)
    ticks = ticks.select("request_id", "ts", tokens.fill_null(1).cast(pl.Int64).alias("tokens"))
    n_ticks = 0
    if options.ticks:
        tick_events = ticks.join(lane_of.select("request_id", "tid"), on="request_id").select(
            pl.lit("token").alias("name"),
            pl.lit("tick").alias("cat"),
            pl.lit("i").alias("ph"),
            pl.lit("t").alias("s"),
            _us(pl.col("ts"), origin).alias("ts"),
            pl.lit(REQUEST_PID).alias("pid"),
            "tid",
            pl.struct("request_id", "tokens").alias("args"),
        )
        n_ticks = tick_events.height
        lines += _ndjson(tick_events)
    lo_ns, hi_ns = origin, trace_end
    if options.window_ns is not None:
        lo_ns = origin + options.window_ns[0]
        hi_ns = min(trace_end, origin + options.window_ns[1])
    in_window = (pl.col("ts") >= lo_ns) & (pl.col("ts") <= hi_ns)
    counters = counter_series(analysis).filter(in_window)
    rate = token_rate(ticks, origin, trace_end).filter(in_window)
    counter_frames = [
        counters.select(
            "name",
            pl.lit("C").alias("ph"),
            _us(pl.col("ts"), origin).alias("ts"),
            pl.lit(COUNTER_PID).alias("pid"),
            pl.struct(pl.col("value").alias("requests")).alias("args"),
        ),
        rate.select(
            pl.lit("output tokens/s").alias("name"),
            pl.lit("C").alias("ph"),
            _us(pl.col("ts"), origin).alias("ts"),
            pl.lit(COUNTER_PID).alias("pid"),
            pl.struct(pl.col("tokens_per_s").alias("tok/s")).alias("args"),
        ),
    ]
    for frame in counter_frames:
        lines += _ndjson(frame)
    lines += [json.dumps(m) for m in _metadata(int(lanes.max()) + 1 if len(lanes) else 0)]
    info = {
        "requests": chosen.height,
        "lanes": int(lanes.max()) + 1 if len(lanes) else 0,
        "phase_slices": phases.height,
        "requeued_slices": requeued.height,
        "tick_events": n_ticks,
        "counter_events": counters.height + rate.height,
        "trace_start_ns": origin,
    }
    other = {
        "servetrace_version": __version__,
        "inputs": list(analysis.inputs),
        "trace_start_ns": origin,
        "time_origin": "ts are µs since trace_start_ns (the first event of the trace)",
        **{k: v for k, v in info.items() if k != "trace_start_ns"},
    }
    text = (
        '{"traceEvents":[\n'
        + ",\n".join(lines)
        + '\n],"displayTimeUnit":"ms","otherData":'
        + json.dumps(other, ensure_ascii=False)
        + "}\n"
    )
    return text, info


def _metadata(n_lanes: int) -> list[dict[str, Any]]:
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": COUNTER_PID, "args": {"name": "servetrace"}},
        {"name": "process_sort_index", "ph": "M", "pid": COUNTER_PID, "args": {"sort_index": 0}},
        {
            "name": "process_name",
            "ph": "M",
            "pid": REQUEST_PID,
            "args": {"name": "requests (one lane per concurrent request)"},
        },
        {"name": "process_sort_index", "ph": "M", "pid": REQUEST_PID, "args": {"sort_index": 1}},
    ]
    for lane in range(1, n_lanes + 1):
        meta.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": REQUEST_PID,
                "tid": lane,
                "args": {"name": f"lane {lane}"},
            }
        )
        meta.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": REQUEST_PID,
                "tid": lane,
                "args": {"sort_index": lane},
            }
        )
    return meta


def write_trace(text: str, path: Path) -> None:
    """Write the trace; ``.gz`` compresses it (Perfetto opens gzipped JSON directly)."""
    data = text.encode()
    try:
        if path.suffix.lower() == ".gz":
            # mtime=0: the same trace gives the same bytes.
            with gzip.GzipFile(path, "wb", mtime=0) as handle:
                handle.write(data)
        else:
            path.write_bytes(data)
    except OSError as error:
        raise UsageError(f"{path}: cannot write: {error.strerror or error}") from None


def parse_ids(text: Sequence[str] | None) -> tuple[str, ...]:
    """``--requests r1,r2 --requests r3`` → ids."""
    return tuple(i.strip() for item in text or () for i in item.split(",") if i.strip())
