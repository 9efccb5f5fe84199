"""``read_events`` for inputs that name object-store URIs (``sources/objectstore.py``).

The same steps as a local read (``canonical.read_events``), object by object: list what
each URI names, count rows from the footers, scan each object through pyarrow, normalise
it under its URI, then one trace of all of them. Local paths given beside URIs are read
as locally, so ``trace.parquet s3://bucket/more/`` is one trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import polars as pl

from servetrace.sources import objectstore
from servetrace.sources.file_scan import format_of, guarded, raw_scan, resolve_parts, row_count
from servetrace.sources.normalise import IngestOptions
from servetrace.sources.trace import Trace, assemble, canonical_events


def is_trace_object(relative: str) -> bool:
    """What a prefix or a glob contributes: the objects a local read takes by name."""
    return format_of(Path(relative)) is not None


def _object(part: objectstore.Part) -> tuple[str, pl.LazyFrame, int]:
    return (part.uri, *objectstore.scan(part))


def _local(
    path: Path, hive: dict[str, str], options: IngestOptions
) -> tuple[str, pl.LazyFrame, int]:
    raw = guarded(path, partial(raw_scan, path, options, hive))
    return str(path), raw, guarded(path, partial(row_count, raw))


def read_uri_events(
    inputs: Sequence[str], options: IngestOptions, load_below: int | None = None
) -> Trace:
    """One trace of every object (and local file) the inputs name."""
    sources: list[tuple[str, pl.LazyFrame, int]] = []
    for text in inputs:
        if objectstore.is_uri(text):
            parts = objectstore.resolve_parts(text, is_trace_object)
            sources += [_object(part) for part in parts]
        else:
            sources += [_local(p, h, options) for p, h in resolve_parts([text])]
    load = load_below is not None and sum(rows for _, _, rows in sources) < load_below
    frames = [_canonical(uri, raw, options, load) for uri, raw, _ in sources]
    return assemble(inputs, [uri for uri, _, _ in sources], frames, load)


def _canonical(uri: str, raw: pl.LazyFrame, options: IngestOptions, load: bool) -> pl.LazyFrame:
    """One source's canonical events, its failures named by the URI (or the local path)."""
    label = objectstore.named(uri)

    def work() -> pl.LazyFrame:
        return canonical_events(raw, label, options, load)[0]

    if objectstore.is_uri(uri):
        return objectstore.guarded(uri, work)
    return guarded(label, work)
