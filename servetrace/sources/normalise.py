"""Map a scanned file's columns onto the canonical schema and coerce their types.

- ``event`` becomes ``pl.Enum(EVENT_KINDS)`` (aliases and ``--event-map`` applied once, on
  the distinct values, never per row);
- ``ts`` becomes Int64 nanoseconds (integers are ns and floats are seconds unless the user
  gives ``--time-unit``; timestamps and durations are exact);
- ``tokens``/``prompt_tokens``/``output_tokens`` become Int64 when present;
- ``request_id`` becomes Int64 when every id is a plain integer (also when a text format
  spells it as text), else text: the same ids in CSV and in Parquet sort the same.

Every value is range-checked: a time must lie within ±2^62 ns of the epoch (±146 years,
so the difference of any two times fits Int64) and a count below 2^32, so no later
arithmetic wraps around. A failure names the file, the row and the column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import polars as pl

from servetrace.dtypes import EVENT_DTYPE
from servetrace.errors import InputError, UsageError
from servetrace.schema import (
    EVENT_ALIASES,
    EVENT_KINDS,
    MAX_COUNT,
    REQUIRED_COLUMNS,
)
from servetrace.sources.ingest_options import COUNT_COLUMNS, IngestOptions
from servetrace.sources.objectstore import named
from servetrace.sources.parquet_stats import IntegerRange
from servetrace.sources.prescan import (
    Prescan,
    broken_counts,
    distinct_events,
    numeric_ns,
    out_of_range,
    prescan,
)
from servetrace.sources.workload_files import (
    per_request_hint,
    records_by_id_error,
    workload_error,
)
from servetrace.units import TIME_UNITS

__all__ = [
    "COUNT_COLUMNS",
    "IngestOptions",
    "Prescan",
    "event_mapping",
    "normalise",
    "normalised",
    "with_event_kinds",
]


def _rename_columns(frame: pl.LazyFrame, path: Path, options: IngestOptions) -> pl.LazyFrame:
    schema = frame.collect_schema()
    found = schema.names()
    # Polars renames a repeated CSV header to NAME_duplicated_N: say so instead.
    repeated = sorted({c.rsplit("_duplicated_", 1)[0] for c in found if "_duplicated_" in c})
    if repeated:
        raise InputError(
            f"{path}: the header names {', '.join(repr(c) for c in repeated)} more than once",
            hint="give every column its own name",
        )
    renames: dict[str, str] = {}
    problems: list[str] = []
    for canonical, source in options.columns.items():
        if source not in found:
            problems.append(f"--column {canonical}={source}: no column {source!r}")
        elif canonical != source:
            renames[source] = canonical
    # A file column that already carries a canonical name and is not the mapping's source
    # would clash with the renamed one: the user's mapping wins.
    clashing = [c for c in renames.values() if c in found and c not in renames]
    frame = frame.drop(clashing).rename(renames)
    names = set(frame.collect_schema().names())
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        problems.append(
            "missing required column"
            + ("s " if len(missing) > 1 else " ")
            + ", ".join(repr(c) for c in missing)
        )
    if problems:
        workload = workload_error(path, found, bool(options.columns))
        if workload is not None:
            raise workload
        records = None if options.columns else records_by_id_error(path, schema, missing)
        if records is not None:
            raise records
        listed = ", ".join(found[:20]) if found else "none"
        if len(found) > 20:  # a JSON object keyed by request id has one "column" per request
            listed += f", … ({len(found):,} in all)"
        hint_pairs = " ".join(f"--column {c}=NAME" for c in missing) or "--column KEY=NAME"
        raise InputError(
            f"{path}: " + "; ".join(problems) + f" (found: {listed})",
            hint=f"map them with {hint_pairs}" + per_request_hint(found, missing),
        )
    return frame


def _normalise_ts(
    frame: pl.LazyFrame, path: Path, options: IngestOptions, known: Prescan | None = None
) -> pl.LazyFrame:
    dtype = frame.collect_schema()["ts"]
    unit = options.time_unit
    if unit is not None and unit not in TIME_UNITS:
        raise UsageError(f"--time-unit must be one of {', '.join(TIME_UNITS)}, got {unit!r}")
    ts = pl.col("ts")
    ns = numeric_ns(dtype, unit)
    if ns is not None and not (known and known.ts_ok):
        _check_ns_range(frame, ns, path)
    if dtype.is_integer():
        factor = TIME_UNITS[unit or "ns"]
        expr = ts.cast(pl.Int64) * factor if factor != 1 else ts.cast(pl.Int64)
    elif dtype.is_float():
        expr = (ts * TIME_UNITS[unit or "s"]).round(0).cast(pl.Int64)
    elif isinstance(dtype, pl.Datetime):
        expr = ts.dt.epoch("ns")
    elif isinstance(dtype, pl.Duration):
        expr = ts.dt.total_nanoseconds()
    elif dtype == pl.String:
        expr = _parse_text_ts(frame, path, unit)
    elif dtype == pl.Null:
        expr = ts.cast(pl.Int64)
    else:
        raise InputError(
            f"{path}: {_first_row_with(frame, ts.is_not_null())}column 'ts' has type "
            f"{dtype}, not a number or timestamp",
            hint="map a numeric or timestamp column with --column ts=NAME",
        )
    return frame.with_columns(expr.alias("ts"))


def _first_row_with(frame: pl.LazyFrame, condition: pl.Expr) -> str:
    """``"row N: "`` for the first row (1-based, in file order) where ``condition`` holds."""
    found = (
        frame.select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).filter(condition).first())
        .collect()
        .item()
    )
    return "" if found is None else f"row {found:,}: "


def _check_ns_range(frame: pl.LazyFrame, ns: pl.Expr, path: Path) -> None:
    """Times must lie within ±2^62 ns (MAX_ABS_NS): never wrap around silently."""
    bad = out_of_range(ns)
    found = (
        frame.select(
            pl.int_range(1, pl.len() + 1, dtype=pl.Int64).filter(bad).first(),
            ns.filter(bad).first(),
        )
        .collect()
        .row(0)
    )
    if found[0] is not None:
        raise InputError(
            f"{path}: row {found[0]:,}: column 'ts' is {found[1]:.4g} ns once converted, "
            "beyond the ±4.6e18 ns (±146 years around 1970) a time may span",
            hint="is --time-unit right? (integers are ns, floats are s by default)",
        )


def _parse_text_ts(frame: pl.LazyFrame, path: Path, unit: str | None) -> pl.Expr:
    """Text timestamps (CSV, JSON) must all be numbers, or all date-times."""
    text = pl.col("ts").str.strip_chars()
    as_int = text.cast(pl.Int64, strict=False)
    as_float = text.cast(pl.Float64, strict=False)
    # Naive date-times are taken as UTC; RFC 3339 offsets ("Z", "+02:00") are honoured.
    as_time = text.str.to_datetime(time_unit="ns", time_zone="UTC", strict=False)
    present = pl.col("ts").is_not_null()
    counts = (
        frame.select(
            (present & as_int.is_null()).sum().alias("not_int"),
            (present & as_float.is_null()).sum().alias("not_float"),
            (present & as_time.is_null()).sum().alias("not_time"),
        )
        .collect()
        .row(0, named=True)
    )
    if counts["not_int"] == 0:
        _check_ns_range(frame, as_int.cast(pl.Float64) * TIME_UNITS[unit or "ns"], path)
        return as_int * TIME_UNITS[unit or "ns"]
    if counts["not_float"] == 0:
        _check_ns_range(frame, as_float * TIME_UNITS[unit or "s"], path)
        return (as_float * TIME_UNITS[unit or "s"]).round(0).cast(pl.Int64)
    if counts["not_time"] == 0:
        return as_time.dt.epoch("ns")
    bad = (
        frame.filter(present & as_float.is_null() & as_time.is_null())
        .select("ts")
        .head(3)
        .collect()
    )
    examples = ", ".join(repr(v) for v in bad["ts"].to_list())
    raise InputError(
        f"{path}: column 'ts' holds text that is not a time (e.g. {examples})",
        hint="timestamps must be numbers (ns, or seconds for floats) or ISO date-times; "
        "map the right column with --column ts=NAME",
    )


def event_mapping(values: Iterable[str | None], extra: Mapping[str, str]) -> dict[str, str]:
    """Map every distinct raw event value to a canonical kind, or raise listing unknowns."""
    user = {k.strip().lower(): v.strip().lower() for k, v in extra.items()}
    bad_targets = sorted({v for v in user.values() if v not in EVENT_KINDS})
    if bad_targets:
        raise UsageError(
            f"--event-map targets must be event kinds, got {', '.join(bad_targets)}",
            hint="kinds: " + ", ".join(EVENT_KINDS),
        )
    mapping: dict[str, str] = {}
    unknown: list[str] = []
    for raw in values:
        if raw is None:
            continue
        key = raw.strip().lower()
        kind = user.get(key) or (key if key in EVENT_KINDS else EVENT_ALIASES.get(key))
        if kind is None:
            unknown.append(raw)
        else:
            mapping[raw] = kind
    if unknown:
        shown = ", ".join(repr(u) for u in sorted(unknown)[:8])
        more = f" and {len(unknown) - 8} more" if len(unknown) > 8 else ""
        raise InputError(
            f"unknown event name{'s' if len(unknown) > 1 else ''} {shown}{more}",
            hint=f"map them with --event-map NAME=KIND (kinds: {', '.join(EVENT_KINDS)})",
        )
    return mapping


def _require_scalar(frame: pl.LazyFrame, path: Path, column: str, expected: str) -> None:
    """A nested column (a list or an object per row) is not one value per event."""
    dtype = frame.collect_schema()[column]
    if dtype.is_nested() or isinstance(dtype, (pl.Object, pl.Binary)):
        row = _first_row_with(frame, pl.col(column).is_not_null())
        raise InputError(
            f"{path}: {row}column {column!r} holds {dtype} values, expected {expected}",
            hint=f"map a column with one {expected} per row with --column {column}=NAME",
        )


def _normalise_event(
    frame: pl.LazyFrame, path: Path, options: IngestOptions, known: Prescan | None = None
) -> pl.LazyFrame:
    dtype = frame.collect_schema()["event"]
    if dtype == EVENT_DTYPE and not options.event_map:
        return frame
    _require_scalar(frame, path, "event", "text")
    as_text = pl.col("event").cast(pl.String)
    # The distinct values are few: map them in Python once, then apply as one replace.
    if known is not None and known.events is not None:
        distinct = known.events
    else:
        distinct = frame.select(distinct_events(dtype)).collect().to_series().to_list()
    try:
        mapping = event_mapping(distinct, options.event_map)
    except InputError as error:
        raise InputError(f"{path}: {error.message}", hint=error.hint) from None
    if all(raw == kind for raw, kind in mapping.items()):
        # A dictionary column (Parquet/Arrow) casts by its categories, not per row.
        coded = isinstance(dtype, (pl.Categorical, pl.Enum))
        expr = (pl.col("event") if coded else as_text).cast(EVENT_DTYPE)
    else:
        expr = as_text.replace_strict(mapping, default=None, return_dtype=EVENT_DTYPE)
    return frame.with_columns(expr.alias("event"))


def with_event_kinds(frame: pl.DataFrame, options: IngestOptions) -> pl.DataFrame:
    """A decoded frame whose ``event`` text holds only canonical kinds, with the column
    cast to the Enum in one pass; any other frame as it is, for ``_normalise_event`` to map
    or name its values from the distinct ones. One cast instead of a pass for the distinct
    values and then the cast: at 10⁷ rows of text each pass costs ≈ 0.1 s."""
    source = options.columns.get("event", "event")
    dtype = frame.schema.get(source)
    if options.event_map or not (dtype == pl.String or isinstance(dtype, pl.Categorical)):
        return frame
    try:
        return frame.with_columns(pl.col(source).cast(EVENT_DTYPE))
    except pl.exceptions.PolarsError:  # an alias, an unknown value: mapped or named later
        return frame


def _normalise_counts(
    frame: pl.LazyFrame, path: Path, known: Prescan | None = None
) -> pl.LazyFrame:
    """Token counts become Int64, exactly: a count that is not a whole number below
    MAX_COUNT is an error naming its row, never truncated, nulled or wrapped (the sign is
    a lifecycle rule)."""
    schema = frame.collect_schema()
    present = [c for c in COUNT_COLUMNS if c in schema and schema[c] != pl.Null]
    bad_type = [c for c in present if not (schema[c].is_numeric() or schema[c] == pl.String)]
    if bad_type:
        column = bad_type[0]
        row = _first_row_with(frame, pl.col(column).is_not_null())
        raise InputError(
            f"{path}: {row}column {column!r} has type {schema[column]}, expected a whole number"
        )
    broken = broken_counts(schema)
    if broken and not (known and known.counts_ok):
        rows = pl.int_range(1, pl.len() + 1, dtype=pl.Int64)
        first = (
            frame.select(rows.filter(bad).first().alias(c) for c, bad in broken.items())
            .collect()
            .row(0, named=True)
        )
        failing = [(row, c) for c, row in first.items() if row is not None]
        if failing:
            row, column = min(failing)
            value = frame.select(pl.col(column).cast(pl.String)).slice(row - 1, 1).collect().item()
            raise InputError(
                f"{path}: row {row:,}: column {column!r} is {value!r}, not a whole number "
                f"below {MAX_COUNT:,}",
                hint="token counts are integers: tokens >= 1, prompt/output tokens >= 0",
            )
    casts = [
        (
            pl.col(c).str.strip_chars().cast(pl.Float64) if schema[c] == pl.String else pl.col(c)
        ).cast(pl.Int64)
        for c in COUNT_COLUMNS
        if c in schema  # an all-null column (JSON infers Null) becomes Int64 too
    ]
    return frame.with_columns(casts) if casts else frame


# Ids that are plain decimal integers (no sign on zero, no leading zeros, fit Int64).
_INTEGER_ID = r"^(0|-?[1-9][0-9]{0,17})$"


def _normalise_request_id(frame: pl.LazyFrame, path: Path) -> pl.LazyFrame:
    """Ids become Int64 when every one is a plain integer, whatever the file's type for
    them (CSV text, JSON numbers, Parquet ints), else text; so the same ids sort (and
    break ties) the same in every format."""
    dtype = frame.collect_schema()["request_id"]
    rid = pl.col("request_id")
    if dtype in (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32):
        return frame.with_columns(rid.cast(pl.Int64))
    _require_scalar(frame, path, "request_id", "text or an integer")
    if dtype.is_float():
        # A NaN id is a missing id, not a request called "NaN"; whole floats are integers.
        rid = rid.fill_nan(None)
        text = (
            pl.when((rid == rid.floor()) & (rid.abs() < 2.0**63))
            .then(rid.cast(pl.Int64).cast(pl.String))
            .otherwise(rid.cast(pl.String))
        )
    else:  # text, or integers beyond Int64 (UInt64, JSON's Int128): kept exact as text
        text = rid.cast(pl.String)
    integral = frame.select((text.is_null() | text.str.contains(_INTEGER_ID)).all()).collect()
    if integral.item():
        return frame.with_columns(text.cast(pl.Int64).alias("request_id"))
    return frame.with_columns(text.alias("request_id"))


def normalise(
    frame: pl.LazyFrame,
    label: str | Path,
    options: IngestOptions | None = None,
    ranges: Mapping[str, IntegerRange] | None = None,
) -> pl.LazyFrame:
    """Map columns and coerce them to the canonical types; ``label`` names the source,
    ``ranges`` what its Parquet footer says of its integer columns (``parquet_stats``)."""
    return normalised(frame, label, options, ranges)[0]


def normalised(
    frame: pl.LazyFrame,
    label: str | Path,
    options: IngestOptions | None = None,
    ranges: Mapping[str, IntegerRange] | None = None,
) -> tuple[pl.LazyFrame, Prescan]:
    """``normalise``, and what its checks found (``footer_facts`` reads it)."""
    options = options or IngestOptions()
    path = named(label) if isinstance(label, str) else Path(label)  # a URI keeps its //
    frame = _rename_columns(frame, path, options)
    frame = _normalise_request_id(frame, path)
    known = prescan(frame, options, ranges)
    frame = _normalise_event(frame, path, options, known)
    frame = _normalise_ts(frame, path, options, known)
    return _normalise_counts(frame, path, known), known
