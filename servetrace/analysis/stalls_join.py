"""The join of inter-token gaps to the engine steps that cover them (docs/design.md §10).

A gap of one request runs from its previous output tick ``a`` to its tick ``b``; it is
*covered* by the steps of the request's replica whose end lies in ``(a, b]``. Per replica
the steps are sorted by end and summed cumulatively, so the covering steps' count and
composition are two sorted searches per gap (the steps ending at or before ``a``, and at or
before ``b``) and a difference of cumulative sums: no loop over gaps (the loop is over
replicas). Membership (each step's requests) is placed the same way: every (request, step)
pair finds, by one sorted search, the gap of that request its step's end falls in.
"""

from __future__ import annotations

import numpy as np
import polars as pl

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


def _cumulative(values: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(sums, null counts) through each row, with a leading 0."""
    filled = values.fill_null(0).to_numpy().astype(np.int64)
    nulls = values.is_null().to_numpy().astype(np.int64)
    zero = np.zeros(1, dtype=np.int64)
    return np.concatenate([zero, np.cumsum(filled)]), np.concatenate([zero, np.cumsum(nulls)])


def _cover(part: pl.DataFrame, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """For gaps ``(a, b]`` of one replica: the `SUMMED` sums (with null counts), the
    positions in ``part`` (its steps sorted by end) of the first and last covering step,
    and the covered time."""
    ends = part["ts_end"].to_numpy()
    starts = part["ts_start"].to_numpy()
    n = len(a)
    hi = np.searchsorted(ends, b, side="right")
    # A request's gaps come in time order, each starting at the tick the one before it
    # ended on: its steps ending at or before ``a`` are the previous gap's at or before
    # ``b``. Only the other gaps (each request's first) are searched, and each sum is one
    # gather at ``hi`` less the previous one.
    chained = np.zeros(n, dtype=bool)
    np.equal(a[1:], b[:-1], out=chained[1:])
    fresh = np.flatnonzero(~chained)
    lo = np.empty(n, dtype=np.int64)
    lo[1:] = hi[:-1]
    lo[fresh] = np.searchsorted(ends, a[fresh], side="right")
    summed = part.select(**SUMMED)
    # Every cumulative column side by side, one row per step: a gap's sums are one row
    # gathered (one or two cache lines), not one random read per column; at 10^6 steps
    # the columns outgrow the cache and those reads are most of the join.
    names, columns = [], []
    for name in SUMMED:
        cum, nul = _cumulative(summed[name])
        names.append(name)
        columns.append(cum)
        if nul[-1]:  # only a column with an unknown value can make a sum unknown
            names.append(f"_nul_{name}")
            columns.append(nul)
    table = np.column_stack(columns)
    sums = table[hi]
    below = np.empty_like(sums)
    below[1:] = sums[:-1]
    below[fresh] = table[lo[fresh]]
    sums -= below
    out: dict[str, np.ndarray] = {
        name: np.ascontiguousarray(sums[:, j]) for j, name in enumerate(names)
    }
    del sums, below
    inside = hi > lo
    first = np.where(inside, lo, -1)
    straddle = np.where(inside, np.maximum(a - starts[np.minimum(lo, len(starts) - 1)], 0), 0)
    out["covered_ns"] = np.minimum(out["step_ns"] - straddle, b - a)
    # The part of a prefill-only first step before ``a`` is no more in the gap than the
    # rest of its straddle.
    cut = np.flatnonzero(straddle)
    if cut.shape[0]:
        first_only = part["_po_ns"].to_numpy()[lo[cut]] > 0
        out["prefill_only_ns"][cut] -= np.where(first_only, straddle[cut], 0)
    out["_first"], out["_last"] = first, np.where(inside, hi - 1, -1)
    out["_span_start"] = np.full(n, starts.min() if len(starts) else 0)
    out["_span_end"] = np.full(n, ends.max() if len(ends) else 0)
    return out


def _membership(
    gaps: pl.DataFrame, steps: pl.DataFrame, members: pl.DataFrame | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per gap, how many steps that ran its request end inside it, their time and the time
    of those that were prefill-only (its own prompt, recomputed); None unless the
    membership of every step is known. ``members``: ``_rk`` (the gaps' request key) and
    ``_row`` (the step's row) of every (request, step) pair."""
    if members is None:
        return None
    key = gaps["_rk"].to_numpy()
    a, b = gaps["gap_start_ns"].to_numpy(), gaps["gap_end_ns"].to_numpy()
    rows = members["_row"].to_numpy()
    m_key = members["_rk"].to_numpy()
    m_end = steps["ts_end"].to_numpy()[rows]
    # (request, time) pairs as one sortable integer: request × span + time since the
    # first instant when that fits in 62 bits; else the time's rank among every instant in
    # the low bits, the request key above them.
    t0 = int(min(b.min(initial=0), m_end.min(initial=0)))
    span = int(max(b.max(initial=0), m_end.max(initial=0))) - t0 + 1
    high = int(max(key.max(initial=0), m_key.max(initial=0)))
    if (high + 1) * span < 1 << 62:
        gap_pos = key * span + (b - t0)
        member_pos = m_key * span + (m_end - t0)
    else:
        instants = np.unique(np.concatenate([b, m_end]))
        bits = max(len(instants).bit_length(), 1)
        if high >= 1 << (62 - bits):
            return None  # too many requests and instants to pack: membership unknown
        gap_pos = (key << bits) | np.searchsorted(instants, b)
        member_pos = (m_key << bits) | np.searchsorted(instants, m_end)
    # The gaps come sorted by request and time (``tick_gaps``): no sort, and no gather
    # through an identity order, unless they are not.
    n = gaps.height
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        return none, none, none
    if n > 1 and not bool(np.all(gap_pos[1:] >= gap_pos[:-1])):
        order = np.argsort(gap_pos, kind="stable")
        target = order[np.minimum(np.searchsorted(gap_pos[order], member_pos), n - 1)]
    else:
        target = np.minimum(np.searchsorted(gap_pos, member_pos), n - 1)
    # Each found gap's key and bounds in one row: one random read per pair, not three (at
    # 10^7 pairs those reads, out of the cache, are most of the placement).
    found = np.column_stack([key, a, b])[target]
    hit = found[:, 0] == m_key
    hit &= found[:, 1] < m_end
    hit &= m_end <= found[:, 2]
    del found
    at, rows = target[hit], rows[hit]
    ns = (steps["ts_end"] - steps["ts_start"]).to_numpy()
    po = np.where(steps.select(PREFILL_ONLY).to_series().to_numpy(), ns, 0)
    count = np.bincount(at, minlength=n).astype(np.int64)
    time = np.bincount(at, weights=ns[rows], minlength=n).astype(np.int64)
    prefill_only = np.bincount(at, weights=po[rows], minlength=n).astype(np.int64)
    return count, time, prefill_only


def join_gaps(
    gaps: pl.DataFrame,
    steps: pl.DataFrame,
    members: pl.DataFrame | None = None,
    prepared: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Every gap with its covering steps' count and summed composition.

    ``gaps``: ``_rk`` (an integer key per request), ``replica`` (String, "" for one
    replica), ``gap_start_ns``, ``gap_end_ns``, ``tokens`` (carried by the tick at the
    gap's end). ``steps``: canonical steps (``baseline_ns`` too, if the baseline is
    fitted); ``members``: their membership (`_membership`). Adds the `SUMMED` sums (null
    where a covering step does not tell), ``covered_ns`` (time of the gap inside its
    covering steps), ``between_ns`` (inside none), `LAST`, ``first_step``,
    ``member_steps``/``member_ns`` and ``unjoined`` (a reason, or null). Rows keep the
    order of ``gaps``. ``prepared``: `prepare_steps` of ``steps``, if the caller has it.
    """
    prepared = prepare_steps(steps) if prepared is None else prepared
    if "baseline_ns" not in prepared.columns:
        prepared = prepared.with_columns(baseline_ns=pl.lit(None, pl.Int64))
    n = gaps.height
    columns: dict[str, np.ndarray] = {}
    known = np.zeros(n, dtype=bool)  # the gap's replica has steps
    offsets = prepared.group_by("replica", maintain_order=True).agg(
        pl.len().alias("n"), pl.first("_row").alias("_first_row")
    )
    start = 0
    where: dict[str, tuple[int, int]] = {}
    for replica, count in offsets.select("replica", "n").iter_rows():
        where[replica] = (start, start + count)
        start += count
    replicas = gaps["replica"].unique()
    if replicas.len() == 1:  # one replica: every gap, no grouping
        parts = [(replicas[0], np.arange(n, dtype=np.int64))]
    else:
        rows = gaps.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_g"), "replica")
        parts = [(r, part["_g"].to_numpy()) for (r,), part in rows.group_by("replica")]
    a_all, b_all = gaps["gap_start_ns"].to_numpy(), gaps["gap_end_ns"].to_numpy()
    for replica, idx in parts:
        if replica not in where:
            continue
        lo, hi = where[replica]
        whole = len(idx) == n  # one replica: its arrays are the columns, no scatter
        got = _cover(
            prepared.slice(lo, hi - lo),
            a_all if whole else a_all[idx],
            b_all if whole else b_all[idx],
        )
        got["_first"] = np.where(got["_first"] >= 0, got["_first"] + lo, -1)
        got["_last"] = np.where(got["_last"] >= 0, got["_last"] + lo, -1)
        for name, values in got.items():
            if whole:
                columns[name] = values
            else:
                default = -1 if name in ("_first", "_last") else 0
                columns.setdefault(name, np.full(n, default, dtype=np.int64))[idx] = values
        known[idx] = True
    for name in (*SUMMED, "covered_ns", "_span_start", "_span_end"):
        columns.setdefault(name, np.zeros(n, dtype=np.int64))
    for name in ("_first", "_last"):
        columns.setdefault(name, np.full(n, -1, dtype=np.int64))
    first = pl.Series(columns["_first"]).replace(-1, None)
    last = pl.Series(columns["_last"]).replace(-1, None)
    frame = gaps.with_columns(
        *[
            pl.Series(name, columns[name])
            if f"_nul_{name}" not in columns
            else pl.when(pl.Series(columns[f"_nul_{name}"]) > 0)
            .then(None)
            .otherwise(pl.Series(columns[name]))
            .alias(name)
            for name in SUMMED
        ],
        covered_ns=pl.Series(columns["covered_ns"]),
        first_step=prepared["step"].gather(first),
        **{name: prepared[source].gather(last) for name, source in LAST.items()},
        _known=pl.Series(known),
        _span_start=pl.Series(columns["_span_start"]),
        _span_end=pl.Series(columns["_span_end"]),
    )
    reason = (
        pl.when(pl.col("steps") > 0)
        .then(None)
        .when(~pl.col("_known"))
        .then(pl.lit("replica_without_steps"))
        .when(
            (pl.col("gap_end_ns") < pl.col("_span_start"))
            | (pl.col("gap_start_ns") >= pl.col("_span_end"))
        )
        .then(pl.lit("outside_steps"))
        .when(pl.col("gap_end_ns") == pl.col("gap_start_ns"))
        .then(pl.lit("zero_length"))
        .otherwise(pl.lit("no_step_ends_in_gap"))
    )
    membership = _membership(gaps, steps, members)
    return frame.with_columns(
        unjoined=reason,
        between_ns=pl.col("gap_end_ns") - pl.col("gap_start_ns") - pl.col("covered_ns"),
        member_steps=pl.Series(membership[0]) if membership else pl.lit(None, pl.Int64),
        member_ns=pl.Series(membership[1]) if membership else pl.lit(None, pl.Int64),
        member_prefill_only_ns=(pl.Series(membership[2]) if membership else pl.lit(None, pl.Int64)),
    ).drop("_known", "_span_start", "_span_end")
