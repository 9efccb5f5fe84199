"""Read trace files into the canonical event LazyFrame (DESIGN §2).

This is the only module that opens trace files. It resolves paths (a file, a glob or a
directory of parts), scans each with the matching Polars reader, maps user column names,
and normalises the three required columns:

- ``event`` becomes ``pl.Enum(EVENT_KINDS)`` (aliases and ``--event-map`` applied once, on
  the distinct values, never per row);
- ``ts`` becomes Int64 nanoseconds (integers are ns and floats are seconds unless the user
  gives ``--time-unit``; timestamps and durations are exact);
- ``tokens``/``prompt_tokens``/``output_tokens`` become Int64 when present.

Everything stays lazy: the pipeline collects once.
"""

from __future__ import annotations

import glob
import gzip
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from servetrace.errors import InputError, UsageError
from servetrace.schema import (
    EVENT_ALIASES,
    EVENT_DTYPE,
    EVENT_KINDS,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
)
from servetrace.units import TIME_UNITS

SUFFIX_FORMATS: dict[str, str] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "ipc",
    ".ipc": "ipc",
    ".feather": "ipc",
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "ndjson",
    ".ndjson": "ndjson",
    ".json": "ndjson",
}
COUNT_COLUMNS = ("tokens", "prompt_tokens", "output_tokens")


@dataclass(frozen=True)
class IngestOptions:
    """How to read the user's files: column names, time unit, extra event names."""

    columns: Mapping[str, str] = field(default_factory=dict)  # canonical -> file column
    time_unit: str | None = None  # unit of numeric ``ts``; None: ints ns, floats s
    event_map: Mapping[str, str] = field(default_factory=dict)  # file value -> canonical


@dataclass(frozen=True)
class Trace:
    """A lazily scanned trace: canonical events plus where they came from."""

    events: pl.LazyFrame
    inputs: tuple[str, ...]
    files: tuple[str, ...]
    attributes: tuple[str, ...]


def parse_mapping(items: Iterable[str], flag: str) -> dict[str, str]:
    """Parse ``key=value`` flag values (``--column ts=time_ms``) into a dict."""
    mapping: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            example = "enqueue=arrival" if flag == "--event-map" else "ts=time_ms"
            raise UsageError(
                f"{flag} expects KEY=VALUE, got {item!r}",
                hint=f"for example {flag} {example}",
            )
        mapping[key.strip()] = value.strip()
    return mapping


def resolve_paths(inputs: Sequence[str]) -> list[Path]:
    """Expand files, globs and directories of parts into a sorted list of trace files."""
    return [file for file, _ in resolve_parts(inputs)]


def hive_values(part: Path, root: Path) -> dict[str, str]:
    """``key=value`` folders between a directory and one of its parts (hive layout)."""
    values: dict[str, str] = {}
    for folder in part.relative_to(root).parts[:-1]:
        key, sep, value = folder.partition("=")
        if sep and key:
            values[key] = value
    return values


def resolve_parts(inputs: Sequence[str]) -> list[tuple[Path, dict[str, str]]]:
    """Every trace file of the inputs, with the hive partition values of its folders."""
    files: list[tuple[Path, dict[str, str]]] = []
    for text in inputs:
        path = Path(text)
        if any(ch in text for ch in "*?["):
            matches = sorted(Path(p) for p in glob.glob(text, recursive=True))
            matches = [p for p in matches if p.is_file() and _format_of(p)]
            if not matches:
                raise InputError(f"{text}: the pattern matches no trace file")
            files.extend((match, {}) for match in matches)
        elif path.is_dir():
            parts = sorted(p for p in path.rglob("*") if p.is_file() and _format_of(p))
            # Hidden and underscore entries below the directory (_SUCCESS, .crc) are not
            # parts; the directory's own path may contain anything.
            parts = [
                p
                for p in parts
                if not any(s.startswith((".", "_")) for s in p.relative_to(path).parts)
            ]
            if not parts:
                raise InputError(
                    f"{text}: directory holds no trace file",
                    hint="expected .parquet, .arrow, .csv or .jsonl files (or parts of them)",
                )
            files.extend((part, hive_values(part, path)) for part in parts)
        elif path.is_file():
            files.append((path, {}))
        else:
            raise InputError(f"{text}: no such file or directory")
    return files


def _format_of(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return SUFFIX_FORMATS.get(suffixes[-1]) if suffixes else None


def _sniff_format(path: Path) -> str:
    known = _format_of(path)
    if known:
        return known
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1"):
        return "ipc"
    if head.lstrip().startswith(b"{"):
        return "ndjson"
    return "csv"


def _scan_file(path: Path, text_columns: Sequence[str] = ()) -> pl.LazyFrame:
    """Scan one file lazily; raise InputError for anything unreadable.

    ``text_columns`` of a CSV are read as text: a sample-based type guess must not turn
    an id like ``x1`` after 10,000 integer ids, or a fractional timestamp after integer
    ones, into a parse error; ingest decides their types on every value.
    """
    fmt = _sniff_format(path)
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty", hint="a trace needs at least one event row")
    try:
        if fmt == "parquet":
            frame = pl.scan_parquet(path)
        elif fmt == "ipc":
            frame = pl.scan_ipc(path)
        elif fmt == "csv":
            separator = "\t" if ".tsv" in [s.lower() for s in path.suffixes] else ","
            overrides = dict.fromkeys(text_columns, pl.String)
            if path.suffix.lower() == ".gz":
                with gzip.open(path) as handle:
                    data = handle.read()
                frame = pl.read_csv(
                    data,
                    separator=separator,
                    infer_schema_length=10_000,
                    schema_overrides=overrides,
                ).lazy()
            else:
                frame = pl.scan_csv(
                    path,
                    separator=separator,
                    infer_schema_length=10_000,
                    schema_overrides=overrides,
                )
        else:
            frame = _scan_ndjson(path)
        frame.collect_schema()
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as error:
        raise InputError(
            f"{path}: cannot read as {fmt}: {_first_line(error)}",
            hint="is the file complete and in the format its name says?",
        ) from None
    return frame


def _scan_ndjson(path: Path) -> pl.LazyFrame:
    if path.suffix.lower() == ".gz":
        with gzip.open(path, "rb") as handle:
            data = handle.read()
        try:
            return pl.read_ndjson(data).lazy()
        except pl.exceptions.PolarsError:
            _raise_bad_json_line(path, data.splitlines())
            raise
    frame = pl.scan_ndjson(path, infer_schema_length=10_000)
    try:
        # Parse errors surface only when rows are read: check here, so the message can
        # name the line instead of failing deep inside the analysis.
        frame.select(pl.len()).collect()
    except pl.exceptions.PolarsError:
        with open(path, "rb") as handle:
            _raise_bad_json_line(path, handle)
        raise
    return frame


def _raise_bad_json_line(path: Path, lines: Iterable[bytes]) -> None:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}: line {number} is not valid JSON ({error.msg} at column {error.colno})",
                hint="every line of a JSON Lines trace must be one JSON object",
            ) from None
        if not isinstance(record, dict):
            raise InputError(f"{path}: line {number} is not a JSON object")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _rename_columns(frame: pl.LazyFrame, path: Path, options: IngestOptions) -> pl.LazyFrame:
    found = frame.collect_schema().names()
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
        listed = ", ".join(found) if found else "none"
        hint_pairs = " ".join(f"--column {c}=NAME" for c in missing) or "--column KEY=NAME"
        raise InputError(
            f"{path}: " + "; ".join(problems) + f" (found: {listed})",
            hint=f"map them with {hint_pairs}",
        )
    return frame


def _normalise_ts(frame: pl.LazyFrame, path: Path, options: IngestOptions) -> pl.LazyFrame:
    dtype = frame.collect_schema()["ts"]
    unit = options.time_unit
    if unit is not None and unit not in TIME_UNITS:
        raise UsageError(f"--time-unit must be one of {', '.join(TIME_UNITS)}, got {unit!r}")
    ts = pl.col("ts")
    if dtype.is_integer():
        factor = TIME_UNITS[unit or "ns"]
        if factor != 1:
            _check_ns_range(frame, ts.cast(pl.Float64) * factor, path)
        expr = ts.cast(pl.Int64) * factor if factor != 1 else ts.cast(pl.Int64)
    elif dtype.is_float():
        factor = TIME_UNITS[unit or "s"]
        _check_ns_range(frame, ts * factor, path)
        expr = (ts * factor).round(0).cast(pl.Int64)
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
            f"{path}: column 'ts' has type {dtype}, not a number or timestamp",
            hint="map a numeric or timestamp column with --column ts=NAME",
        )
    return frame.with_columns(expr.alias("ts"))


def _check_ns_range(frame: pl.LazyFrame, ns: pl.Expr, path: Path) -> None:
    """Times must fit Int64 nanoseconds (±292 years): never wrap around silently."""
    largest = frame.select(ns.abs().max()).collect().item()
    if largest is not None and largest >= 2**63:
        raise InputError(
            f"{path}: column 'ts' holds {largest:.3g} ns once converted, beyond what a "
            "64-bit nanosecond time can hold",
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
        if unit not in (None, "ns"):
            _check_ns_range(frame, as_int.cast(pl.Float64) * TIME_UNITS[unit], path)
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


def _normalise_event(frame: pl.LazyFrame, path: Path, options: IngestOptions) -> pl.LazyFrame:
    dtype = frame.collect_schema()["event"]
    if dtype == EVENT_DTYPE and not options.event_map:
        return frame
    as_text = pl.col("event").cast(pl.String)
    # The distinct values are few: map them in Python once, then apply as one replace.
    distinct = frame.select(as_text.unique()).collect().to_series().to_list()
    try:
        mapping = event_mapping(distinct, options.event_map)
    except InputError as error:
        raise InputError(f"{path}: {error.message}", hint=error.hint) from None
    if all(raw == kind for raw, kind in mapping.items()):
        expr = as_text.cast(EVENT_DTYPE)
    else:
        expr = as_text.replace_strict(mapping, default=None, return_dtype=EVENT_DTYPE)
    return frame.with_columns(expr.alias("event"))


def _normalise_counts(frame: pl.LazyFrame, path: Path) -> pl.LazyFrame:
    """Token counts become Int64, exactly: a count that is not a whole number that fits
    is an error, never silently truncated or nulled (sign is a lifecycle rule)."""
    schema = frame.collect_schema()
    present = [c for c in COUNT_COLUMNS if c in schema]
    numeric = (pl.Null, pl.String)
    bad_type = [c for c in present if not (schema[c].is_numeric() or schema[c] in numeric)]
    if bad_type:
        raise InputError(
            f"{path}: column {bad_type[0]!r} has type {schema[bad_type[0]]}, "
            "expected a whole number"
        )
    values = {
        c: pl.col(c).str.strip_chars().cast(pl.Float64, strict=False)
        if schema[c] == pl.String
        else pl.col(c).cast(pl.Float64)
        for c in present
        if schema[c]
        not in (pl.Int64, pl.Int32, pl.Int16, pl.Int8, pl.UInt8, pl.UInt16, pl.UInt32, pl.Null)
    }
    if values:
        failures = (
            frame.select(
                (
                    pl.col(c).is_not_null()
                    & (v.is_null() | v.is_nan() | (v != v.floor()) | (v.abs() >= 2.0**63))
                )
                .sum()
                .alias(c)
                for c, v in values.items()
            )
            .collect()
            .row(0, named=True)
        )
        broken = [c for c, n in failures.items() if n]
        if broken:
            raise InputError(
                f"{path}: column {broken[0]!r} holds values that are not whole numbers "
                f"({failures[broken[0]]:,} rows)",
                hint="token counts are integers: tokens >= 1, prompt/output tokens >= 0",
            )
    casts = [
        (
            pl.col(c).str.strip_chars().cast(pl.Float64) if schema[c] == pl.String else pl.col(c)
        ).cast(pl.Int64)
        for c in present
    ]
    return frame.with_columns(casts) if casts else frame


def _normalise_request_id(frame: pl.LazyFrame) -> pl.LazyFrame:
    dtype = frame.collect_schema()["request_id"]
    rid = pl.col("request_id")
    if dtype.is_integer():
        return frame.with_columns(rid.cast(pl.Int64))
    if dtype.is_float():
        # A NaN id is a missing id, not a request called "NaN"; whole floats are integers.
        rid = rid.fill_nan(None)
        return frame.with_columns(
            pl.when(rid == rid.floor())
            .then(rid.cast(pl.Int64).cast(pl.String))
            .otherwise(rid.cast(pl.String))
            .alias("request_id")
        )
    return frame.with_columns(rid.cast(pl.String))


def normalise(
    frame: pl.LazyFrame, label: str | Path, options: IngestOptions | None = None
) -> pl.LazyFrame:
    """Map columns and coerce them to the canonical types; ``label`` names the source."""
    options = options or IngestOptions()
    path = Path(label)
    frame = _rename_columns(frame, path, options)
    frame = _normalise_request_id(frame)
    frame = _normalise_event(frame, path, options)
    frame = _normalise_ts(frame, path, options)
    return _normalise_counts(frame, path)


def scan_file(
    path: Path, options: IngestOptions, partition: Mapping[str, str] | None = None
) -> pl.LazyFrame:
    """One file as canonical events (lazy); ``partition`` adds its hive folder values."""
    text_columns = [options.columns.get(name, name) for name in ("request_id", "ts")]
    frame = _scan_file(path, text_columns)
    if partition:
        present = set(frame.collect_schema().names())
        frame = frame.with_columns(
            pl.lit(value).alias(key) for key, value in partition.items() if key not in present
        )
    return normalise(frame, path, options)


def read_events(inputs: Sequence[str], options: IngestOptions | None = None) -> Trace:
    """Resolve ``inputs`` and scan every file into one canonical event LazyFrame.

    Several files (or the parts of a directory) form one trace: their rows are
    concatenated, so a request may span parts.
    """
    options = options or IngestOptions()
    parts = resolve_parts(inputs)
    files = [path for path, _ in parts]
    frames = [scan_file(path, options, partition) for path, partition in parts]
    if len(frames) == 1:
        events = frames[0]
    else:
        id_types = {f.collect_schema()["request_id"] for f in frames}
        if len(id_types) > 1:
            frames = [f.with_columns(pl.col("request_id").cast(pl.String)) for f in frames]
        try:
            events = pl.concat(frames, how="diagonal_relaxed")
        except pl.exceptions.PolarsError as error:
            raise InputError(
                f"cannot combine {len(files)} files into one trace: {_first_line(error)}",
                hint="are they parts of the same trace with the same columns?",
            ) from None
    names = events.collect_schema().names()
    attributes = tuple(c for c in names if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
    return Trace(
        events=events,
        inputs=tuple(inputs),
        files=tuple(str(f) for f in files),
        attributes=attributes,
    )
