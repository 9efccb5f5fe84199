"""AIPerf records (and, when present, the raw export's chunk times) → request rows.

Mapping (see ``aiperf`` for the files):

- arrival = the request start: AIPerf's TTFT is measured from it;
- first token = start + TTFT; ticks = first token + running sum of the inter-chunk gaps,
  each rounded once to ns and summed in integers, so the last tick is start +
  request_latency. When the raw export matches a record chunk for chunk, its chunk wall
  times are the ticks instead;
- completion = ``request_end_ns`` / ``max_response_timestamp`` (the stream end);
  ``output_tokens`` = ``output_sequence_length``, else ``output_token_count``, else usage;
- records with an ``error.code`` other than 499 failed: they end with ``error`` (errored,
  not cancelled) even when ``metadata.was_cancelled`` is set; cancelled ones (499, or
  ``was_cancelled`` without a code) with ``cancellation``; either at
  ``cancellation_time_ns`` / ``request_end_ns``, else at start + the delay stated in the
  error message, else at the start (``terminal_known=False``); a cancelled record whose
  start AIPerf 0.13 stamped at cancellation is moved back by the measured time to cancel.

Every decision the data forced is a warning (:func:`_explain`).
"""

from __future__ import annotations

import polars as pl

from servetrace.sources import response_body as body
from servetrace.sources.aiperf_records import NS_SCHEMA, ROW_SCHEMA
from servetrace.sources.events import Notes, count_phrase
from servetrace.sources.times import cumulative_ticks

# A cancelled record whose stamped start is this much later than its send is mis-stamped.
_LATE_START_NS = 1_000_000


def requests(rows: pl.DataFrame, raw: pl.DataFrame | None, notes: Notes) -> pl.DataFrame:
    """Request rows (``events.REQUEST_COLUMNS`` and more) from the records' ``rows`` and the
    raw export's per-request ``raw`` frame (None without one); warnings go to ``notes``."""
    for name, dtype in {**ROW_SCHEMA, **NS_SCHEMA}.items():
        if name not in rows.columns:
            rows = rows.with_columns(pl.lit(None, dtype=dtype).alias(name))
    if raw is not None:
        duplicate = (
            raw["request_id"].is_duplicated().any() or rows["request_id"].is_duplicated().any()
        )
        if duplicate:
            notes.add("request ids repeat, so the raw export cannot be matched; it was not used")
            raw = None
    if raw is not None:
        # The wall clock minus the perf clock at the start of every completed request is
        # one constant (AIPerf derives wall times from it); its median is robust.
        clock = (
            raw.filter(~pl.col("was_cancelled") & pl.col("error_code").is_null())
            .select((pl.col("start_ns") - pl.col("start_perf_ns")).median().cast(pl.Int64))
            .item()
        )
        rows = rows.join(
            raw.select(
                "request_id",
                "start_perf_ns",
                "ticks_raw",
                "raw_completion_tokens",
                "raw_prompt_tokens",
                *body.COLUMNS,
            ),
            on="request_id",
            how="left",
        ).with_columns(
            est_start_ns=pl.col("start_perf_ns") + pl.lit(clock, dtype=pl.Int64),
        )
        missing = rows.filter(pl.col("start_perf_ns").is_null()).height
        if missing:
            notes.add(
                f"{count_phrase(missing, 'record')} have no match in the raw export; their "
                "ticks come from the per-request metrics"
            )
    else:
        rows = rows.with_columns(
            start_perf_ns=pl.lit(None, dtype=pl.Int64),
            ticks_raw=pl.lit(None, dtype=pl.List(pl.Int64)),
            raw_completion_tokens=pl.lit(None, dtype=pl.Int64),
            raw_prompt_tokens=pl.lit(None, dtype=pl.Int64),
            est_start_ns=pl.lit(None, dtype=pl.Int64),
        ).with_columns(pl.lit(None, dtype=pl.Int64).alias(c) for c in body.COLUMNS)

    failed = pl.col("error_code").is_not_null() | pl.col("was_cancelled")
    errored = pl.col("error_code").is_not_null() & (pl.col("error_code") != 499)
    frame = (
        rows.with_columns(
            # Ticks from the metrics: ms → ns once per value, then integer sums.
            first_m=pl.col("start_ns") + pl.col("ttft_ns"),
            gaps_m=pl.col("icl_ns"),
            d_cancel=pl.coalesce("cancel_ns", "end_ns") - pl.col("start_ns"),
        )
        .with_columns(ticks_m=cumulative_ticks(pl.col("first_m"), pl.col("gaps_m")))
        .with_columns(
            raw_chunks=pl.col("ticks_raw").list.len(),
            metric_chunks=pl.col("ticks_m").list.len(),
        )
        .with_columns(
            use_raw=pl.col("ticks_raw").is_not_null()
            & (pl.col("raw_chunks") > 0)
            & (pl.col("ticks_m").is_null() | (pl.col("raw_chunks") == pl.col("metric_chunks"))),
            raw_disagrees=pl.col("ticks_raw").is_not_null()
            & pl.col("ticks_m").is_not_null()
            & (pl.col("raw_chunks") != pl.col("metric_chunks")),
            # AIPerf 0.13 stamps a cancelled record's start at cancellation: the raw perf
            # clock, or a send that precedes the "start", gives it away.
            late_by_raw=failed & (pl.col("start_ns") - pl.col("est_start_ns") > _LATE_START_NS),
            late_by_trace=failed
            & pl.col("est_start_ns").is_null()
            & (pl.col("send_start_ns") < pl.col("start_ns"))
            & pl.col("d_cancel").is_not_null(),
        )
        .with_columns(
            arrival_ns=pl.when(pl.col("late_by_raw"))
            .then(pl.col("est_start_ns"))
            .when(pl.col("late_by_trace"))
            .then(pl.col("start_ns") - pl.col("d_cancel"))
            .otherwise(pl.col("start_ns")),
            ticks_ns=pl.when(pl.col("use_raw"))
            .then(pl.col("ticks_raw"))
            .otherwise(pl.col("ticks_m")),
        )
        .with_columns(
            last_tick=pl.col("ticks_ns").list.last(),
        )
        .with_columns(
            # The code decides: 499 is the client closing the request, any
            # other code a failure, whatever metadata.was_cancelled says.
            terminal=pl.when(errored)
            .then(pl.lit("error"))
            .when(failed)
            .then(pl.lit("cancellation"))
            .otherwise(pl.lit("completion")),
            terminal_ns=pl.max_horizontal(
                pl.when(failed)
                .then(
                    pl.coalesce(
                        pl.col("arrival_ns") + pl.col("d_cancel"),
                        pl.col("arrival_ns") + pl.col("delay_ns"),
                        pl.col("arrival_ns"),
                    )
                )
                .otherwise(
                    pl.coalesce(
                        "end_ns",
                        pl.col("start_ns") + pl.col("latency_ns"),
                        "last_tick",
                        "start_ns",
                    )
                ),
                pl.col("last_tick"),
            ),
            terminal_known=~failed | pl.col("d_cancel").is_not_null(),
            output_tokens=pl.when(failed)
            .then(None)
            .otherwise(
                pl.coalesce(
                    "osl", "output_token_count", "usage_completion_tokens", "raw_completion_tokens"
                )
            ),
            prompt_tokens=pl.coalesce("prompt_tokens", "raw_prompt_tokens"),
        )
        .with_columns(
            # AIPerf drops the partial output of a cancelled request: without a chunk, its
            # state at cancel (before or after its first token) and its tokens are unknown,
            # unless it was cancelled as it was sent ("after 0.000 seconds").
            partial_output_known=~(
                failed
                & ~errored
                & (pl.col("ticks_ns").list.len().fill_null(0) == 0)
                & (pl.col("terminal_ns") > pl.col("arrival_ns"))
            ),
        )
    )
    _explain(frame, notes)
    said = body.note(frame)
    if said:
        notes.add(said)
    return frame


def _explain(frame: pl.DataFrame, notes: Notes) -> None:
    """Warnings for what the importer had to decide."""
    failed = frame.filter(pl.col("terminal").is_in(["cancellation", "error"]))
    completed = frame.filter(pl.col("terminal") == "completion")
    no_ticks = completed.filter(pl.col("ticks_ns").is_null()).height
    if no_ticks:
        notes.add(
            f"{count_phrase(no_ticks, 'completed record')} carry no TTFT (non-streaming?): "
            "they have a completion but no token ticks"
        )
    disagree = int(frame["raw_disagrees"].sum())
    if disagree:
        notes.add(
            f"{count_phrase(disagree, 'record')}: the raw export's content chunks do not match "
            "inter_chunk_latency in number; their ticks come from the per-request metrics"
        )
    counts = (
        completed.filter(pl.col("ticks_ns").is_not_null() & pl.col("osl").is_not_null())
        .select(
            fewer=(pl.col("ticks_ns").list.len() < pl.col("osl")).sum(),
            more=(pl.col("ticks_ns").list.len() > pl.col("osl")).sum(),
        )
        .row(0)
    )
    if counts[0] or counts[1]:
        notes.add(
            f"{count_phrase(counts[0] + counts[1], 'record')} have a chunk count different from "
            f"output_sequence_length ({counts[0]} with fewer chunks, i.e. multi-token chunks; "
            f"{counts[1]} with more): every tick carries tokens=1 and output_tokens is AIPerf's "
            "count"
        )
    missing_otc = completed.filter(
        pl.col("osl").is_not_null()
        & pl.col("output_token_count").is_null()
        & pl.col("reasoning_tokens").is_not_null()
    ).height
    if missing_otc:
        notes.add(
            f"{count_phrase(missing_otc, 'record')} lack output_token_count (all-reasoning "
            "output); output_tokens uses output_sequence_length, which includes reasoning tokens"
        )
    by_raw = int(frame["late_by_raw"].sum())
    by_trace = int(frame["late_by_trace"].sum())
    if by_raw or by_trace:
        how = (
            "the raw export's perf clock"
            if by_raw
            else "their trace_data send time, which precedes the stamped start"
        )
        notes.add(
            f"{count_phrase(by_raw + by_trace, 'cancelled record')} carry a start time stamped "
            f"at cancellation (an AIPerf 0.13 quirk, detected from {how}); their arrival was "
            "moved back by the measured time to cancel"
        )
    dropped = frame.height - int(frame["partial_output_known"].sum())
    if dropped:
        notes.add(
            f"{count_phrase(dropped, 'cancelled record')} carry no partial output (AIPerf drops "
            "it): whether each was cancelled before or after its first token, and how many "
            "tokens it delivered, is unknown"
        )
    errored = frame.filter(pl.col("terminal") == "error")
    if errored.height:
        codes = errored.group_by("error_code").len().sort("error_code")
        notes.add(
            f"{count_phrase(errored.height, 'record')} failed with an error code other than 499 "
            "("
            + ", ".join(f"{n} × {c}" for c, n in codes.iter_rows())
            + "): each ends with an 'error' (errored, not cancelled); 499 stays a cancellation"
        )
    guessed = failed.filter(~pl.col("terminal_known"))
    from_message = guessed.filter(pl.col("delay_ns").is_not_null()).height
    if from_message:
        notes.add(
            f"{count_phrase(from_message, 'cancelled record')} have no end time; the "
            "cancellation is placed at start + the delay stated in the error message "
            "(terminal_known=False; the delay counts from the end of sending, 1 ms resolution)"
        )
    if guessed.height - from_message:
        notes.add(
            f"{count_phrase(guessed.height - from_message, 'failed record')} have no end time; "
            "their end is placed at their last known time (terminal_known=False)"
        )
    phases = frame.filter(pl.col("phase").is_not_null() & (pl.col("phase") != "profiling"))
    if phases.height:
        notes.add(
            f"{count_phrase(phases.height, 'record')} are not from the profiling phase (see the "
            "'phase' column); AIPerf's own summary leaves them out"
        )
