"""Every output tick in request and time order, by ONE sort of one packed integer.

A tick is placed by (request, time, first token first), and its token count is only a
passenger. When the spans of the request keys, the timestamps and the token counts fit
together in 64 bits — sequential request ids, or category codes of string ids, over any
trace shorter than days — each tick is packed into one unsigned integer::

    key − key_min | ts − ts_min | not first_token | tokens − tokens_min

and NumPy's vectorised sort of 64-bit integers orders all of them at once (≈ 56 ms for
10⁷ on this project's 2-core VM, single-threaded), with no permutation to gather by and
no hash table: the sorted integers *are* the sorted columns. The fields come back out
with shifts and masks.

The order is the one ``lifecycle`` defines for ticks: by request, then time, then
first_token before token. Ticks equal in all three are interchangeable unless their token
counts differ; then the written order decides (the hash group-by's, which keeps rows in
order within a group), so for such a trace ``packed_ticks`` returns ``None`` and
``tick_frame`` takes that path (``grouped_ticks``), as it does when the spans do not fit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle_rules import KEY
from servetrace.schema import TICK_EVENTS

WORD_BITS = 64


def _bits(span: int) -> int:
    return int(span).bit_length()


def tick_frame(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Output ticks sorted by request, time and lifecycle order, with the gap before each,
    and their per-request aggregates: by one sort of packed integers where the key, time
    and token spans fit in 64 bits (``packed_ticks``), else by grouping the rows."""
    packed = packed_ticks(events)
    return packed if packed is not None else grouped_ticks(events)


def packed_ticks(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The ticks of ``events`` (``_key``, ``ts``, ``tokens``, ``is_first``) sorted by
    (request, time, first token first), each with ``gap_ns`` to the previous tick of its
    request, and their per-request aggregates (``_tick_aggregates``' frame);
    ``None`` when the packed sort cannot give exactly that order (see above)."""
    bounds = _bounds(events)
    if bounds is None:
        return None
    (key_min, key_bits), (ts_min, ts_bits), (tokens_min, tokens_bits) = bounds
    if key_bits + ts_bits + 1 + tokens_bits > WORD_BITS:
        return None
    ts_shift = 1 + tokens_bits
    key_shift = ts_shift + ts_bits
    # Int64 arithmetic, which wraps: the bits are those of the unsigned fields, read back
    # as unsigned below (checked casts to UInt64 would cost a third of the query).
    packed = (
        events.lazy()
        .filter(pl.col("event").is_in(TICK_EVENTS))
        .select(
            (
                (pl.col(KEY) - key_min) * _bit(key_shift)
                + (pl.col("ts") - ts_min) * _bit(ts_shift)
                + (pl.col("event") == "token").cast(pl.Int64) * _bit(tokens_bits)
                + (tick_tokens(events.columns) - tokens_min)
            ).alias("packed")
        )
        .collect()
        .to_series()
        .rechunk()
    )
    if packed.len() == 0:
        return None
    # Each big array below is allocated once and then worked on in place: at 10^7 ticks a
    # fresh 80 MB array costs more in page faults than the arithmetic that fills it.
    ordered = np.sort(packed.to_numpy().view(np.uint64))
    del packed
    n = ordered.shape[0]
    ts = np.right_shift(ordered, np.uint64(ts_shift))
    np.bitwise_and(ts, np.uint64((1 << ts_bits) - 1), out=ts)
    ts = ts.view(np.int64)
    ts += ts_min
    gap = np.empty(n, dtype=np.int64)
    scratch = gap.view(np.uint64)  # gap's memory, before it holds the gaps
    np.bitwise_and(ordered, np.uint64(1 << tokens_bits), out=scratch)
    is_first = scratch == 0
    if tokens_bits:
        count = np.bitwise_and(ordered, np.uint64((1 << tokens_bits) - 1)).view(np.int64)
        count += tokens_min
    else:
        count = np.full(n, tokens_min, dtype=np.int64)
    key = np.right_shift(ordered, np.uint64(key_shift), out=ordered).view(np.int64)
    key += key_min
    same = np.empty(n, dtype=bool)
    same[0] = False
    np.equal(key[1:], key[:-1], out=same[1:])
    np.subtract(ts[1:], ts[:-1], out=gap[1:])
    starts = np.flatnonzero(~same)  # each request's first tick; the first of all too
    # The gap before a request's first tick is not a gap: below every real one, so the
    # maximum of a request of one tick is the sentinel (read back as null), and the
    # ticks' column shows it as null.
    gap[starts] = _NO_GAP
    # Ticks tied in (request, time, first token) with different token counts: only the
    # written order places them (module docstring). Equal counts cannot differ.
    if tokens_bits and _ties_differ(gap, is_first, count):
        return None
    frame = pl.DataFrame(
        [
            pl.Series(KEY, key).set_sorted(),
            pl.Series("ts", ts),
            pl.Series("tokens", count),
            pl.Series("is_first", is_first),
            pl.Series("gap_ns", gap),
            pl.Series("_same", same),
        ]
    )
    ticks = frame.with_columns(pl.when("_same").then("gap_ns").alias("gap_ns")).drop("_same")
    return ticks, _aggregates(key, ts, count, is_first, gap, starts)


_NO_GAP = np.iinfo(np.int64).min


def _bit(shift: int) -> pl.Expr:
    """2^shift as an Int64 literal, wrapped: 2^63 is Int64's minimum, whose product has the
    same 64 bits as the unsigned one (Polars' integer arithmetic wraps)."""
    value = 1 << shift
    return pl.lit(value - (1 << WORD_BITS) if value >> (WORD_BITS - 1) else value, pl.Int64)


def tick_tokens(columns: Sequence[str]) -> pl.Expr:
    """Tokens of a tick: a null count is one token, as is every tick without the column."""
    return pl.col("tokens").fill_null(1) if "tokens" in columns else pl.lit(1, pl.Int64)


def _bounds(
    events: pl.DataFrame,
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]] | None:
    """(minimum, bits of the span) of the keys, the times and the token counts, over every
    row, not only the ticks: wider at worst, and no filtered copies. None without rows."""
    has_tokens = "tokens" in events.columns
    queries = [pl.col(c).min().alias(f"{c}_min") for c in (KEY, "ts")]
    queries += [pl.col(c).max().alias(f"{c}_max") for c in (KEY, "ts")]
    if has_tokens:  # min and max skip nulls, which count as 1 (below)
        queries += [pl.col("tokens").min().alias("t_min"), pl.col("tokens").max().alias("t_max")]
    found = events.select(queries).row(0, named=True)
    key_min, ts_min = found[f"{KEY}_min"], found["ts_min"]
    if key_min is None:
        return None
    counts = [1, 1]
    if has_tokens and found["t_min"] is not None:
        counts = [found["t_min"], found["t_max"]]
        if events["tokens"].null_count():
            counts = [min(counts[0], 1), max(counts[1], 1)]
    return (
        (key_min, _bits(found[f"{KEY}_max"] - key_min)),
        (ts_min, _bits(found["ts_max"] - ts_min)),
        (counts[0], _bits(counts[1] - counts[0])),
    )


def _aggregates(
    key: np.ndarray,
    ts: np.ndarray,
    count: np.ndarray,
    is_first: np.ndarray,
    gap: np.ndarray,
    starts: np.ndarray,
) -> pl.DataFrame:
    """``lifecycle``'s per-request tick aggregates, from the run of each request in the
    sorted arrays (``np.ufunc.reduceat`` over the runs' first rows; ``gap`` holds the
    sentinel at each run's first row)."""
    ends = np.append(starts[1:], key.shape[0])
    itl_max = pl.Series("itl_max_ns", np.maximum.reduceat(gap, starts))
    return pl.DataFrame(
        [
            pl.Series(KEY, key[starts]).set_sorted(),
            pl.Series("ticks", ends - starts, dtype=pl.UInt32),
            pl.Series("tokens_sum", np.add.reduceat(count, starts)),
            pl.Series("min_chunk_tokens", np.minimum.reduceat(count, starts)),
            pl.Series("first_tick_ns", ts[starts]),
            pl.Series("last_tick_ns", ts[ends - 1]),
            itl_max.set(itl_max == _NO_GAP, None),
            pl.Series("n_first", _counts_per_run(is_first, starts), dtype=pl.UInt32),
            pl.Series("first_is_first", is_first[starts]),
        ]
    )


def _counts_per_run(flags: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """How many ``flags`` are set in each run (``add.reduceat`` with a wider dtype would
    first copy all of ``flags`` into it)."""
    runs = np.searchsorted(starts, np.flatnonzero(flags), side="right") - 1
    return np.bincount(runs, minlength=starts.shape[0])


def _ties_differ(gap: np.ndarray, is_first: np.ndarray, count: np.ndarray) -> bool:
    """Whether two neighbouring ticks of one request share time and kind but not size
    (a request's first tick has the sentinel gap, never 0)."""
    tied = np.flatnonzero(gap[1:] == 0) + 1
    if tied.shape[0] == 0:
        return False
    kind = is_first[tied] == is_first[tied - 1]
    return bool((kind & (count[tied] != count[tied - 1])).any())


def grouped_ticks(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``tick_frame`` for any keys and times: a hash group-by of the rows as written."""
    # Narrow first, then filter: the ticks are most of the trace, so every column not
    # selected is a large copy saved.
    ticks = (
        events.select(
            KEY,
            "ts",
            tick_tokens(events.columns).cast(pl.Int64).alias("tokens"),
            (pl.col("event") == "first_token").alias("is_first"),
            pl.col("event").is_in(TICK_EVENTS).alias("_tick"),
        )
        .filter("_tick")
        .drop("_tick")
    )
    # Logs are written in time order (or by request): grouping the ticks by request keeps
    # each request's ticks in the order written (Polars keeps row order within a group),
    # which is then their time order, with no sort of the ticks (a hash group-by costs
    # about half a stable sort of 10^7 rows). Only the ~10^4 groups are sorted by key.
    # (One contiguous chunk first: a collected scan comes in ~100 chunks, which costs the
    # group-by half as much again.)
    same_request = pl.col(KEY) == pl.col(KEY).shift(1)
    gap = pl.when(same_request).then(pl.col("ts").diff()).alias("gap_ns")
    grouped = (
        ticks.rechunk()
        .group_by(KEY)
        .agg("ts", "tokens", "is_first")
        .sort(KEY)
        .explode("ts", "tokens", "is_first")
        .with_columns(gap)
    )
    # ...unless a request's ticks were written out of time order, or a first_token after a
    # token of the same timestamp: then sort them on (request, time, first_token first).
    misordered = (pl.col("gap_ns") < 0) | (pl.col("is_first") & (pl.col("gap_ns") == 0))
    if grouped.select(misordered.any()).item():
        grouped = ticks.sort(KEY, "ts", "is_first", descending=[False, False, True])
        grouped = grouped.with_columns(gap)
    return grouped, _tick_aggregates(grouped)


def _tick_aggregates(ticks: pl.DataFrame) -> pl.DataFrame:
    return ticks.group_by(KEY, maintain_order=True).agg(
        pl.len().alias("ticks"),
        pl.col("tokens").sum().alias("tokens_sum"),
        pl.col("tokens").min().alias("min_chunk_tokens"),
        pl.col("ts").first().alias("first_tick_ns"),
        pl.col("ts").last().alias("last_tick_ns"),
        pl.col("gap_ns").max().alias("itl_max_ns"),
        pl.col("is_first").sum().alias("n_first"),
        pl.col("is_first").first().alias("first_is_first"),
    )
