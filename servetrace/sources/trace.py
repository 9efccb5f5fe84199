"""The canonical trace a read produces (``Trace``), and the steps every read ends with:
one source's raw columns normalised (``canonical_events``), then every source as one
trace (``assemble``). Shared by a local read and an object-store read (``canonical``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from servetrace.errors import InputError, first_line
from servetrace.schema import OPTIONAL_COLUMNS, REQUIRED_COLUMNS
from servetrace.sources.footer_facts import FileFacts
from servetrace.sources.normalise import IngestOptions, Prescan, normalised, with_event_kinds
from servetrace.sources.parquet_stats import IntegerRange
from servetrace.sources.prescan import decoded_ranges


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
