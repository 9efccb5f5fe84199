"""What the default views of the stall join read (docs/design.md §10), made a block of
gaps at a time: the shares of the excess by cause overall and in the tail, the unjoined
gaps by reason, the tail stalls per request and the candidates for the worst stalls.

No frame of every gap is kept: at 10^7 gaps one column is 80 MB of fresh memory, whose
first touch on a shared machine costs more than the arithmetic, while a block's frames
are reused from one block to the next. Every figure is a sum (or a maximum) over the
blocks, so it is that of the whole frame exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.analysis.stall_findings import gap_ticks
from servetrace.analysis.stalls_attribution import (
    COMPONENT,
    Baseline,
    excess_by_cause,
    share_sums,
)
from servetrace.analysis.stalls_cover import BLOCK, cover
from servetrace.analysis.stalls_join import Membership, cumulate, join_core

# What a candidate for the worst stalls keeps of its gap.
CANDIDATE = ("_rk", "replica", "gap_start_ns", "gap_end_ns", "unjoined", "excess_ns")


@dataclass(frozen=True)
class StallSums:
    """The sums the default views read, over every gap."""

    gaps: int
    joined: int
    unjoined: dict[str, int]  # gaps by reason, most first
    overall: dict[str, int]  # `share_sums` of every gap
    tail: dict[str, int]  # `share_sums` of the tail's gaps
    tail_gaps: int
    tail_with_prefill: int  # tail gaps whose covering steps carry prefill work
    per_request: pl.DataFrame  # ``_rk, tail_stalls, excess_ns`` of requests with any
    candidates: pl.DataFrame  # the gaps of largest excess (`CANDIDATE`, the components)
    kept: int  # how many worst stalls the candidates hold, ties included
    gap_tokens: np.ndarray  # per prepared step, `stall_findings.gap_ticks`


def in_tail(threshold_ns: int | None) -> pl.Expr:
    """Joined gaps at or above ``threshold_ns`` (none without one)."""
    if threshold_ns is None:
        return pl.lit(False)
    gap = pl.col("gap_end_ns") - pl.col("gap_start_ns")
    return pl.col("unjoined").is_null() & (gap >= threshold_ns)


def largest(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """The rows of ``frame`` whose excess is among its ``n`` largest, every row tied with
    the smallest of them too: what any ordering's first ``n`` are taken from."""
    excess = frame["excess_ns"]
    known = excess.drop_nulls()
    if n <= 0:
        return frame.clear()
    if known.len() <= n:
        return frame.filter(pl.col("excess_ns").is_not_null())
    return frame.filter(pl.col("excess_ns") >= known.top_k(n).min())


def summarize_gaps(
    gaps: pl.DataFrame,
    steps: pl.DataFrame,
    prepared: pl.DataFrame,
    placed: Membership | None,
    fit: Baseline,
    *,
    tail_threshold_ns: int | None,
    requests: int,
    keep: int,
) -> StallSums:
    """`StallSums` of ``gaps`` (`stalls_gaps.tick_gaps`, with ``preempted``) joined to
    ``steps`` (``prepared``: `stalls_join.prepare_steps` of them; ``placed``: the
    membership of the gaps) and attributed; ``requests``: how many request keys there are;
    ``keep``: how many worst stalls the candidates are kept for."""
    tail = in_tail(tail_threshold_ns)
    parts = [*COMPONENT.values()]
    overall: dict[str, int] = {}
    in_the_tail: dict[str, int] = {}
    unjoined: dict[str, int] = {}
    joined = tail_gaps = tail_with_prefill = 0
    per_count = np.zeros(requests, dtype=np.int64)
    per_excess = np.zeros(requests, dtype=np.int64)
    candidates = []
    cumulated = cumulate(prepared)
    step_ends = prepared["ts_end"].to_numpy()
    gap_tokens = np.zeros(prepared.height, dtype=np.int64)
    for first in range(0, max(gaps.height, 1), BLOCK):
        block = gaps.slice(first, BLOCK)
        own = None if placed is None else tuple(x[first : first + BLOCK] for x in placed)
        where = cover(block, prepared)
        gap_ticks(gap_tokens, where, block, step_ends)  # the findings' ticks, searched once
        covered = join_core(block, steps, own, prepared, cumulated, where)  # type: ignore[arg-type]
        frame = excess_by_cause(covered, fit)
        for total, sums in zip((overall, in_the_tail), share_sums(frame, None, tail), strict=True):
            for name, value in sums.items():
                total[name] = total.get(name, 0) + value
        reasons = frame["unjoined"]
        joined += reasons.null_count()
        for reason, count in reasons.drop_nulls().value_counts().iter_rows():
            unjoined[reason] = unjoined.get(reason, 0) + int(count)
        # Lazy, so that only the columns read are filtered (the tail is a few rows).
        ends = (
            frame.lazy()
            .filter(tail)
            .select(
                "_rk",
                pl.col("excess_ns").fill_null(0),
                pl.col("steps_with_prefill").fill_null(0) > 0,
            )
            .collect()
        )
        tail_gaps += ends.height
        tail_with_prefill += int(ends["steps_with_prefill"].sum())
        rk = ends["_rk"].to_numpy()
        np.add.at(per_count, rk, 1)
        np.add.at(per_excess, rk, ends["excess_ns"].to_numpy())
        candidates.append(largest(frame.select(*CANDIDATE, *parts), keep))
    with_any = np.flatnonzero(per_count)
    per_request = pl.DataFrame(
        {
            "_rk": with_any,
            "tail_stalls": per_count[with_any].astype(np.uint32),
            "excess_ns": per_excess[with_any],
        },
        schema={"_rk": pl.Int64, "tail_stalls": pl.UInt32, "excess_ns": pl.Int64},
    )
    return StallSums(
        gaps=gaps.height,
        joined=joined,
        unjoined=dict(sorted(unjoined.items(), key=lambda item: (-item[1], item[0]))),
        overall=overall,
        tail=in_the_tail,
        tail_gaps=tail_gaps,
        tail_with_prefill=tail_with_prefill,
        per_request=per_request,
        candidates=largest(pl.concat(candidates), keep),
        kept=keep,
        gap_tokens=gap_tokens,
    )
