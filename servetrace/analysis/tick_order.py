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
order within a group), so for such a trace ``packed_ticks`` returns ``None`` and the
caller takes that path, as it does when the spans do not fit.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle_rules import KEY
from servetrace.schema import TICK_EVENTS

WORD_BITS = 64


def _bits(span: int) -> int:
    return int(span).bit_length()


def packed_ticks(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The ticks of ``events`` (``_key``, ``ts``, ``tokens``, ``is_first``) sorted by
    (request, time, first token first), each with ``gap_ns`` to the previous tick of its
    request, and their per-request aggregates (``lifecycle._tick_aggregates``' frame);
    ``None`` when the packed sort cannot give exactly that order (see above)."""
    tick = pl.col("event").is_in(TICK_EVENTS)
    tokens = pl.col("tokens").fill_null(1) if "tokens" in events.columns else pl.lit(1, pl.Int64)
    # Bounds over every row, not only the ticks: wider at worst, and no filtered copies.
    bounds = events.select(
        pl.col(KEY).min().alias("key_min"),
        pl.col(KEY).max().alias("key_max"),
        pl.col("ts").min().alias("ts_min"),
        pl.col("ts").max().alias("ts_max"),
        tokens.min().alias("tokens_min"),
        tokens.max().alias("tokens_max"),
    ).row(0, named=True)
    if bounds["key_min"] is None:
        return None
    key_min, ts_min, tokens_min = bounds["key_min"], bounds["ts_min"], bounds["tokens_min"]
    tokens_bits = _bits(bounds["tokens_max"] - tokens_min)
    ts_bits = _bits(bounds["ts_max"] - ts_min)
    key_bits = _bits(bounds["key_max"] - key_min)
    if key_bits + ts_bits + 1 + tokens_bits > WORD_BITS:
        return None
    ts_shift = 1 + tokens_bits
    key_shift = ts_shift + ts_bits
    u64 = pl.UInt64
    packed = (
        events.lazy()
        .filter(tick)
        .select(
            (
                ((pl.col(KEY) - key_min).cast(u64) * (1 << key_shift))
                | ((pl.col("ts") - ts_min).cast(u64) * (1 << ts_shift))
                | ((pl.col("event") != "first_token").cast(u64) * (1 << tokens_bits))
                | (tokens - tokens_min).cast(u64)
            ).alias("packed")
        )
        .collect()
        .to_series()
    )
    if packed.len() == 0:
        return None
    ordered = packed.to_numpy(writable=True)  # a copy of the ~100 chunks of a scan anyway
    del packed
    ordered.sort()
    key = (ordered >> np.uint64(key_shift)).astype(np.int64)
    key += key_min
    ts = ((ordered >> np.uint64(ts_shift)) & np.uint64((1 << ts_bits) - 1)).astype(np.int64)
    ts += ts_min
    count = (ordered & np.uint64((1 << tokens_bits) - 1)).astype(np.int64)
    count += tokens_min
    is_first = (ordered & np.uint64(1 << tokens_bits)) == 0
    del ordered
    same = np.empty(key.shape[0], dtype=bool)
    same[:1] = False
    np.equal(key[1:], key[:-1], out=same[1:])
    gap = np.empty_like(ts)
    gap[:1] = 0
    np.subtract(ts[1:], ts[:-1], out=gap[1:])
    # Ticks tied in (request, time, first token) with different token counts: only the
    # written order places them (module docstring).
    if _ties_differ(same, gap, is_first, count):
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
    return ticks, _aggregates(key, ts, count, is_first, gap, same)


def _aggregates(
    key: np.ndarray,
    ts: np.ndarray,
    count: np.ndarray,
    is_first: np.ndarray,
    gap: np.ndarray,
    same: np.ndarray,
) -> pl.DataFrame:
    """``lifecycle``'s per-request tick aggregates, from the run of each request in the
    sorted arrays (``np.ufunc.reduceat`` over the runs' first rows)."""
    starts = np.flatnonzero(~same)
    ends = np.append(starts[1:], key.shape[0])
    # The gap before a request's first tick is not a gap: below every real one, so a
    # request of one tick gets the sentinel, read back as null.
    gaps = gap.copy()
    gaps[starts] = np.iinfo(np.int64).min
    itl_max = pl.Series("itl_max_ns", np.maximum.reduceat(gaps, starts))
    del gaps
    return pl.DataFrame(
        [
            pl.Series(KEY, key[starts]).set_sorted(),
            pl.Series("ticks", ends - starts, dtype=pl.UInt32),
            pl.Series("tokens_sum", np.add.reduceat(count, starts)),
            pl.Series("min_chunk_tokens", np.minimum.reduceat(count, starts)),
            pl.Series("first_tick_ns", ts[starts]),
            pl.Series("last_tick_ns", ts[ends - 1]),
            itl_max.set(itl_max == np.iinfo(np.int64).min, None),
            pl.Series("n_first", np.add.reduceat(is_first, starts, dtype=np.uint32)),
            pl.Series("first_is_first", is_first[starts]),
        ]
    )


def _ties_differ(
    same: np.ndarray, gap: np.ndarray, is_first: np.ndarray, count: np.ndarray
) -> bool:
    tied = same[1:] & (gap[1:] == 0) & (is_first[1:] == is_first[:-1])
    return bool((tied & (count[1:] != count[:-1])).any())
