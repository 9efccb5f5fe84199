"""Request lifecycles as a Chrome Trace Event Format file (Perfetto UI, chrome://tracing).

Layout. Process 2 holds the requests, packed into *lanes* (threads) so that requests that
overlap in time never share one. Each request is one slice named by its id (arrival →
terminal event, so its duration is its e2e) with its lifecycle phases nested inside:

- ``queued``         arrival → first admission (``queue_wait_ns``);
- ``prefill``        first admission → first token (``prefill_ns``);
- ``ttft``           arrival → first token, only for client traces without admissions;
- ``decode``         first token → last token (``decode_ns``);
- ``delivery_tail``  last token → completion (``delivery_tail_ns``), when non-zero;
- ``awaiting_token`` last token (client-side: the send, when no token came) → the
  cancellation, error or end of the trace: nothing came;
- ``unknown_state``  that span when the source dropped the partial output;
- ``requeued``       nested one level deeper, preemption → re-admission (``requeued_ns``);

then an instant marker at the terminal event, in words (``completed``, ``cancelled before
the first token``, ``cancelled while decoding``…, ``failed with an error`` or ``in flight
at end of trace``). The phases partition the request, so they sum to its e2e.
Process 1 holds counter tracks (queued, running, in system, output tokens/s), and, opt-in,
every output tick is an instant event on its request's lane. With ``--server-metrics``,
process 6 holds the server's series (`server_timeline`); with ``--steps``, process 7 the
engine's steps, a lane and counters per replica (`step_timeline`).

Times. The format wants µs; timestamps are written relative to the first event of the
trace (``otherData.trace_start_ns``) as µs with three decimals, which is exact to the ns
for traces shorter than 104 days (2**53 ns) — epoch ns would not fit a double.

Reference: Trace Event Format,
https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.result import Analysis
from servetrace.errors import UsageError
from servetrace.render.server_timeline import server_tracks
from servetrace.render.slices import (
    TimelineOptions,
    assign_lanes,
    counter_series,
    phase_slices,
    requeued_slices,
    select_requests,
    token_rate,
)
from servetrace.render.step_timeline import step_tracks
from servetrace.schema import TICK_EVENTS
from servetrace.units import duration_ns
from servetrace.version import __version__

if TYPE_CHECKING:
    from servetrace.api._steps import StepRecords

__all__ = ["TimelineOptions", "build_trace", "parse_ids", "parse_window"]

# pid 0 is the idle task on Linux and some importers treat it specially: start at 1.
COUNTER_PID, REQUEST_PID = 1, 2


def parse_window(text: str) -> tuple[int, int]:
    """``a:b`` in seconds from the trace start, or with units: ``500ms:2s``, ``10:``."""
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise UsageError(f"--window {text!r}: expected START:END", hint="e.g. --window 10s:20s")

    def parse(part: str, default: int) -> int:
        part = part.strip()
        if not part:
            return default
        ns = duration_ns(part)  # the one duration grammar: ns … h, a bare number is seconds
        if ns is None or not 0 <= ns < 2**62:
            raise UsageError(
                f"--window {text!r}: {part!r} is not a time from the trace start",
                hint="e.g. --window 10s:20s (ns, us, ms, s, min or h)",
            )
        return ns

    start, end = parse(start_text, 0), parse(end_text, 2**62)
    if end <= start:
        raise UsageError(f"--window {text!r}: the end must come after the start")
    return start, end


def _us(ns: pl.Expr, origin: int) -> pl.Expr:
    # Integer ns → float µs: exact to the ns (three decimals) below 2**53 ns after origin.
    return (ns - origin).cast(pl.Float64) / 1000.0


def _ndjson(frame: pl.DataFrame) -> list[str]:
    # Rows end at "\n" only: str.splitlines() would also cut at U+2028, U+2029 and U+0085,
    # which JSON writes unescaped inside strings (an id holding one broke the file).
    return frame.write_ndjson().removesuffix("\n").split("\n") if frame.height else []


# How a cancelled request ended, by its stage (analysis.metrics), in words.
CANCELLED_WORDS = {
    "queued": "cancelled while queued",
    "prefill": "cancelled in prefill, before the first token",
    "decode": "cancelled while decoding",
    "before_first_token": "cancelled before the first token",
    "unknown": "cancelled, stage unknown (the source drops the partial output)",
}


def _marker_name() -> pl.Expr:
    outcome = pl.col("outcome")
    stage = pl.col("cancelled_in").replace_strict(
        CANCELLED_WORDS, default="cancelled", return_dtype=pl.String
    )
    return (
        pl.when(outcome == "completed")
        .then(pl.lit("completed"))
        .when(outcome == "cancelled")
        .then(stage)
        .when(outcome == "errored")
        .then(pl.lit("failed with an error"))
        .otherwise(pl.lit("in flight at end of trace"))
    )


def shown_input(text: str) -> str:
    """An input as the file may show it to others: relative to the working directory
    when under it, else its file name; never this machine's absolute path (URIs stay)."""
    from servetrace.sources.objectstore import is_uri

    if is_uri(text) or not os.path.isabs(text):
        return text
    path = Path(text)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return path.name


def build_trace(
    analysis: Analysis, options: TimelineOptions | None = None, steps: StepRecords | None = None
) -> tuple[str, dict[str, Any]]:
    """The trace file's JSON text and a summary of what it holds.

    The trace's canonical events are read again (the analysis keeps no ticks and no
    preemption times); only rows of valid, selected requests are used. A trace without
    send times has no common time axis to lay requests on: refused, as ``--slice`` is.
    ``steps`` (``timeline --steps``) adds a lane and counters per replica (`step_tracks`).
    """
    options = options or TimelineOptions()
    if not analysis.summary.arrival_known:
        raise UsageError(
            f"{', '.join(analysis.inputs)}: a timeline places every request at its send "
            "time, and this trace does not record send times (each request's times are "
            "relative to its own send), so requests cannot share one time axis",
            hint="analyze and report show its latencies; a trace with send times (vLLM's "
            "start_times, a client's timestamps) can be drawn",
        )
    events = analysis.events("a timeline lays out each request's events").collect()
    origin = analysis.timeline.trace_start_ns or 0
    trace_end = analysis.timeline.trace_end_ns or origin
    chosen = select_requests(analysis, options)
    lanes = assign_lanes(chosen["start"].to_numpy(), chosen["end"].to_numpy())
    chosen = chosen.with_columns(pl.Series("tid", lanes + 1))
    lane_of = chosen.select(KEY, "tid", "request_id")
    events = events.with_columns(pl.col("request_id").cast(pl.String))

    def complete(frame: pl.DataFrame, name: pl.Expr, args: pl.Expr, cat: str) -> list[str]:
        out = frame.join(lane_of, on=KEY, maintain_order="left").select(
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

    def instant(frame: pl.DataFrame, name: pl.Expr, cat: str, ts: str, args: pl.Expr) -> list[str]:
        return _ndjson(
            frame.select(
                name.alias("name"),
                pl.lit(cat).alias("cat"),
                pl.lit("i").alias("ph"),
                pl.lit("t").alias("s"),
                _us(pl.col(ts), origin).alias("ts"),
                pl.lit(REQUEST_PID).alias("pid"),
                "tid",
                args.alias("args"),
            )
        )

    def counter(frame: pl.DataFrame, name: pl.Expr, args: pl.Expr) -> list[str]:
        return _ndjson(
            frame.select(
                name.alias("name"),
                pl.lit("C").alias("ph"),
                _us(pl.col("ts"), origin).alias("ts"),
                pl.lit(COUNTER_PID).alias("pid"),
                args.alias("args"),
            )
        )

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
    lines += instant(chosen, _marker_name(), "lifecycle", "end", pl.struct("request_id", "outcome"))
    ticks = events.filter(pl.col("event").is_in(TICK_EVENTS)).join(
        analysis.per_request.select(pl.col("request_id").cast(pl.String)),
        on="request_id",
        maintain_order="left",
    )
    tokens = pl.col("tokens") if "tokens" in ticks.columns else pl.lit(1, pl.Int64)
    ticks = ticks.select("request_id", "ts", tokens.fill_null(1).cast(pl.Int64).alias("tokens"))
    n_ticks = 0
    if options.ticks:
        laid = ticks.join(
            lane_of.select("request_id", "tid"), on="request_id", maintain_order="left"
        )
        n_ticks = laid.height
        lines += instant(laid, pl.lit("token"), "tick", "ts", pl.struct("request_id", "tokens"))
    lo_ns, hi_ns = origin, trace_end
    if options.window_ns is not None:
        lo_ns = origin + options.window_ns[0]
        hi_ns = min(trace_end, origin + options.window_ns[1])
    in_window = (pl.col("ts") >= lo_ns) & (pl.col("ts") <= hi_ns)
    counters = counter_series(analysis).filter(in_window)
    rate = token_rate(ticks, origin, trace_end).filter(in_window)
    lines += counter(counters, pl.col("name"), pl.struct(pl.col("value").alias("requests")))
    rate_args = pl.struct(pl.col("tokens_per_s").alias("tok/s"))
    lines += counter(rate, pl.lit("output tokens/s"), rate_args)
    server, server_meta, n_server = server_tracks(analysis, origin, lo_ns, hi_ns)
    lines += server
    step_lines, step_meta, step_info = (
        step_tracks(steps, origin, lo_ns, hi_ns) if steps is not None else ([], [], None)
    )
    lines += step_lines
    n_lanes = int(lanes.max()) + 1 if len(lanes) else 0
    lines += [json.dumps(m) for m in _metadata(n_lanes)]
    lines += [json.dumps(m, ensure_ascii=False) for m in server_meta + step_meta]
    info = {
        "requests": chosen.height,
        "lanes": n_lanes,
        "phase_slices": phases.height,
        "requeued_slices": requeued.height,
        "tick_events": n_ticks,
        "counter_events": counters.height + rate.height,
        **({"server_counter_events": n_server} if server_meta else {}),
        **({"steps": step_info} if step_info is not None else {}),
        "trace_start_ns": origin,
    }
    other = {
        "servetrace_version": __version__,
        "inputs": [shown_input(text) for text in analysis.inputs],
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


def _meta(kind: str, pid: int, args: dict[str, Any], tid: int | None = None) -> dict[str, Any]:
    """A metadata event: a process's or a lane's name or place."""
    where = {"pid": pid} if tid is None else {"pid": pid, "tid": tid}
    return {"name": kind, "ph": "M", **where, "args": args}


def _metadata(n_lanes: int) -> list[dict[str, Any]]:
    system = "system: queued, running, in system, output tokens/s"
    meta = [
        _meta("process_name", COUNTER_PID, {"name": system}),
        _meta("process_sort_index", COUNTER_PID, {"sort_index": 0}),
        _meta("process_name", REQUEST_PID, {"name": "requests (one lane per concurrent request)"}),
        _meta("process_sort_index", REQUEST_PID, {"sort_index": 1}),
    ]
    for lane in range(1, n_lanes + 1):
        meta.append(_meta("thread_name", REQUEST_PID, {"name": f"lane {lane}"}, lane))
        meta.append(_meta("thread_sort_index", REQUEST_PID, {"sort_index": lane}, lane))
    return meta


def parse_ids(text: Sequence[str] | None) -> tuple[str, ...]:
    """``--requests r1,r2 --requests r3`` → ids."""
    return tuple(i.strip() for item in text or () for i in item.split(",") if i.strip())
