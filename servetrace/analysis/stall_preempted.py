"""Which inter-token gaps saw their request preempted (docs/design.md §10).

A request preempted between two of its ticks sat out the steps after it for want of room,
not because a prefill-first engine paused it for other requests' prompts: the attribution
counts no ``paused_for_prefill`` time in such a gap. The preemptions are the lifecycle's
own (a running → queued transition), so every view agrees on them.
"""

from __future__ import annotations

import polars as pl

from servetrace.analysis.lifecycle_rules import KEY


def preempted_gaps(
    gaps: pl.DataFrame, transitions: pl.DataFrame, per_request: pl.DataFrame
) -> pl.Series:
    """Per gap of ``gaps`` (``_rk``: the request's row in ``per_request``; each request's
    gaps in time order), whether its request was preempted at an instant ``t`` with
    ``gap_start ≤ t < gap_end`` (a preemption at a tick's instant follows that tick)."""
    moves = transitions.filter((pl.col("d_running") < 0) & (pl.col("d_queued") > 0))
    if moves.is_empty() or gaps.is_empty():
        return pl.repeat(False, gaps.height, eager=True).alias("preempted")
    rows = per_request.select(KEY, pl.int_range(pl.len(), dtype=pl.Int64).alias("_rk"))
    at = moves.join(rows, on=KEY).select("_rk", "ts").sort("ts")
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
