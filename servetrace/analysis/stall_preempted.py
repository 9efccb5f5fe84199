"""Which inter-token gaps saw their request preempted (docs/design.md §10).

A request preempted between two of its ticks sat out the steps after it for want of room,
not because a prefill-first engine paused it for other requests' prompts: the attribution
counts no ``paused_for_prefill`` time in such a gap. The preemptions are the lifecycle's
own (a running → queued transition) where the engine keeps them by request.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from servetrace.analysis.lifecycle_rules import KEY


def preemptions(
    transitions: pl.DataFrame, per_request: pl.DataFrame, events: Callable[[], pl.LazyFrame]
) -> pl.DataFrame:
    """Every preemption of a valid request: ``_rk`` (its row in ``per_request``) and
    ``ts``. From the lifecycle's transitions where they are kept by request; else (a
    batched engine keeps only the trace's level changes) from the ``events``, read only
    when some request was preempted."""
    rk = pl.int_range(pl.len(), dtype=pl.Int64).alias("_rk")
    if KEY in transitions.columns:
        moves = transitions.filter((pl.col("d_running") < 0) & (pl.col("d_queued") > 0))
        return moves.join(per_request.select(KEY, rk), on=KEY).select("_rk", "ts")
    if not (per_request["preemptions"].fill_null(0) > 0).any():
        return pl.DataFrame(schema={"_rk": pl.Int64, "ts": pl.Int64})
    found = (
        events()
        .filter(pl.col("event") == "preemption")
        .select(pl.col("request_id").cast(per_request.schema["request_id"]), "ts")
        .collect()
    )
    return found.join(per_request.select("request_id", rk), on="request_id").select("_rk", "ts")


def preempted_gaps(gaps: pl.DataFrame, preempted: pl.DataFrame) -> pl.Series:
    """Per gap of ``gaps`` (``_rk``; each request's gaps in time order), whether its
    request was ``preempted`` (`preemptions`) at an instant ``t`` with
    ``gap_start ≤ t < gap_end`` (a preemption at a tick's instant follows that tick)."""
    if preempted.is_empty() or gaps.is_empty():
        return pl.repeat(False, gaps.height, eager=True).alias("preempted")
    at = preempted.sort("ts")
    # Only the gaps of preempted requests are searched: few rows, each request's in time
    # order, which is all an as-of join by request needs.
    numbered = gaps.select("_rk", "gap_start_ns", "gap_end_ns").with_row_index("_g")
    theirs = numbered.filter(pl.col("_rk").is_in(at["_rk"].unique().implode()))
    found = at.join_asof(
        theirs,
        left_on="ts",
        right_on="gap_end_ns",
        by="_rk",
        strategy="forward",
        allow_exact_matches=False,
        check_sortedness=False,
    ).filter(pl.col("gap_start_ns") <= pl.col("ts"))
    hit = found["_g"].unique()
    return numbered.select(pl.col("_g").is_in(hit.implode()).alias("preempted")).to_series()
