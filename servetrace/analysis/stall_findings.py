"""What the trace and the engine's steps disagree on (docs/design.md §10): the output
tokens the trace delivers at a step's end against the tokens it decoded, the batch against
the requests the trace has running at its midpoint, and steps that overlap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass(frozen=True)
class Finding:
    """A named inconsistency between the trace and the steps: how many steps, and words."""

    name: str
    steps: int
    words: str


def consistency(
    steps: pl.DataFrame, prepared: pl.DataFrame, ticks: pl.DataFrame, spans: pl.DataFrame
) -> tuple[Finding, ...]:
    """The findings of ``steps`` (``prepared``: `stalls_join.prepare_steps` of them)
    against the trace's ``ticks`` and request ``spans`` (`stalls.tick_gaps`)."""
    found: list[Finding] = []
    # The ticks' replicas are among the requests' (a count of 10^4 rows, not of 10^7).
    ticked = pl.Series(_ticked(prepared, ticks, spans["replica"].n_unique()))
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
            _above_running(prepared, spans),
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


def _parts(prepared: pl.DataFrame) -> list[tuple[str, int, int]]:
    """(replica, first row, end row) of each replica's run in the prepared steps."""
    runs = prepared.group_by("replica", maintain_order=True).agg(pl.len().alias("n"))
    out, start = [], 0
    for replica, count in runs.iter_rows():
        out.append((replica, start, start + count))
        start += count
    return out


def _by_replica(frame: pl.DataFrame, replicas: int) -> dict[str, pl.DataFrame]:
    """``frame`` by its ``replica`` (of at most ``replicas`` values): no split for one."""
    if replicas == 1 or frame.is_empty():
        return {str(frame["replica"][0]) if frame.height else "": frame}
    return {str(k[0]): part for k, part in frame.partition_by("replica", as_dict=True).items()}


def _ticked(prepared: pl.DataFrame, ticks: pl.DataFrame, replicas: int) -> np.ndarray:
    """Per prepared step, the tokens of the token ticks of its replica at its end: each
    tick found among the replica's sorted step ends by one sorted search, and summed
    there (no group-by of the ticks by instant)."""
    out = np.zeros(prepared.height, dtype=np.int64)
    parts = _parts(prepared)
    tokens = _by_replica(ticks.filter(pl.col("is_token")), replicas)
    ends_all = prepared["ts_end"].to_numpy()
    for replica, lo, hi in parts:
        own = tokens.get(replica)
        if own is None or own.is_empty() or hi == lo:
            continue
        ends = ends_all[lo:hi]
        ts = own["ts"].to_numpy()
        at = np.minimum(np.searchsorted(ends, ts, side="left"), hi - lo - 1)
        hit = ends[at] == ts
        sums = np.bincount(at[hit], weights=own["tokens"].to_numpy()[hit], minlength=hi - lo)
        # Steps ending at one instant each carry the instant's ticks (the first's sum).
        out[lo:hi] = sums[np.searchsorted(ends, ends, side="left")].astype(np.int64)
    return out


def _above_running(prepared: pl.DataFrame, spans: pl.DataFrame) -> int:
    """Steps whose batch is larger than the requests the trace has running (admitted,
    else arrived, and not yet ended) at the step's midpoint on its replica."""
    larger = 0
    parts = _parts(prepared)
    runs = _by_replica(spans.drop_nulls(["start_ns", "end_ns"]), spans["replica"].n_unique())
    for replica, lo, hi in parts:
        part = prepared.slice(lo, hi - lo)
        own = runs.get(replica)
        starts = np.sort(own["start_ns"].to_numpy()) if own is not None else np.zeros(0)
        ends = np.sort(own["end_ns"].to_numpy()) if own is not None else np.zeros(0)
        mid = ((part["ts_start"] + part["ts_end"]) // 2).to_numpy()
        running = np.searchsorted(starts, mid, "right") - np.searchsorted(ends, mid, "left")
        batch = part["prefill_requests"].fill_null(0) + part["decode_requests"].fill_null(0)
        larger += int((batch.to_numpy() > running).sum())
    return larger
