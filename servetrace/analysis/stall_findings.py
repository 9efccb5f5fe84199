"""What the trace and the engine's steps disagree on (docs/design.md §10): the output
tokens the trace delivers at a step's end against the tokens it decoded, the batch against
the requests the trace has running at its midpoint, and steps that overlap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import levels_at
from servetrace.analysis.lifecycle_rules import KEY
from servetrace.analysis.stalls_cover import BLOCK, Cover, replica_runs


@dataclass(frozen=True)
class Finding:
    """A named inconsistency between the trace and the steps: how many steps, and words."""

    name: str
    steps: int
    words: str


@dataclass(frozen=True)
class Running:
    """What the trace has running on each replica: the lifecycle's level changes of its
    valid requests (``transitions``, each with its request's ``replica``), read by
    ``concurrency.levels_at`` as every other view reads them, at ``level`` (``running``;
    ``in_system`` for a trace without admissions, which cannot see its queue)."""

    transitions: pl.DataFrame | None  # None: not by request, and several replicas
    level: str
    replicas: int

    @classmethod
    def of(cls, transitions: pl.DataFrame, per_request: pl.DataFrame, admissions: bool) -> Running:
        replica = (
            pl.col("replica").cast(pl.String).fill_null("")
            if "replica" in per_request.columns
            else pl.lit("", pl.String)
        )
        requests = per_request.select(KEY, replica.alias("replica"))
        replicas = requests["replica"].n_unique()
        level = "running" if admissions else "in_system"
        if KEY in transitions.columns:
            return cls(transitions.join(requests, on=KEY, how="inner"), level, replicas)
        # A batched engine keeps the trace's level changes, not each request's: they are
        # one replica's, or cannot be split between replicas.
        if replicas > 1:
            return cls(None, level, replicas)
        only = requests["replica"][0] if requests.height else ""
        return cls(transitions.with_columns(replica=pl.lit(only)), level, replicas)


def consistency(
    steps: pl.DataFrame,
    prepared: pl.DataFrame,
    ticks: pl.DataFrame,
    running: Running,
    gap_tokens: np.ndarray,
) -> tuple[Finding, ...]:
    """The findings of ``steps`` (``prepared``: `stalls_join.prepare_steps` of them)
    against the trace's ``ticks`` (`stalls.tick_gaps`) and what it has ``running``;
    ``gap_tokens``: the tokens of the ticks that end a gap at each prepared step's end,
    as the join found them (`gap_ticks`): only the other ticks are searched here."""
    found: list[Finding] = []
    # A first token counts no output token here: its tick weighs nothing.
    rest = ticks.filter(pl.col("is_token") & ~pl.col("in_gap"))
    # The ticks' replicas are among the requests' (a count of 10^4 rows, not of 10^7).
    ticked = pl.Series(_ticked(prepared, rest, running.replicas, gap_tokens))
    decoded = prepared["decode_tokens"]
    for name, count, words in (
        (
            "ticks_above_decode_tokens",
            int((ticked > decoded).sum()),
            "steps whose end carries more output tokens in the trace than the step decoded",
        ),
        (
            "ticks_below_decode_tokens",
            int((ticked < decoded).sum()),
            "steps that decoded more tokens than the trace delivers at their end",
        ),
        (
            "batch_above_running",
            _above_running(prepared, running),
            "steps whose batch holds more requests than the trace has running then",
        ),
        (
            "overlapping_steps",
            int(prepared["overlaps"].sum()),
            "steps that start before the step before them on their replica ended",
        ),
    ):
        if count:
            found.append(Finding(name, count, words))
    return tuple(found)


def _by_replica(frame: pl.DataFrame, replicas: int) -> dict[str, pl.DataFrame]:
    """``frame`` by its ``replica`` (of at most ``replicas`` values): no split for one."""
    if replicas == 1 or frame.is_empty():
        return {str(frame["replica"][0]) if frame.height else "": frame}
    return {str(k[0]): part for k, part in frame.partition_by("replica", as_dict=True).items()}


def gap_ticks(out: np.ndarray, where: Cover, gaps: pl.DataFrame, ends: np.ndarray) -> None:
    """Add to ``out`` (per prepared step, of ``ends``) the tokens of the ticks that end
    ``gaps`` at a step's end, at the last step ending then: read off the join's own search
    (`Cover`), since the gaps' ticks are most of the trace's."""
    at = np.flatnonzero(where.ending_at(ends, gaps["gap_end_ns"].to_numpy()))
    if at.shape[0]:
        tokens = gaps["tokens"].fill_null(0).to_numpy()
        np.add.at(out, where.hi[at] - 1, tokens[at])


def _ticked(
    prepared: pl.DataFrame, ticks: pl.DataFrame, replicas: int, gap_tokens: np.ndarray
) -> np.ndarray:
    """Per prepared step, the tokens of the token ticks of its replica at its end: those
    of the gaps' ticks (``gap_tokens``, at the last step ending then) and of ``ticks``,
    each found among the replica's sorted step ends by one sorted search and summed there
    (no group-by of the ticks by instant), a block of ticks at a time."""
    out = gap_tokens.copy()
    ends_all = prepared["ts_end"].to_numpy()
    parts = replica_runs(prepared)
    for first in range(0, ticks.height, BLOCK):
        block = ticks.slice(first, BLOCK)
        tokens = _by_replica(block.select("replica", "ts", "tokens"), replicas)
        for replica, lo, hi in parts:
            own = tokens.get(replica)
            if own is None or own.is_empty() or hi == lo:
                continue
            ends = ends_all[lo:hi]
            ts = own["ts"].to_numpy()
            at = np.maximum(np.searchsorted(ends, ts, side="right") - 1, 0)
            hit = ends[at] == ts
            weights = own["tokens"].to_numpy()[hit]
            out[lo:hi] += np.bincount(at[hit], weights=weights, minlength=hi - lo).astype(np.int64)
    # Steps ending at one instant each carry the instant's ticks (the last's sum).
    for _, lo, hi in parts:
        ends = ends_all[lo:hi]
        out[lo:hi] = out[lo:hi][np.searchsorted(ends, ends, side="right") - 1]
    return out


def _above_running(prepared: pl.DataFrame, running: Running) -> int:
    """Steps whose batch is larger than the requests the trace has running on the step's
    replica at its midpoint (after every transition at or before it)."""
    if running.transitions is None:
        return 0
    larger = 0
    moves = _by_replica(running.transitions, running.replicas)
    for replica, lo, hi in replica_runs(prepared):
        part = prepared.slice(lo, hi - lo)
        mid = ((part["ts_start"] + part["ts_end"]) // 2).to_numpy()
        own = moves.get(replica)
        level = (
            levels_at(own, mid)[running.level]
            if own is not None
            else np.zeros(mid.shape[0], dtype=np.int64)
        )
        batch = part["prefill_requests"].fill_null(0) + part["decode_requests"].fill_null(0)
        larger += int((batch.to_numpy() > level).sum())
    return larger
