"""What the trace and the engine's steps disagree on (docs/design.md §10): the output
tokens the trace delivers at a step's end against the tokens it decoded, the batch against
the requests the trace has running at its midpoint, and steps that overlap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import levels_at
from servetrace.analysis.lifecycle_rules import KEY
from servetrace.analysis.stalls_cover import BLOCK, replica_runs


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
    steps: pl.DataFrame, prepared: pl.DataFrame, ticks: pl.DataFrame, running: Running
) -> tuple[Finding, ...]:
    """The findings of ``steps`` (``prepared``: `stalls_join.prepare_steps` of them)
    against the trace's ``ticks`` (`stalls.tick_gaps`) and what it has ``running``."""
    found: list[Finding] = []
    # The ticks' replicas are among the requests' (a count of 10^4 rows, not of 10^7).
    ticked = pl.Series(_ticked(prepared, ticks, running.replicas))
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


def _ticked(prepared: pl.DataFrame, ticks: pl.DataFrame, replicas: int) -> np.ndarray:
    """Per prepared step, the tokens of the token ticks of its replica at its end: each
    tick found among the replica's sorted step ends by one sorted search, and summed
    there (no group-by of the ticks by instant), a block of ticks at a time (10^7 ticks'
    arrays would be fresh memory, costlier to touch than to search)."""
    out = np.zeros(prepared.height, dtype=np.int64)
    ends_all = prepared["ts_end"].to_numpy()
    parts = replica_runs(prepared)
    for first in range(0, ticks.height, BLOCK):
        block = ticks.slice(first, BLOCK)
        # A first token counts no output token here: its tick weighs nothing.
        weighed = block.select(
            "replica", "ts", tokens=pl.when("is_token").then(pl.col("tokens")).otherwise(0)
        )
        tokens = _by_replica(weighed, replicas)
        for replica, lo, hi in parts:
            own = tokens.get(replica)
            if own is None or own.is_empty() or hi == lo:
                continue
            ends = ends_all[lo:hi]
            ts = own["ts"].to_numpy()
            at = np.minimum(np.searchsorted(ends, ts, side="left"), hi - lo - 1)
            hit = ends[at] == ts
            weights = own["tokens"].to_numpy()[hit]
            out[lo:hi] += np.bincount(at[hit], weights=weights, minlength=hi - lo).astype(np.int64)
    # Steps ending at one instant each carry the instant's ticks (the first's sum).
    for _, lo, hi in parts:
        ends = ends_all[lo:hi]
        out[lo:hi] = out[lo:hi][np.searchsorted(ends, ends, side="left")]
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
