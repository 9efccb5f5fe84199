"""Placing steps whose clock is coarse on the trace's clock, by their durations.

A log prefix dates a step to the second (and names no year or time zone); the step's
duration is logged to 10 µs. Every token a step produces is emitted at its end, so on a
trace the true step ends are token-tick instants. Within a *run* (a replica's steps in
consecutive seconds, which the engine ran back to back) the k-th step ends at
``offset + cumulative duration + k × gap``, the gap being the engine's time between
steps (scheduling, output handling), which vLLM's elapsed time does not count. Each
step votes for the offsets ``tick − cumulative − k × gap`` of the ticks inside its
second; a run takes the gap and offset its first ``ESTIMATE_STEPS`` steps agree on most
(within ``BIN_NS`` either side); then, chunk after chunk of ``CHUNK`` steps, each chunk
takes the offset its steps agree on within ``DRIFT_NS`` of the previous chunk's (the gap
varies from step to step and the durations are rounded to 10 µs, so the drift wanders),
and each step end moves to the nearest tick within ``SNAP_NS``. How far the durations
placed a step from the tick it moved to is the measured alignment
error. A step that drifted more than ``SNAP_NS`` keeps its placed end. A step known to
emit nothing (a dummy pass) neither votes nor moves; a prefill chunk that completes no
prompt emits nothing either but is not known to, so it votes and may move to a tick of
another step. Steps of equal durations
in one second cannot be told apart by durations: only the second boundaries a chunk
spans pin them, so such a chunk may land whole steps off (its error then looks small).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.units import NS_PER_S

# A log prefix's resolution: the step ended somewhere in [second, second + 1 s).
WINDOW_NS = NS_PER_S
# Offsets within a bin either side of each other count as one vote.
BIN_NS = 100_000
# Consecutive steps of a run that share one offset (the drift between steps accumulates).
CHUNK = 8
# The gap between steps is estimated per run, on its first steps, from this grid.
MAX_GAP_NS = 1_000_000
GAP_STEP_NS = 10_000
ESTIMATE_STEPS = 16
# How far a chunk's offset may drift from its run's.
DRIFT_NS = 2_000_000
# The farthest a placed step end moves to land on a tick.
SNAP_NS = 1_000_000
# A run needs this many agreeing steps before its offset is believed.
MIN_VOTES = 2
# Time-zone shifts tried between a log's local time and the trace's UTC clock.
_ZONE_STEP_NS = 15 * 60 * NS_PER_S
_ZONE_STEPS = 14 * 4
# Ticks before this are not wall-clock epoch times (a trace on a relative clock).
_EPOCH_FLOOR_NS = 100_000_000 * NS_PER_S


@dataclass(frozen=True)
class Alignment:
    """What the alignment did: counts of steps and the error it measured."""

    total: int
    snapped: int
    error_ns: int | None


def tick_year(ticks: pl.Series) -> int | None:
    """The UTC year of the first tick, when the ticks are wall-clock epoch times."""
    first = ticks.min()
    if not isinstance(first, int) or first < _EPOCH_FLOOR_NS:
        return None
    return int(pl.Series([first]).cast(pl.Datetime("ns")).dt.year()[0])


def zone_shift(anchors: pl.Series, ticks: pl.Series) -> int | None:
    """The whole-quarter-hour shift of ``anchors`` (log seconds) that puts the most of them
    over a tick (ties: the smallest shift), or None when no shift puts any there."""
    seconds = anchors.unique().to_numpy()
    values = ticks.to_numpy()
    shifts = np.arange(-_ZONE_STEPS, _ZONE_STEPS + 1, dtype=np.int64) * _ZONE_STEP_NS
    starts = seconds[None, :] + shifts[:, None]
    covered = np.searchsorted(values, starts + WINDOW_NS) > np.searchsorted(values, starts)
    hits = covered.sum(axis=1)
    order = np.argsort(np.abs(shifts), kind="stable")
    best = order[np.argmax(hits[order])]
    return int(shifts[best]) if hits[best] else None


def _estimate_runs(emitting: pl.DataFrame, ticks: pl.Series) -> pl.DataFrame:
    """Per run, the gap between steps and the offset its first steps agree on most.

    Each tick in the second of the run's first emitting step is a hypothesis for where
    that step ended; each of the next ``ESTIMATE_STEPS`` steps then lands on a tick only
    if it lies within ``[0, MAX_GAP_NS]`` per step later than the durations alone put it,
    and every such tick votes for the gap it implies. The hypothesis and gap with the
    most votes win (ties: the smaller gap, then the earlier tick).
    """
    first = emitting.filter(pl.col("k") == pl.col("k").min().over("replica", "run"))
    hypotheses = _each_tick(first, ticks, "replica", "run", "k", "cum").select(
        "replica",
        "run",
        k0="k",
        offset=pl.col("tick") - pl.col("cum"),
        hypothesis=pl.int_range(pl.len(), dtype=pl.Int64()),
    )
    later = emitting.join(hypotheses.select("replica", "run", "k0").unique(), on=["replica", "run"])
    later = later.filter(
        (pl.col("k") > pl.col("k0")) & (pl.col("k") <= pl.col("k0") + ESTIMATE_STEPS)
    ).select("replica", "run", "k", "cum", "lo", "hi")
    pairs = hypotheses.join(later, on=["replica", "run"]).with_columns(
        base=pl.col("offset") + pl.col("cum"), steps=pl.col("k") - pl.col("k0")
    )
    pairs = pairs.with_columns(
        lo=pl.max_horizontal("lo", ticks.search_sorted(pairs["base"], "left")),
        hi=pl.min_horizontal(
            "hi", ticks.search_sorted(pairs["base"] + pairs["steps"] * MAX_GAP_NS, "right")
        ),
    )
    votes = _each_tick(
        pairs, ticks, "replica", "run", "hypothesis", "offset", "k0", "base", "steps"
    ).with_columns(gap=(pl.col("tick") - pl.col("base")) // pl.col("steps"))
    votes = votes.with_columns(bin=pl.col("gap") // GAP_STEP_NS)
    counts = votes.group_by("replica", "run", "hypothesis", "bin").agg(n=pl.len())
    scored = (
        pl.concat([counts.with_columns(bin=pl.col("bin") + step) for step in (-1, 0, 1)])
        .group_by("replica", "run", "hypothesis", "bin")
        .agg(votes=pl.col("n").sum())
        .filter(pl.col("votes") >= MIN_VOTES - 1)
    )
    best = scored.sort(
        ["replica", "run", "votes", "bin", "hypothesis"],
        descending=[False, False, True, False, False],
    ).unique(["replica", "run"], keep="first", maintain_order=True)
    chosen = (
        votes.join(
            best.select("replica", "run", "hypothesis", center="bin"),
            on=["replica", "run", "hypothesis"],
        )
        .filter((pl.col("bin") - pl.col("center")).abs() <= 1)
        .group_by("replica", "run")
        .agg(
            gap=pl.col("gap").median().round().cast(pl.Int64()),
            offset=pl.col("offset").first(),
            k0=pl.col("k0").first(),
        )
    )
    # The model is offset + cum + k × gap, k counted from the run's start.
    return chosen.select(
        "replica", "run", "gap", run_offset=pl.col("offset") - pl.col("k0") * pl.col("gap")
    )


def _track(emitting: pl.DataFrame, ticks: np.ndarray) -> pl.DataFrame:
    """Each chunk's offset, chunk after chunk (a sequence over chunks, not over steps:
    NumPy on each chunk's few candidates, all runs at once)."""
    emitting = emitting.with_columns(
        key=(pl.struct("replica", "run").rank("dense") - 1).cast(pl.Int64())
    ).sort("chunk", "key", "k")
    cols = {
        name: emitting[name].to_numpy().astype(np.int64)
        for name in ("key", "chunk", "k", "cum", "lo", "hi", "gap")
    }
    keys = emitting.select("key", "run_offset").unique("key").sort("key")
    offset = keys["run_offset"].to_numpy().astype(np.int64).copy()
    # Each step's chunk offset, set once its chunk has voted.
    chunk_offset = np.zeros(emitting.height, dtype=np.int64)
    edges = np.flatnonzero(np.diff(cols["chunk"])) + 1
    for start, stop in zip(
        np.concatenate([[0], edges]), np.concatenate([edges, [len(cols["chunk"])]]), strict=True
    ):
        part = {name: values[start:stop] for name, values in cols.items()}
        model = offset[part["key"]] + part["cum"] + part["k"] * part["gap"]
        lo = np.maximum(part["lo"], np.searchsorted(ticks, model - DRIFT_NS, "left"))
        hi = np.minimum(part["hi"], np.searchsorted(ticks, model + DRIFT_NS, "right"))
        counts = np.clip(hi - lo, 0, None)
        if counts.sum():
            row = np.repeat(np.arange(len(model)), counts)
            first = np.repeat(np.cumsum(counts) - counts, counts)
            at = lo[row] + np.arange(len(row)) - first
            votes_key = part["key"][row]
            voted = ticks[at] - part["cum"][row] - part["k"][row] * part["gap"][row]
            bins = voted // BIN_NS
            span = int(bins.max() - bins.min()) + 3
            code = votes_key * span + (bins - bins.min() + 1)
            unique, count = np.unique(code, return_counts=True)
            score = count.copy()
            for step in (-1, 1):
                where = np.searchsorted(unique, unique + step)
                hit = (where < len(unique)) & (
                    unique[np.minimum(where, len(unique) - 1)] == unique + step
                )
                score[hit] += count[where[hit]]
            owner = unique // span
            # Most votes first, then the earliest bin, per key.
            order = np.lexsort((unique, -score, owner))
            winners = order[np.unique(owner[order], return_index=True)[1]]
            for winner in winners[score[winners] >= MIN_VOTES]:
                key = owner[winner]
                center = unique[winner]
                mask = (votes_key == key) & (np.abs(code - center) <= 1)
                offset[key] = int(np.round(np.median(voted[mask])))
        chunk_offset[start:stop] = offset[part["key"]]
    found = emitting.select("replica", "run", "chunk", chunk_offset=pl.Series(chunk_offset))
    return found.unique(["replica", "run", "chunk"])


def _each_tick(frame: pl.DataFrame, ticks: pl.Series, *columns: str) -> pl.DataFrame:
    """One row per row of ``frame`` and tick in its ``[lo, hi)`` range: ``columns`` and
    the ``tick``."""
    exploded = (
        frame.select(
            *columns, at=pl.int_ranges("lo", pl.max_horizontal("lo", "hi"), dtype=pl.Int64())
        )
        .explode("at")
        .drop_nulls("at")
    )
    return exploded.with_columns(tick=ticks.gather(exploded["at"])).drop("at")


def align_to_ticks(steps: pl.DataFrame, ticks: pl.Series) -> tuple[pl.Series, Alignment]:
    """Each step's end on the trace's clock (null where it could not be aligned).

    ``steps`` has ``replica`` (String), ``anchor`` (Int64 ns: the start of the second the
    step was logged in, already on the trace's clock), ``duration`` (Int64 ns) and
    ``emits`` (False for a step known to emit no token, which neither votes nor moves to
    a tick), in the engine's order; ``ticks`` are the trace's sorted unique token-tick
    instants.
    """
    ticks = ticks.cast(pl.Int64())
    frame = steps.select("replica", "anchor", "duration", "emits").with_row_index("idx")
    jump = pl.col("anchor").diff().fill_null(0).over("replica")
    frame = frame.with_columns(run=(jump > WINDOW_NS).cast(pl.Int64()).cum_sum().over("replica"))
    frame = frame.with_columns(
        k=pl.int_range(pl.len(), dtype=pl.Int64()).over("replica", "run"),
        cum=pl.col("duration").fill_null(0).cum_sum().over("replica", "run"),
        lo=ticks.search_sorted(frame["anchor"], side="left"),
        hi=ticks.search_sorted(frame["anchor"] + WINDOW_NS, side="left"),
    ).with_columns(chunk=pl.col("k") // CHUNK)
    runs = _estimate_runs(frame.filter("emits"), ticks)
    # 2. Chunk by chunk, each its own offset within DRIFT_NS of the previous chunk's: the
    # gaps vary, so the drift does too, and a chunk follows it from where the last one
    # ended. Only the ticks near where that puts a step vote, a few per step.
    emitting = frame.filter("emits").join(runs, on=["replica", "run"])
    chunks = _track(emitting, ticks.to_numpy())
    placed = (
        frame.join(runs, on=["replica", "run"], how="left")
        .join(chunks, on=["replica", "run", "chunk"], how="left")
        .with_columns(
            placed=pl.coalesce("chunk_offset", "run_offset")
            + pl.col("cum")
            + pl.col("k") * pl.col("gap")
        )
        .sort("placed", nulls_last=True)
    )
    nearest = placed.filter(pl.col("placed").is_not_null()).join_asof(
        pl.DataFrame({"tick": ticks}), left_on="placed", right_on="tick", strategy="nearest"
    )
    nearest = nearest.with_columns(moved=pl.col("tick") - pl.col("placed")).with_columns(
        snapped=(pl.col("moved").abs() <= SNAP_NS) & pl.col("emits")
    )
    ends = (
        frame.select("idx")
        .join(nearest.select("idx", "placed", "tick", "moved", "snapped"), on="idx", how="left")
        .sort("idx")
    )
    ts_end = ends.select(
        pl.when(pl.col("snapped")).then(pl.col("tick")).otherwise(pl.col("placed"))
    ).to_series()
    snapped = ends.filter(pl.col("snapped"))
    error = snapped["moved"].abs().max() if snapped.height else None
    alignment = Alignment(
        total=frame.height,
        snapped=snapped.height,
        error_ns=int(error) if isinstance(error, int) else None,
    )
    return ts_end.alias("ts_end"), alignment


def describe(alignment: Alignment, shift_ns: int, what: str) -> str:
    """The note a user reads about an alignment of ``what`` (e.g. "vLLM log steps") whose
    log clock was shifted by ``shift_ns`` (its time zone) first."""
    shift = ""
    if shift_ns:
        hours = shift_ns / (3600 * NS_PER_S)
        shift = f" after shifting the log's clock by {hours:+g} h (its time zone)"
    error = (
        f"; the logged durations placed them within {alignment.error_ns / 1000:g} µs of those"
        " ticks (the measured alignment error)"
        if alignment.error_ns is not None
        else ""
    )
    rest = alignment.total - alignment.snapped
    unmatched = (
        f"; {rest} kept the time their durations give or, with no run to place them in,"
        " their log second"
        if rest
        else ""
    )
    return (
        f"{what}: {alignment.snapped} of {alignment.total} step ends aligned to token ticks"
        f" of the trace{shift}, by their durations within runs of consecutive seconds"
        f"{error}{unmatched}"
    )
