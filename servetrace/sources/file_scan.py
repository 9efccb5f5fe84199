"""One local trace file (Parquet, Arrow IPC, CSV, JSON Lines; text gzip allowed) as a raw
LazyFrame, its failures as one line naming the file.

What a local read and a read of object-store URIs beside local paths (``canonical``)
share: which files are trace files, how each is scanned, and how a Polars error becomes
an ``InputError`` naming the file and, for text, the line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import polars as pl

from servetrace.errors import InputError, first_line
from servetrace.sources import limits, parsed, paths, sniff, textcheck
from servetrace.sources.normalise import IngestOptions
from servetrace.sources.paths import with_partition_columns

_T = TypeVar("_T")

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


def format_of(path: Path) -> str | None:
    """The format a file's name says (``.gz`` looked through), or None: not a trace file."""
    return SUFFIX_FORMATS.get(sniff.suffix(path))


def sniff_format(path: Path) -> str:
    """The format by name, else by the first bytes."""
    known = format_of(path)
    if known:
        return known
    with open(path, "rb") as handle:
        head = handle.read(8)
    return sniff.binary_format(head) or ("ndjson" if head.lstrip().startswith(b"{") else "csv")


def resolve_paths(inputs: Sequence[str]) -> list[Path]:
    """Expand files, globs and directories of parts into a sorted list of trace files."""
    return [file for file, _ in resolve_parts(inputs)]


def resolve_parts(inputs: Sequence[str]) -> list[tuple[Path, dict[str, str]]]:
    """Every trace file of the inputs, once, with the hive partition values of its folders."""
    return paths.resolve_parts(inputs, lambda p: format_of(p) is not None)


def _scan_file(path: Path, text_columns: Sequence[str] = ()) -> pl.LazyFrame:
    """Scan one file lazily; raise InputError for anything unreadable.

    ``text_columns`` of a CSV are read as text: ingest decides their types on every
    value (an id ``x1`` after 10,000 integer ids, a fractional time after integer ones).
    """
    fmt = sniff_format(path)
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty", hint="a trace needs at least one event row")
    # glob=False: the path is one file already resolved, even if named "run[1].parquet".
    if fmt == "parquet":
        return pl.scan_parquet(path, glob=False)
    if fmt == "ipc":
        return pl.scan_ipc(path, glob=False)
    if fmt == "csv":
        return _scan_csv(path, text_columns)
    return _scan_ndjson(path)


def _separator(path: Path) -> str:
    return "\t" if ".tsv" in [s.lower() for s in path.suffixes] else ","


def _scan_csv(path: Path, text_columns: Sequence[str]) -> pl.LazyFrame:
    head = sniff.read_head(path)
    options = {
        "separator": _separator(path),
        "infer_schema_length": None,
        "schema_overrides": dict.fromkeys(text_columns, pl.String),
    }
    if sniff.is_gzip(path) or sniff.cr_only_lines(head):
        data = sniff.read_all(path)
        if sniff.cr_only_lines(head):  # old Mac line ends: Polars splits lines on LF only
            data = data.replace(b"\r", b"\n")
        frame = pl.read_csv(data, **options).lazy()  # type: ignore[arg-type]
    else:
        limits.check_lines(path)
        scan = pl.scan_csv(path, glob=False, **options)  # type: ignore[arg-type]
        frame = parsed.parse_once(scan, path)
    return _drop_blank_lines(frame, text_columns)


def _drop_blank_lines(frame: pl.LazyFrame, key_columns: Sequence[str]) -> pl.LazyFrame:
    """A line with no value at all (the blank line many CSV writers end with) is no row;
    Polars reads it as a row of nulls.

    A horizontal test over every column is pathological on a lazy scan (1,000 columns:
    15 s per query), so only rows whose key columns are all null are candidates, and
    only those few rows are checked across every column, in memory.
    """
    names = frame.collect_schema().names()
    keys = [c for c in key_columns if c in names] or names[:1]
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    candidates = (
        frame.select(row.filter(pl.all_horizontal(pl.col(keys).is_null())).alias("row"))
        .collect()
        .to_series()
    )
    if candidates.is_empty():
        return frame
    rows = frame.filter(row.is_in(candidates.implode())).collect()
    blank = candidates.filter(rows.select(pl.all_horizontal(pl.all().is_null())).to_series())
    if blank.is_empty():
        return frame
    return frame.filter(~row.is_in(blank.implode()))


def _scan_ndjson(path: Path) -> pl.LazyFrame:
    head = sniff.read_head(path, 3)
    # scan_ndjson has no glob=False: a name with glob characters is read from memory.
    if sniff.is_gzip(path) or head.startswith(sniff.UTF8_BOM) or paths.has_magic(str(path)):
        data = sniff.read_all(path).removeprefix(sniff.UTF8_BOM)
        return pl.read_ndjson(data, infer_schema_length=None).lazy()
    limits.check_lines(path)
    return parsed.parse_once(pl.scan_ndjson(path, infer_schema_length=None), path)


def _read_problem(path: Path, error: Exception) -> InputError:
    """The clearest InputError for a file Polars could not read: the line, when the file
    is text and a second look finds it, else Polars' own first line."""
    fmt = sniff_format(path)
    found: InputError | None = None
    try:
        if fmt == "csv":
            found = textcheck.csv_problem(path, sniff.read_all(path), _separator(path))
        elif fmt == "ndjson":
            # bytes.splitlines splits at LF and CR only (as ``reading.json_lines``), never
            # inside a UTF-8 U+2028, so the line numbers are Polars' own.
            found = textcheck.json_lines_problem(path, sniff.read_all(path).splitlines())
    except InputError as unreadable:
        found = unreadable
    return found or InputError(
        f"{path}: cannot read as {fmt}: {first_line(error)}",
        hint="is the file complete and in the format its name says?",
    )


def raw_scan(path: Path, options: IngestOptions, partition: dict[str, str] | None) -> pl.LazyFrame:
    """One file as it is (lazy), with its hive folder values added."""
    text_columns = [options.columns.get(name, name) for name in ("request_id", "ts")]
    return with_partition_columns(_scan_file(path, text_columns), partition or {})


def read_table(path: Path) -> pl.DataFrame:
    """One table file (Parquet, Arrow, CSV, JSON Lines; text gzip allowed) read as it is,
    for the canonical tables other than the event log (engine steps); failures as one line
    naming the file (and, for text, the line)."""
    return guarded(path, lambda: _scan_file(path).collect())


def table_columns(path: Path) -> list[str]:
    """The column names of one table file (Parquet and Arrow from their metadata)."""
    return guarded(path, lambda: _scan_file(path).collect_schema().names())


def row_count(raw: pl.LazyFrame) -> int:
    """Rows of a raw scan: Parquet/IPC metadata, text already parsed."""
    return int(raw.select(pl.len()).collect().item())


def guarded(path: Path, work: Callable[[], _T]) -> _T:
    """``work`` on one file, its failures as one line naming the file."""
    try:
        return work()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    except (pl.exceptions.PolarsError, ValueError) as error:
        raise _read_problem(path, error) from None
