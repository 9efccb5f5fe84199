"""Read trace files into the canonical event LazyFrame (DESIGN §2).

This is the only module that reads trace files into a ``Trace``. It resolves paths (a file,
a glob or a directory of parts: ``sources/paths.py``), scans each with the matching Polars
reader (``sources/file_scan.py``), and normalises the columns (``sources/normalise.py``);
inputs that name object-store URIs are read object by object through pyarrow
(``sources/objectstore.py``), local paths beside them as locally, one trace of all.

Every reader sees every row before it decides a column's type (``infer_schema_length=
None``): a key that first appears on line 10,501 of a JSON Lines log, or an id that turns
into text after line 10,000, is read as in Parquet, never dropped or refused late. Any
Polars error while reading becomes an ``InputError`` naming the file (and, for text, the
line), so nothing escapes ``read_events`` as an internal error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

import polars as pl

from servetrace.errors import UsageError
from servetrace.sources import objectstore
from servetrace.sources.file_scan import (
    format_of,
    guarded,
    raw_scan,
    resolve_parts,
    row_count,
    sniff_format,
)
from servetrace.sources.footer_facts import FileFacts, combined, file_facts
from servetrace.sources.normalise import (
    COUNT_COLUMNS,
    IngestOptions,
    event_mapping,
    normalise,
)
from servetrace.sources.objectstore import is_uri
from servetrace.sources.parquet_stats import IntegerRange, integer_ranges
from servetrace.sources.paths import hive_values
from servetrace.sources.trace import Trace, assemble, canonical_events

__all__ = [
    "COUNT_COLUMNS",
    "IngestOptions",
    "event_mapping",
    "hive_values",
    "normalise",
    "parse_mapping",
    "read_events",
    "scan_file",
]


# Below this size a Parquet file's checks read its rows: importing pyarrow.parquet for
# its footer (0.14 s, 40 MB) costs more than the checks of ~10⁶ rows, and the start-up
# of a small analysis is what a CI job feels.
FOOTER_MIN_BYTES = 16 * 2**20


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


def footer_ranges(path: Path, options: IngestOptions) -> dict[str, IntegerRange]:
    """What a Parquet file's footer says of its integer time and count columns (nothing
    for other formats): the ingest range checks then read no row (``parquet_stats``)."""
    if sniff_format(path) != "parquet" or path.stat().st_size < FOOTER_MIN_BYTES:
        return {}
    names = ("ts", *COUNT_COLUMNS)
    return integer_ranges(path, {name: options.columns.get(name, name) for name in names})


def scan_file(
    path: Path, options: IngestOptions, partition: dict[str, str] | None = None
) -> pl.LazyFrame:
    """One file as canonical events (lazy); ``partition`` adds its hive folder values.

    Text files are parsed once in full here (``parsed``), so a broken line is reported
    now, naming the line, rather than deep inside the analysis.
    """
    return guarded(
        path,
        lambda: normalise(
            raw_scan(path, options, partition), path, options, footer_ranges(path, options)
        ),
    )


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
        return _read_uri_events(inputs, options, load_below)
    parts = resolve_parts(inputs)
    files = [path for path, _ in parts]
    # A list, not a dict by path: a file named twice is read twice, as before.
    raws = [(path, guarded(path, partial(raw_scan, path, options, hive))) for path, hive in parts]
    load = load_below is not None and (
        sum(guarded(path, partial(row_count, raw)) for path, raw in raws) < load_below
    )
    read = [guarded(path, partial(_canonical, raw, path, options, load)) for path, raw in raws]
    footer = combined([facts for _, facts in read])
    return assemble(inputs, [str(f) for f in files], [frame for frame, _ in read], load, footer)


def _read_uri_events(
    inputs: Sequence[str], options: IngestOptions, load_below: int | None = None
) -> Trace:
    """One trace of every object (and local file) the inputs name: the steps of a local
    read, object by object; rows are counted from the footers."""
    sources: list[tuple[str, pl.LazyFrame, int]] = []
    for text in inputs:
        if is_uri(text):
            parts = objectstore.resolve_parts(text, lambda key: format_of(Path(key)) is not None)
            sources += [(part.uri, *objectstore.scan(part)) for part in parts]
            continue
        for path, hive in resolve_parts([text]):
            raw = guarded(path, partial(raw_scan, path, options, hive))
            sources.append((str(path), raw, guarded(path, partial(row_count, raw))))
    load = load_below is not None and sum(rows for _, _, rows in sources) < load_below
    frames = [_uri_canonical(name, raw, options, load) for name, raw, _ in sources]
    return assemble(inputs, [name for name, _, _ in sources], frames, load)


def _uri_canonical(
    name: str, raw: pl.LazyFrame, options: IngestOptions, load: bool
) -> pl.LazyFrame:
    """One source's canonical events, its failures named by the URI (or the local path)."""
    label = objectstore.named(name)

    def work() -> pl.LazyFrame:
        return canonical_events(raw, label, options, load)[0]

    return objectstore.guarded(name, work) if is_uri(name) else guarded(label, work)
