"""A request's lifecycle as time slices, and the system's levels and rates over time.

Shared by the Perfetto timeline and the HTML report's waterfall and time series, so both
draw the same phases with the same boundaries. Every boundary comes from the per-request
metrics (``arrival_ns`` + ``queue_wait_ns``, + ``ttft_ns``, + ``response_ns``, + ``e2e_ns``),
so a slice's length *is* the metric of the same name:

- ``queued``         arrival → first admission (``queue_wait_ns``);
- ``prefill``        first admission → first token (``prefill_ns``);
- ``ttft``           arrival → first token, only for client traces without admissions;
- ``decode``         first token → last token (``decode_ns``);
- ``delivery_tail``  last token → completion (``delivery_tail_ns``), when non-zero;
- ``awaiting_token`` last token (client-side: the send, when no token came) → the
  cancellation, error or end of the trace: nothing came;
- ``unknown_state``  the same span of a request whose source dropped its partial output
  (``cancelled_in`` unknown): whether a token came is not known;
- ``requeued``       preemption → next control event, within one of the above.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.result import Analysis
from servetrace.errors import UsageError
from servetrace.schema import TICK_EVENTS

MAX_RATE_BINS = 2_000
NICE_STEPS_NS = [m * 10**e for e in range(6, 12) for m in (1, 2, 5)]  # 1 ms … 500 s


@dataclass(frozen=True)
class TimelineOptions:
    """Which requests to draw, and whether to draw every output tick."""

    requests: tuple[str, ...] = ()  # only these request ids
    window_ns: tuple[int, int] | None = None  # relative to the trace start; overlap selects
    slowest: int | None = None  # the N requests with the longest e2e (age, if in flight)
    ticks: bool = False


def boundaries(trace_end: int) -> list[pl.Expr]:
    """A request's start, end (the trace's, while unfinished) and phase boundaries
    (admitted, first and last token), from its per-request metrics."""
    a = pl.col("arrival_ns")
    return [
        a.alias("start"),
        pl.coalesce(a + pl.col("e2e_ns"), pl.lit(trace_end, pl.Int64)).alias("end"),
        (a + pl.col("queue_wait_ns")).alias("admitted"),
        (a + pl.col("ttft_ns")).alias("first"),
        (a + pl.col("response_ns")).alias("last"),
    ]


def _bounds(analysis: Analysis) -> pl.DataFrame:
    """Per request: start, end and the phase boundaries, and the metrics a timeline shows."""
    return analysis.per_request.select(
        KEY,
        pl.col("request_id").cast(pl.String),
        "outcome",
        "cancelled_in",
        *boundaries(analysis.timeline.trace_end_ns or 0),
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
    """One row per lifecycle phase of each request: name, start, end (ns), the requests in
    the order of ``bounds`` (their keys are category codes, which differ run to run)."""
    s, e = pl.col("start"), pl.col("end")
    adm, first, last = pl.col("admitted"), pl.col("first"), pl.col("last")
    # After the last token (or, client-side, from the send when no token came): the
    # delivery tail of a completed request, else a wait that ended without a token; a
    # source that dropped the partial output cannot say whether one came.
    after = (
        pl.when(pl.col("outcome") == "completed")
        .then(pl.lit("delivery_tail"))
        .when(pl.col("cancelled_in") == "unknown")
        .then(pl.lit("unknown_state"))
        .otherwise(pl.lit("awaiting_token"))
    )
    parts: list[tuple[pl.Expr, pl.Expr, pl.Expr] | None] = [
        # A request cancelled while queued has its queue wait up to the cancellation.
        (pl.lit("queued"), s, pl.min_horizontal(pl.coalesce(adm, e), e))
        if has_admissions
        else None,
        None if has_admissions else (pl.lit("ttft"), s, first),
        None if has_admissions else (after, s, pl.when(first.is_null()).then(e)),
        (pl.lit("prefill"), adm, pl.coalesce(first, e)) if has_admissions else None,
        (pl.lit("decode"), first, last),
        (after, last, e),
    ]
    ordered = bounds.with_row_index("_row")
    frames = []
    for label, lo, hi in (p for p in parts if p is not None):
        frames.append(
            ordered.select("_row", KEY, label.alias("name"), lo.alias("lo"), hi.alias("hi")).filter(
                pl.col("lo").is_not_null()
                & pl.col("hi").is_not_null()
                & (pl.col("hi") > pl.col("lo"))
            )
        )
    return pl.concat(frames).sort("_row", "lo").drop("_row")


def requeued_slices(control: pl.DataFrame, keys: pl.DataFrame, trace_end: int) -> pl.DataFrame:
    """Preemption → next control event (re-admission or cancellation), as the lifecycle
    measures ``requeued_ns``; a request still waiting at the end is requeued until then.
    The requests come in the order of ``keys``."""
    if control.height == 0:
        return pl.DataFrame(schema={KEY: pl.Int64, "lo": pl.Int64, "hi": pl.Int64})
    events = (
        control.join(keys.with_row_index("_row"), on="request_id", how="inner")
        .filter(~pl.col("event").is_in(TICK_EVENTS))
        .sort("_row", "ts", "event")
        .with_columns(pl.col("ts").shift(-1).over(KEY).alias("next_ts"))
    )
    return events.filter(pl.col("event") == "preemption").select(
        KEY, pl.col("ts").alias("lo"), pl.col("next_ts").fill_null(trace_end).alias("hi")
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
    # Only the levels the analysis knows: a client trace sees no queue and no running set,
    # a trace without send times no level at all.
    known = [n for n in ("queued", "running", "in_system") if _known_level(analysis, n)]
    long = levels.select("ts", *known).unpivot(index="ts", variable_name="name", value_name="value")
    # A counter event only where the level changes: the viewer holds a value until the next.
    changed = pl.col("value") != pl.col("value").shift(1).over("name")
    return long.filter(changed.fill_null(True))


def _known_level(analysis: Analysis, name: str) -> bool:
    return analysis.summary.concurrency.get(f"{name}_mean") is not None


def rate_bin_ns(span_ns: int) -> int:
    """The smallest 1-2-5 bin (≥ 1 ms) giving at most MAX_RATE_BINS bins over the span."""
    for step in NICE_STEPS_NS:
        if span_ns / step <= MAX_RATE_BINS:
            return step
    return NICE_STEPS_NS[-1]


def bin_index(ts: pl.Expr, start_ns: int, step: int, n_bins: int) -> pl.Expr:
    """Bin of each timestamp; the trace's last instant belongs to the last bin."""
    return pl.min_horizontal((ts - start_ns) // step, pl.lit(n_bins - 1)).alias("bin")


def bin_width(step: int, span_ns: int) -> pl.Expr:
    """Width of each bin (ns): the last one is cut short by the end of the trace."""
    return pl.min_horizontal(pl.lit(step), pl.lit(span_ns) - pl.col("bin") * step)


def token_rate(ticks: pl.DataFrame, start_ns: int, end_ns: int) -> pl.DataFrame:
    """Output tokens/s per bin (``ts`` = bin start, ns), empty bins included as zero."""
    span = max(end_ns - start_ns, 1)
    step = rate_bin_ns(span)
    n_bins = -(-span // step)
    binned = ticks.group_by(bin_index(pl.col("ts"), start_ns, step, n_bins)).agg(
        pl.col("tokens").sum()
    )
    return (
        pl.DataFrame({"bin": pl.arange(0, n_bins, eager=True).cast(pl.Int64)})
        .join(binned, on="bin", how="left")
        .select(
            (pl.col("bin") * step + start_ns).alias("ts"),
            (pl.col("tokens").fill_null(0) * 1e9 / bin_width(step, span)).alias("tokens_per_s"),
        )
    )
