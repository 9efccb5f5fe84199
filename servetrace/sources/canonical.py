"""Read trace files into the canonical event LazyFrame (DESIGN §2).

This is the only module that opens trace files. It resolves paths (a file, a glob or a
directory of parts: ``sources/paths.py``), scans each with the matching Polars reader, and
normalises the columns (``sources/normalise.py``).

Every reader sees every row before it decides a column's type (``infer_schema_length=
None``): a key that first appears on line 10,501 of a JSON Lines log, or an id that turns
into text after line 10,000, is read as in Parquet, never dropped or refused late. Any
Polars error while reading becomes an ``InputError`` naming the file (and, for text, the
line), so nothing escapes ``read_events`` as an internal error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import polars as pl

from servetrace.errors import InputError, UsageError, first_line
from servetrace.schema import OPTIONAL_COLUMNS, REQUIRED_COLUMNS
from servetrace.sources import parsed, paths, sniff, textcheck
from servetrace.sources.footer_facts import FileFacts, combined, file_facts
from servetrace.sources.normalise import (
    COUNT_COLUMNS,
    IngestOptions,
    Prescan,
    event_mapping,
    normalise,
    normalised,
    with_event_kinds,
)
from servetrace.sources.objectstore import is_uri
from servetrace.sources.parquet_stats import IntegerRange, integer_ranges
from servetrace.sources.paths import hive_values, with_partition_columns
from servetrace.sources.prescan import decoded_ranges

_T = TypeVar("_T")

__all__ = [
    "COUNT_COLUMNS",
    "IngestOptions",
    "Trace",
    "event_mapping",
    "hive_values",
    "normalise",
    "parse_mapping",
    "read_events",
    "resolve_parts",
    "resolve_paths",
    "scan_file",
]

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


# Below this size a Parquet file's checks read its rows: importing pyarrow.parquet for
# its footer (0.14 s, 40 MB) costs more than the checks of ~10⁶ rows, and the start-up
# of a small analysis is what a CI job feels.
FOOTER_MIN_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Trace:
    """A lazily scanned trace: canonical events plus where they came from."""

    events: pl.LazyFrame
    inputs: tuple[str, ...]
    files: tuple[str, ...]
    attributes: tuple[str, ...]
    loaded: bool = False  # decoded and held in memory (read_events' load_below)
    # The span and event kinds of ``footer_of`` known without a scan (``footer_facts``);
    # read them through ``known_facts``, which drops them once ``events`` is replaced.
    footer: FileFacts | None = field(default=None, compare=False, repr=False)
    footer_of: pl.LazyFrame | None = field(default=None, compare=False, repr=False)

    def known_facts(self) -> FileFacts | None:
        """The whole trace's facts from ingest, if known for these very ``events``."""
        return self.footer if self.footer_of is self.events else None


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


def resolve_parts(inputs: Sequence[str]) -> list[tuple[Path, dict[str, str]]]:
    """Every trace file of the inputs, once, with the hive partition values of its folders."""
    return paths.resolve_parts(inputs, lambda p: _format_of(p) is not None)


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

    ``text_columns`` of a CSV are read as text: ingest decides their types on every
    value (an id ``x1`` after 10,000 integer ids, a fractional time after integer ones).
    """
    fmt = _sniff_format(path)
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
    if sniff.is_gzip(path) or sniff.has_bom(head) or paths.has_magic(str(path)):
        data = sniff.read_all(path).removeprefix(sniff.UTF8_BOM)
        return pl.read_ndjson(data, infer_schema_length=None).lazy()
    return parsed.parse_once(pl.scan_ndjson(path, infer_schema_length=None), path)


def _read_problem(path: Path, error: Exception) -> InputError:
    """The clearest InputError for a file Polars could not read: the line, when the file
    is text and a second look finds it, else Polars' own first line."""
    fmt = _sniff_format(path)
    found: InputError | None = None
    try:
        if fmt == "csv":
            found = textcheck.csv_problem(path, sniff.read_all(path), _separator(path))
        elif fmt == "ndjson":
            found = textcheck.json_lines_problem(path, sniff.read_all(path).splitlines())
    except InputError as unreadable:
        found = unreadable
    return found or InputError(
        f"{path}: cannot read as {fmt}: {first_line(error)}",
        hint="is the file complete and in the format its name says?",
    )


def _raw_scan(path: Path, options: IngestOptions, partition: dict[str, str] | None) -> pl.LazyFrame:
    """One file as it is (lazy), with its hive folder values added."""
    text_columns = [options.columns.get(name, name) for name in ("request_id", "ts")]
    return with_partition_columns(_scan_file(path, text_columns), partition or {})


def _canonical(
    raw: pl.LazyFrame, path: Path, options: IngestOptions, load: bool
) -> tuple[pl.LazyFrame, FileFacts | None]:
    """``raw`` as canonical events: lazily, or (``load``) decoded once and held, the ingest
    checks and the normalisation run on the decoded columns (lazily, the checks read the
    file once more); with the facts of its rows when ingest knows them (``footer_facts``)."""
    # Decoded anyway (``load``): the checks on the decoded columns cost less than
    # importing pyarrow.parquet to read the footer (0.14 s, 40 MB).
    ranges = {} if load else footer_ranges(path, options)
    frame, known = canonical_events(raw, path, options, load, ranges)
    return frame, file_facts(path, options, ranges, known) if ranges else None


def canonical_events(
    raw: pl.LazyFrame,
    label: str | Path,
    options: IngestOptions,
    load: bool,
    ranges: Mapping[str, IntegerRange] | None = None,
) -> tuple[pl.LazyFrame, Prescan]:
    """``raw`` normalised: lazily (with a footer's ``ranges``), or (``load``) decoded once
    and held, the checks run on the decoded columns; with what the checks found."""
    if not load:
        return normalised(raw, label, options, ranges)
    decoded = with_event_kinds(raw.collect(), options)
    frame, known = normalised(decoded.lazy(), label, options, decoded_ranges(decoded, options))
    return frame.collect().lazy(), known


def footer_ranges(path: Path, options: IngestOptions) -> dict[str, IntegerRange]:
    """What a Parquet file's footer says of its integer time and count columns (nothing
    for other formats): the ingest range checks then read no row (``parquet_stats``)."""
    if _sniff_format(path) != "parquet" or path.stat().st_size < FOOTER_MIN_BYTES:
        return {}
    names = ("ts", *COUNT_COLUMNS)
    return integer_ranges(path, {name: options.columns.get(name, name) for name in names})


def _guarded(path: Path, work: Callable[[], _T]) -> _T:
    """``work`` on one file, its failures as one line naming the file."""
    try:
        return work()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    except (pl.exceptions.PolarsError, ValueError) as error:
        raise _read_problem(path, error) from None


def scan_file(
    path: Path, options: IngestOptions, partition: dict[str, str] | None = None
) -> pl.LazyFrame:
    """One file as canonical events (lazy); ``partition`` adds its hive folder values.

    Text files are parsed once in full here (``parsed``), so a broken line is reported
    now, naming the line, rather than deep inside the analysis.
    """
    return _guarded(
        path,
        lambda: normalise(
            _raw_scan(path, options, partition), path, options, footer_ranges(path, options)
        ),
    )


def _row_count(raw: pl.LazyFrame) -> int:
    """Rows of a raw scan: Parquet/IPC metadata, text already parsed."""
    return int(raw.select(pl.len()).collect().item())


def read_events(
    inputs: Sequence[str], options: IngestOptions | None = None, *, load_below: int | None = None
) -> Trace:
    """Resolve ``inputs`` and scan every file into one canonical event LazyFrame.

    Several files (or the parts of a directory) form one trace: their rows are
    concatenated, so a request may span parts. ``load_below``: a trace of fewer rows is
    decoded once and held in memory (``Trace.loaded``), for the in-memory engine.
    """
    options = options or IngestOptions()
    if any(is_uri(text) for text in inputs):  # s3://, gs://…: read through pyarrow.fs
        from servetrace.sources.uri_trace import read_uri_events

        return read_uri_events(inputs, options, load_below)
    parts = resolve_parts(inputs)
    files = [path for path, _ in parts]
    # A list, not a dict by path: a file named twice is read twice, as before.
    raws = [(path, _guarded(path, partial(_raw_scan, path, options, hive))) for path, hive in parts]
    load = load_below is not None and (
        sum(_guarded(path, partial(_row_count, raw)) for path, raw in raws) < load_below
    )
    read = [_guarded(path, partial(_canonical, raw, path, options, load)) for path, raw in raws]
    footer = combined([facts for _, facts in read])
    return assemble(inputs, [str(f) for f in files], [frame for frame, _ in read], load, footer)


def assemble(
    inputs: Sequence[str],
    files: Sequence[str],
    frames: list[pl.LazyFrame],
    load: bool,
    footer: FileFacts | None = None,
) -> Trace:
    """The canonical frames of every file as one trace (ids unified to text if they differ);
    ``footer``: what ingest knows of their rows without a scan (``footer_facts``)."""
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
                f"cannot combine {len(files)} files into one trace: {first_line(error)}",
                hint="are they parts of the same trace with the same columns?",
            ) from None
    names = events.collect_schema().names()
    canonical = set(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)  # a set: 100k columns stay linear
    attributes = tuple(c for c in names if c not in canonical)
    return Trace(
        events=events,
        inputs=tuple(inputs),
        files=tuple(files),
        attributes=attributes,
        loaded=load,
        footer=footer,
        footer_of=events,
    )
