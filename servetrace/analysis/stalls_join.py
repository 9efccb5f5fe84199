"""The join of inter-token gaps to the engine steps that cover them (docs/design.md §10).

A gap of one request runs from its previous output tick ``a`` to its tick ``b``; it is
*covered* by the steps of the request's replica whose end lies in ``(a, b]``: a run of the
replica's steps sorted by end, found by sorted searches and summed by differences of
cumulative sums (`stalls_cover`). Membership (each step's requests) is placed the same
way: every (request, step) pair finds, by one sorted search, the gap of that request its
step's end falls in.

`join_gaps` makes every column of the per-gap file; `join_core` only those the
attribution reads, which is what ``analyze --steps`` needs for its views.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from servetrace.analysis.stalls_cover import (
    BLOCK,
    REASON_CODES,
    Cover,
    Cumulated,
    cover,
    covering_sums,
    cumulative,
    straddle,
)

if TYPE_CHECKING:
    from servetrace.analysis.stalls_gaps import Members

# Step columns summed over a gap's covering steps: name in the gap frame → step expression.
SUMMED: dict[str, pl.Expr] = {
    "steps": pl.col("ts_end").is_not_null().cast(pl.Int64),
    "step_ns": pl.col("ts_end") - pl.col("ts_start"),
    "prefill_requests": pl.col("prefill_requests"),
    "prefill_tokens": pl.col("prefill_tokens"),
    "decode_requests": pl.col("decode_requests"),
    "decode_tokens": pl.col("decode_tokens"),
    "steps_with_prefill": (pl.col("prefill_tokens") > 0).cast(pl.Int64),
    "overlapping_steps": pl.col("overlaps").cast(pl.Int64),
    "prefill_only_ns": pl.col("_po_ns"),
}
# What the attribution reads of them (`stalls_attribution.attribute`).
CORE_SUMMED = ("step_ns", "steps_with_prefill", "prefill_only_ns")
# Of the last covering step (the one that emitted the tick) and of the first.
LAST = {
    "last_step": "step",
    "last_decode_requests": "decode_requests",
    "last_kv_tokens": "kv_tokens",
    "last_ns": "_ns",
    "last_baseline_ns": "baseline_ns",
    "last_prefill_only_ns": "_po_ns",
}
# A step that prefilled and decoded nothing: in a prefill-first engine every running
# decode sat it out (a step whose counts do not tell is not one).
PREFILL_ONLY = ((pl.col("prefill_tokens") > 0) & (pl.col("decode_requests") == 0)).fill_null(False)


def prepare_steps(steps: pl.DataFrame) -> pl.DataFrame:
    """Steps sorted by replica and end (``_row``: their row in ``steps``), flagged where
    they overlap the step before them on their replica."""
    frame = (
        steps.with_row_index("_row")
        .with_columns(pl.col("replica").fill_null(""), _ns=pl.col("ts_end") - pl.col("ts_start"))
        .with_columns(_po_ns=pl.when(PREFILL_ONLY).then(pl.col("_ns")).otherwise(0))
    )
    # Each replica's steps are written in order of end (`validate`): with one replica, or
    # replicas one after another, the file is in this order already and is not sorted.
    if not _in_order(frame):
        frame = frame.sort("replica", "ts_end", "ts_start", maintain_order=True)
    # The replicas are runs now: the step before on the replica is the row before.
    same = pl.col("replica") == pl.col("replica").shift(1)
    overlaps = same & (pl.col("ts_start") < pl.col("ts_end").shift(1))
    return frame.with_columns(overlaps=overlaps.fill_null(False))


def _in_order(frame: pl.DataFrame) -> bool:
    """Whether ``frame`` is sorted by (replica, ts_end, ts_start)."""
    if frame.height < 2:
        return True
    replica, end, start = (pl.col(c) for c in ("replica", "ts_end", "ts_start"))
    after = (
        (replica > replica.shift(1))
        | ((replica == replica.shift(1)) & (end > end.shift(1)))
        | ((replica == replica.shift(1)) & (end == end.shift(1)) & (start >= start.shift(1)))
    )
    return bool(frame.select(after.slice(1).all()).item())


Membership = tuple[np.ndarray, np.ndarray, np.ndarray]


def membership(
    gaps: pl.DataFrame, steps: pl.DataFrame, members: Members | pl.DataFrame | None
) -> Membership | None:
    """Per gap, how many steps that ran its request end inside it, their time and the time
    of those that were prefill-only (its own prompt, recomputed); None unless the
    membership of every step is known. ``members``: the (request, step) pairs
    (`stalls_gaps.Members`, or a frame of their ``_rk`` and the step's ``_row``)."""
    if members is None:
        return None
    n = gaps.height
    count, time, prefill_only = (np.zeros(n, dtype=np.int64) for _ in range(3))
    if n == 0 or steps.is_empty():
        return count, time, prefill_only
    if isinstance(members, pl.DataFrame):
        frame = members
        requests = int(frame["_rk"].max() or 0) + 1 if frame.height else 1  # type: ignore[arg-type]
        blocks: Iterable[tuple[np.ndarray, np.ndarray]] = (
            (frame["_rk"][i : i + BLOCK].to_numpy(), frame["_row"][i : i + BLOCK].to_numpy())
            for i in range(0, frame.height, BLOCK)
        )
    else:
        requests, blocks = members.requests, members.blocks()
    rk = gaps["_rk"].to_numpy()
    a, b = gaps["gap_start_ns"].to_numpy(), gaps["gap_end_ns"].to_numpy()
    ends = steps["ts_end"].to_numpy()
    key, run_of = _request_keys(rk, requests)
    # (request, time) pairs as one sortable integer: key × span + time since the first
    # instant when that fits in 62 bits; else the time's rank among every instant in the
    # low bits, the key above them.
    t0 = int(min(b.min(), ends.min()))
    span = int(max(b.max(), ends.max())) - t0 + 1
    high = int(max(key.max(), requests - 1))
    instants = None
    if (high + 1) * span < 1 << 62:
        gap_pos = np.multiply(key, span)
        gap_pos += b
        gap_pos -= t0
    else:
        instants = np.unique(np.concatenate([b, ends]))
        bits = max(len(instants).bit_length(), 1)
        if high >= 1 << (62 - bits):
            return None  # too many requests and instants to pack: membership unknown
        gap_pos = (key << bits) | np.searchsorted(instants, b)
    if n > 1 and not bool(np.all(gap_pos[1:] >= gap_pos[:-1])):
        order = np.argsort(gap_pos, kind="stable")
        gap_pos, key, a, b = gap_pos[order], key[order], a[order], b[order]
    else:
        order = None
    # A gap that does not start where the one before it (of its request) ended.
    fresh = np.concatenate(([True], (key[1:] != key[:-1]) | (a[1:] != b[:-1])))
    ns = (steps["ts_end"] - steps["ts_start"]).to_numpy()
    prefill_only_step = steps.select(PREFILL_ONLY).to_series().to_numpy()
    for m_rk, rows in blocks:
        m_key = m_rk if run_of is None else np.take(run_of, m_rk)
        m_end = np.take(ends, rows)
        if instants is None:
            member_pos = np.multiply(m_key, span)
            member_pos += m_end
            member_pos -= t0
        else:
            member_pos = (m_key << bits) | np.searchsorted(instants, m_end)
        # The first gap at or after the pair's position holds the step if it is the
        # pair's request's (its position has the request's key) and, unless it starts
        # where the one before ended, which is before the step's end already, it starts
        # before the step's end. Each pair reads one position, not its gap's bounds.
        target = np.searchsorted(gap_pos, member_pos)
        beyond = target == n
        target[beyond] = n - 1
        found = np.take(gap_pos, target, out=member_pos)
        if instants is None:
            found //= span
        else:
            found >>= bits
        hit = found == m_key
        hit &= ~beyond
        check = np.flatnonzero(hit & fresh[target])
        hit[check] = a[target[check]] < m_end[check]
        if not hit.all():
            target, rows = target[hit], rows[hit]
        at = target if order is None else order[target]
        np.add.at(count, at, 1)
        np.add.at(time, at, np.take(ns, rows))
        # Only the pairs of prefill-only steps weigh in the third sum: few, at most.
        few = np.flatnonzero(np.take(prefill_only_step, rows))
        if few.shape[0]:
            np.add.at(prefill_only, at[few], ns[rows[few]])
    return count, time, prefill_only


def _request_keys(rk: np.ndarray, requests: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A key per gap's request (``rk``, of ``requests`` codes) that increases down the
    gaps, and the key of each code (None: the codes are the keys). Each request's gaps are
    one run in time order (``tick_gaps``): in ``_rk`` order the codes are that key; else a
    request's key is the number of its run, and a request without gaps gets -1 (its pairs
    are placed nowhere)."""
    if rk.shape[0] < 2 or bool(np.all(rk[1:] >= rk[:-1])):
        return rk, None
    new = np.concatenate(([True], rk[1:] != rk[:-1]))
    key = np.cumsum(new) - 1
    starts = rk[new]
    if np.unique(starts).shape[0] != starts.shape[0]:
        return rk, None  # a request's gaps in several runs: sorted by the caller
    run_of = np.full(max(int(rk.max()) + 1, requests), -1, dtype=np.int64)
    run_of[starts] = key[new]
    return key, run_of


def _reason(codes: np.ndarray) -> pl.Series:
    """The ``unjoined`` column of `Cover.reasons` codes: text, null for a joined gap."""
    if not (codes >= 0).any():
        return pl.repeat(None, codes.shape[0], dtype=pl.String, eager=True).alias("unjoined")
    labels = pl.Series("unjoined", REASON_CODES, dtype=pl.String)
    index = pl.Series(codes.astype(np.int64))
    return labels.gather(pl.select(pl.when(index >= 0).then(index)).to_series())


def _join(
    gaps: pl.DataFrame,
    steps: pl.DataFrame,
    placed: Membership | None,
    prepared: pl.DataFrame | None,
    summed: tuple[str, ...] | None,
    last: dict[str, str] | None,
    cumulated: Cumulated | None = None,
    where: Cover | None = None,
) -> pl.DataFrame:
    """``gaps`` with the `SUMMED` sums ``summed`` and the `LAST` columns ``last`` (None:
    the columns `join_core` needs); ``where``: their `cover`, if the caller has it."""
    prepared = prepare_steps(steps) if prepared is None else prepared
    if "baseline_ns" not in prepared.columns:
        prepared = prepared.with_columns(baseline_ns=pl.lit(None, pl.Int64))
    summed = CORE_SUMMED if summed is None else summed
    last = _core_last(steps, placed is not None) if last is None else last
    where = cover(gaps, prepared) if where is None else where
    a, b = gaps["gap_start_ns"].to_numpy(), gaps["gap_end_ns"].to_numpy()
    sums = covering_sums(where, cumulated or cumulate(prepared, summed))
    columns = [pl.Series("steps", where.steps)]
    for name in summed:
        value, nulls = sums[name]
        column = pl.Series(name, value)
        if nulls is not None:
            column = pl.select(pl.when(pl.Series(nulls)).then(None).otherwise(column)).to_series()
        columns.append(column.alias(name))
    between = None
    if "step_ns" in sums:
        cut = straddle(where, prepared["ts_start"].to_numpy(), a)
        # The part of a prefill-only first step before ``a`` is no more in the gap than the
        # rest of its straddle.
        at = np.flatnonzero(cut)
        if at.shape[0] and "prefill_only_ns" in sums:
            first_only = prepared["_po_ns"].to_numpy()[where.lo[at]] > 0
            sums["prefill_only_ns"][0][at] -= np.where(first_only, cut[at], 0)
        covered = np.subtract(sums["step_ns"][0], cut, out=cut)
        between = np.subtract(b, a)
        np.minimum(covered, between, out=covered)
        between -= covered
        columns.append(pl.Series("covered_ns", covered))
    if "first_step" in last:
        first = pl.Series(where.first()).replace(-1, None)
        columns.append(prepared["step"].gather(first).alias("first_step"))
    last_row = pl.Series(where.last()).replace(-1, None)
    frame = gaps.with_columns(
        *columns,
        **{
            name: prepared[source].gather(last_row)
            for name, source in last.items()
            if name != "first_step"
        },
        unjoined=_reason(where.reasons(a, b)),
    )
    if between is None:
        return frame
    unknown = pl.lit(None, pl.Int64)
    return frame.with_columns(
        between_ns=pl.Series(between),
        member_steps=pl.Series(placed[0]) if placed else unknown,
        member_ns=pl.Series(placed[1]) if placed else unknown,
        member_prefill_only_ns=pl.Series(placed[2]) if placed else unknown,
    )


def _core_last(steps: pl.DataFrame, members: bool) -> dict[str, str]:
    """The `LAST` columns the attribution reads: the last step's fitted time; its own
    time where no membership says which steps ran the request; its batch and KV tokens
    where the steps carry no fitted time."""
    last = {"last_baseline_ns": "baseline_ns"}
    if not members:
        last |= {"last_ns": "_ns", "last_prefill_only_ns": "_po_ns"}
    if "baseline_ns" not in steps.columns:
        last |= {"last_decode_requests": "decode_requests", "last_kv_tokens": "kv_tokens"}
    return last


def join_gaps(
    gaps: pl.DataFrame,
    steps: pl.DataFrame,
    members: Members | pl.DataFrame | None = None,
    prepared: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Every gap with its covering steps' count and summed composition.

    ``gaps``: ``_rk`` (an integer key per request), ``replica`` (String, "" for one
    replica), ``gap_start_ns``, ``gap_end_ns``, ``tokens`` (carried by the tick at the
    gap's end). ``steps``: canonical steps, every one timed (``baseline_ns`` too, if the
    baseline is fitted); ``members``: their membership (`_membership`). Adds the `SUMMED`
    sums (null where a covering step does not tell), ``covered_ns`` (time of the gap
    inside its covering steps), `LAST`, ``first_step``, ``unjoined`` (a reason, or null),
    ``between_ns`` (inside no step) and ``member_steps``/``member_ns``. Rows keep the
    order of ``gaps``. ``prepared``: `prepare_steps` of ``steps``, if the caller has it.
    """
    summed = tuple(name for name in SUMMED if name != "steps")
    last = {"first_step": "step", **LAST}
    return _join(gaps, steps, membership(gaps, steps, members), prepared, summed, last)


def join_core(
    gaps: pl.DataFrame,
    steps: pl.DataFrame,
    placed: Membership | None,
    prepared: pl.DataFrame,
    cumulated: Cumulated | None = None,
    where: Cover | None = None,
) -> pl.DataFrame:
    """`join_gaps` with only the columns `stalls_attribution.attribute` reads: the same
    values, without the composition that only the per-gap file shows. ``placed``:
    `membership` of ``gaps``; ``cumulated``: `cumulate` of ``prepared`` for the columns
    summed (`CORE_SUMMED`), when the caller joins several blocks of gaps; ``where``:
    `stalls_cover.cover` of ``gaps``, when the caller reads it too."""
    return _join(gaps, steps, placed, prepared, None, None, cumulated, where)


def cumulate(prepared: pl.DataFrame, names: tuple[str, ...] = CORE_SUMMED) -> Cumulated:
    """The cumulative sums (`stalls_cover.cumulative`) of the `SUMMED` columns ``names``."""
    values = prepared.select(*[SUMMED[name].alias(name) for name in names])
    return {name: cumulative(values[name]) for name in names}


def composition(gaps: pl.DataFrame, prepared: pl.DataFrame) -> pl.DataFrame:
    """``gaps`` with their covering steps' count, first and last step, and summed prefill
    tokens and decode requests: what the list of worst stalls shows of them."""
    last = {"first_step": "step", "last_step": "step"}
    return _join(gaps, prepared, None, prepared, ("prefill_tokens", "decode_requests"), last)
