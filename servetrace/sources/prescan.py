"""The ingest value checks in ONE pass over the raw columns (``prescan``), and the
expressions they share with ``normalise``, which runs a failed check again on its own to
name the first bad row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from servetrace.dtypes import EVENT_DTYPE
from servetrace.schema import MAX_ABS_NS, MAX_COUNT
from servetrace.sources.ingest_options import COUNT_COLUMNS, IngestOptions
from servetrace.sources.parquet_stats import IntegerRange, scaled_within, strictly_within
from servetrace.units import TIME_UNITS


def numeric_ns(dtype: pl.DataType, unit: str | None) -> pl.Expr | None:
    """``ts`` in ns as Float64, for the range check; None for text and other types.

    Checked in Float64 before the Int64 product: JSON gives Int128 for 2^70, and ms x 1e6
    can wrap; either would otherwise turn into a plausible-looking time."""
    ts = pl.col("ts")
    if dtype.is_integer():
        return ts.cast(pl.Float64) * TIME_UNITS[unit or "ns"]
    if dtype.is_float():
        return ts * TIME_UNITS[unit or "s"]
    if isinstance(dtype, pl.Datetime):
        return ts.dt.epoch("us").cast(pl.Float64) * 1_000
    if isinstance(dtype, pl.Duration):
        return ts.dt.total_microseconds().cast(pl.Float64) * 1_000
    return None


def out_of_range(ns: pl.Expr) -> pl.Expr:
    return ns.is_not_null() & (ns.is_nan() | (ns.abs() >= MAX_ABS_NS))


def distinct_events(dtype: pl.DataType) -> pl.Expr:
    """The distinct event values as text; a dictionary column's from its codes (a tenth of
    the cost of turning 10^7 rows into text first)."""
    event = pl.col("event")
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        return event.unique().cast(pl.String)
    return event.cast(pl.String).unique()


def broken_counts(schema: pl.Schema) -> dict[str, pl.Expr]:
    """Per count column (numeric or text), the rows that are not a whole number below
    MAX_COUNT."""
    present = [c for c in COUNT_COLUMNS if c in schema and schema[c] != pl.Null]
    # Integers are whole and never NaN: only their size can be wrong (one comparison per
    # row instead of five over a float copy).
    integers = {
        c: pl.col(c).is_not_null() & ((pl.col(c) >= MAX_COUNT) | (pl.col(c) <= -MAX_COUNT))
        for c in present
        if schema[c].is_integer()
    }
    values = {
        c: pl.col(c).str.strip_chars().cast(pl.Float64, strict=False)
        if schema[c] == pl.String
        else pl.col(c).cast(pl.Float64)
        for c in present
        if (schema[c].is_numeric() and not schema[c].is_integer()) or schema[c] == pl.String
    }
    broken = {
        c: pl.col(c).is_not_null()
        & (v.is_null() | v.is_nan() | (v != v.floor()) | (v.abs() >= MAX_COUNT))
        for c, v in values.items()
    }
    checks = {**integers, **broken}
    return {c: checks[c] for c in present if c in checks}  # in column order


@dataclass(frozen=True)
class Prescan:
    """What the value checks need, from ONE pass over the raw columns: the distinct event
    values (None: not asked), and whether every time and every count is in range (False:
    not known, so the check runs on its own and names the first bad row)."""

    events: list[str | None] | None = None
    ts_ok: bool = False
    counts_ok: bool = False


def prescan(
    frame: pl.LazyFrame, options: IngestOptions, ranges: Mapping[str, IntegerRange] | None = None
) -> Prescan:
    """The three ingest checks (distinct events, time range, counts) without a check per
    query each: each used to read the whole file again. ``ranges`` (a Parquet footer's
    statistics, ``parquet_stats``) answer the range checks of integer columns without
    reading a row; the distinct events and the rest are two queries on the streaming
    engine, which holds a row group at a time (one in-memory query of all of them held
    1.6 GB at 10⁸ events). Only a failed check is looked at again, by its own query, to
    find the row it names."""
    ranges = ranges or {}
    schema = frame.collect_schema()
    event = schema["event"]
    scalar = not (event.is_nested() or isinstance(event, (pl.Object, pl.Binary)))
    events: list[str | None] | None = None
    if scalar and (event != EVENT_DTYPE or options.event_map):
        # Not imploded: an imploded unique is not bounded on the streaming engine (1.7 GB
        # at 10⁸ rows); a plain one is (0.2 GB).
        try:
            distinct = frame.select(distinct_events(event)).collect(engine="streaming")
            events = distinct.to_series().to_list()
        except pl.exceptions.PolarsError:
            events = None  # _normalise_event queries on its own and says what is wrong
    checks: dict[str, pl.Expr] = {}
    unit = options.time_unit
    ns = numeric_ns(schema["ts"], unit) if unit is None or unit in TIME_UNITS else None
    ts_ok = False
    if ns is not None and schema["ts"].is_integer() and "ts" in ranges:
        ts_ok = scaled_within(ranges["ts"], TIME_UNITS[unit or "ns"], MAX_ABS_NS)
    elif ns is not None:
        checks["ts_bad"] = out_of_range(ns).any()
    broken = broken_counts(schema)
    stated = {c for c in broken if schema[c].is_integer() and c in ranges}
    counts_ok = all(strictly_within(ranges[c], MAX_COUNT) for c in stated)
    rest = [bad for c, bad in broken.items() if c not in stated]
    if rest and counts_ok:
        checks["counts_bad"] = pl.any_horizontal(bad.any() for bad in rest)
    if checks:
        found = _streamed(frame.select(**checks))
        if found is None:
            return Prescan(events=events)  # each check queries on its own, naming the row
        answers = dict(zip(checks, found, strict=True))
        ts_ok = ts_ok or answers.get("ts_bad") is False
        counts_ok = counts_ok and answers.get("counts_bad", False) is False
    return Prescan(events=events, ts_ok=ts_ok, counts_ok=counts_ok and bool(broken))


def decoded_ranges(frame: pl.DataFrame, options: IngestOptions) -> dict[str, IntegerRange]:
    """The range of an integer ``ts`` column of a decoded frame, as a Parquet footer would
    state it: its minimum and maximum answer the time-range check exactly, for a fifth of
    the check's cost on every row in floating point."""
    source = options.columns.get("ts", "ts")
    dtype = frame.schema.get(source)
    if dtype is None or not dtype.is_integer():
        return {}
    column = pl.col(source)
    low, high = frame.select(column.min().alias("low"), column.max().alias("high")).row(0)
    return {"ts": IntegerRange(low, high, frame[source].null_count())}


def _streamed(query: pl.LazyFrame) -> tuple[Any, ...] | None:
    """The one row of an aggregate ``query``, on the streaming engine; None when Polars
    fails (a check on its own then reports what is wrong)."""
    try:
        return query.collect(engine="streaming").row(0)
    except pl.exceptions.PolarsError:
        return None
