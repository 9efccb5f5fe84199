"""The inter-token gaps the stall join reads, and the steps' membership keyed as they are
(docs/design.md §10).

`tick_gaps` turns the lifecycle's sorted ticks into the gaps of the ITL metric (completed
requests, consecutive output ticks), every request by an integer key ``_rk``: its row in
the per-request frame. `members` gives each (request, step) pair of the steps'
membership the same key.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle_rules import KEY
from servetrace.analysis.stalls_cover import BLOCK


def tick_gaps(
    ticks: pl.DataFrame, per_request: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(gaps, ticks, codes) of the trace, every request by an integer key ``_rk``
    (its row in ``codes``: ``_rk, request_id, replica, _pos``, ``_pos`` its row in
    ``per_request``), from the lifecycle's ``ticks`` (``Timeline.ticks``: each request's
    in one run in time order, with ``gap_ns``; keyed as ``per_request``):

    - gaps: the ITL gaps of completed requests (``_rk``, ``replica``, ``gap_start_ns``,
      ``gap_end_ns``, ``tokens`` of the later tick), each request's in one run in time
      order, the runs in the order of ``ticks``, which is that of ``_rk`` (`by_code`
      puts them in ``per_request``'s order);
    - ticks: every output tick of a valid request (``replica, ts, tokens, is_token``,
      ``in_gap``: whether it ends a gap).
    """
    replica = (
        pl.col("replica").cast(pl.String).fill_null("")
        if "replica" in per_request.columns
        else pl.lit("", pl.String)
    )
    done = (pl.col("outcome") == "completed") & pl.col("itl_mean_ns").is_not_null()
    requests = per_request.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_pos"),
        KEY,
        "request_id",
        replica.alias("replica"),
        done.alias("_done"),
    )
    # Each request's ticks are one run: its key, row and flags are looked up once per
    # run (10^4 rows, not 10^7) and repeated over the run, with no join of the ticks.
    keys = ticks[KEY].to_numpy()
    starts = (
        np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        if keys.size
        else np.zeros(0, dtype=np.int64)
    )
    lengths = np.diff(np.append(starts, keys.shape[0]))
    runs = pl.DataFrame({KEY: keys[starts]}, schema={KEY: ticks.schema[KEY]}).join(
        requests, on=KEY, how="left", maintain_order="left"
    )
    # The requests numbered in the order their ticks come (then those without ticks), so
    # that the gaps' keys increase down the gaps and the membership needs no sort.
    ticked = runs["_pos"].drop_nulls().unique(maintain_order=True)
    order = pl.concat([ticked, requests["_pos"].filter(~requests["_pos"].is_in(ticked.implode()))])
    codes = requests[order].with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("_rk"))
    code_of = np.empty(requests.height, dtype=np.int64)
    code_of[order.to_numpy()] = np.arange(requests.height)
    run_pos = runs["_pos"].to_numpy(allow_copy=True)
    valid_run = runs["_pos"].is_not_null().to_numpy()
    run_rk = np.where(valid_run, code_of[np.where(valid_run, run_pos, 0).astype(np.int64)], -1)
    in_gap = np.repeat(runs["_done"].fill_null(False).to_numpy(), lengths)
    in_gap &= ticks["gap_ns"].is_not_null().to_numpy()
    one = codes["replica"].n_unique() <= 1
    only = codes["replica"][0] if codes.height else ""
    run_replica = pl.Series(runs["replica"])
    # Each run's key repeated over its gaps, not over all its ticks first.
    per_run = np.add.reduceat(in_gap, starts) if starts.shape[0] else starts
    gaps = (
        ticks.select("ts", "tokens", "gap_ns")
        .filter(pl.Series(in_gap))
        .select(
            pl.Series("_rk", np.repeat(run_rk, per_run)),
            pl.lit(only, pl.String).alias("replica")
            if one
            else run_replica.gather(np.repeat(np.arange(runs.height), per_run)),
            (pl.col("ts") - pl.col("gap_ns")).alias("gap_start_ns"),
            pl.col("ts").alias("gap_end_ns"),
            "tokens",
        )
    )
    kept = ticks.with_columns(in_gap=pl.Series(in_gap))
    if not bool(valid_run.all()):
        kept = kept.filter(pl.Series(np.repeat(valid_run, lengths)))
    out = kept.select(
        pl.lit(only, pl.String).alias("replica")
        if one
        else run_replica.filter(pl.Series(valid_run)).gather(
            np.repeat(np.arange(int(valid_run.sum())), lengths[valid_run])
        ),
        "ts",
        "tokens",
        (~pl.col("is_first")).alias("is_token"),
        "in_gap",
    )
    return gaps, out, codes.select("_rk", "request_id", "replica", "_pos")


def ticks_of(events: pl.LazyFrame, per_request: pl.DataFrame) -> pl.DataFrame:
    """The lifecycle's sorted ticks of ``events`` keyed as ``per_request`` (whose keys
    another call made, perhaps renumbered: matched by request id)."""
    from servetrace.analysis.lifecycle import PLACEABLE, sorted_ticks, with_request_key

    names = events.collect_schema().names()
    wanted = ["request_id", "event", "ts", *(["tokens"] if "tokens" in names else [])]
    keyed = with_request_key(events.select(wanted).filter(PLACEABLE).collect())
    ticks = sorted_ticks(keyed)
    ids = keyed.group_by(KEY).agg(pl.col("request_id").first())
    dtype = per_request.schema["request_id"]
    own = ids.with_columns(pl.col("request_id").cast(dtype)).join(
        per_request.select("request_id", pl.col(KEY).alias("_own")), on="request_id"
    )
    return (
        ticks.join(own.select(KEY, "_own"), on=KEY, how="inner", maintain_order="left")
        .drop(KEY)
        .rename({"_own": KEY})
    )


def by_code(gaps: pl.DataFrame, position: np.ndarray) -> pl.DataFrame:
    """``gaps`` (each request's in one run, in time order) with the runs in the order of
    their requests' ``position`` (by ``_rk``: the per-request frame's row, which the
    per-gap file keeps): one gather of whole runs, no sort of the gaps."""
    rk = position[gaps["_rk"].to_numpy()]
    if rk.shape[0] < 2 or bool(np.all(rk[1:] >= rk[:-1])):
        return gaps
    starts = np.flatnonzero(np.concatenate(([True], rk[1:] != rk[:-1])))
    lengths = np.diff(np.append(starts, rk.shape[0]))
    order = np.argsort(rk[starts], kind="stable")  # one per request
    first = np.repeat(starts[order], lengths[order])
    before = np.repeat(np.cumsum(lengths[order]) - lengths[order], lengths[order])
    return gaps[first + np.arange(rk.shape[0]) - before]


class Members:
    """The (request key, step row) pairs of the steps' membership, a block of steps at a
    time: each block's ids exploded and keyed, never every pair's at once (at 10^6 steps
    of ten requests, 10^7 strings)."""

    def __init__(self, steps: pl.DataFrame, codes: pl.DataFrame) -> None:
        self.steps, self.codes = steps, codes
        self.requests = codes.height
        names = codes["request_id"].cast(pl.String)
        # String ids: found among the requests' by one cast to an enum of them, whose code
        # is the request's row (no join of 10^7 strings).
        enum = not codes.schema["request_id"].is_integer()
        enum = enum and not names.null_count() and names.n_unique() == names.len()
        self._enum = pl.Enum(names.to_list()) if enum else None
        pairs = int(steps["request_ids"].list.len().sum() or 0)
        self._steps_per_block = max(1, BLOCK * steps.height // max(pairs, 1))

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(``_rk``, ``_row``) of each block's pairs."""
        for first in range(0, self.steps.height, self._steps_per_block):
            part = self.steps.slice(first, self._steps_per_block)
            pairs = self._pairs(part["request_ids"], first)
            yield pairs["_rk"].to_numpy(), pairs["_row"].to_numpy()

    def _pairs(self, ids: pl.Series, first: int) -> pl.DataFrame:
        rows = np.repeat(np.arange(first, first + ids.len(), dtype=np.int64), ids.list.len())
        flat = ids.explode()
        if self._enum is not None:
            code = flat.cast(pl.String).cast(self._enum, strict=False).to_physical()
            pairs = pl.DataFrame({"_rk": self.codes["_rk"].gather(code), "_row": rows})
            return pairs.filter(pl.col("_rk").is_not_null())
        dtype = self.codes.schema["request_id"]
        on = self.codes.select(pl.col("request_id").cast(pl.String), "_rk")
        if dtype.is_integer():
            wanted, on = flat.cast(dtype, strict=False), self.codes.select("request_id", "_rk")
        else:
            wanted = flat.cast(pl.String)
        pairs = pl.DataFrame({"_row": rows, "request_id": wanted})
        return pairs.join(on, on="request_id").select("_rk", "_row")


def members(steps: pl.DataFrame, codes: pl.DataFrame) -> Members | None:
    """The steps' membership (`Members`); None unless every step gives its requests."""
    ids = steps["request_ids"]
    if ids.null_count() or steps.is_empty():
        return None
    return Members(steps, codes)
