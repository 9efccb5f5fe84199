"""The whole-trace facts a batched analysis needs first, from what ingest already knows.

Before its first batch the batched engine needs four facts of the whole trace: whether it
logs admissions and releases, and its first and last timestamp (``lifecycle.TraceFacts``),
over the rows that belong to a request (request id, event and time all present). A scan
of the trace for them decoded and normalised three columns of every row again: 29 of
≈ 320 CPU-s at 10⁹ events (``docs/scale.md``). For a Parquet file ingest knows them
already, exactly:

- the event kinds present: the prescan's distinct event values (``normalise.Prescan``)
  through the same mapping ``normalise`` applies to the rows (aliases, ``--event-map``);
- the first and last time: the footer's minimum and maximum of an integer ``ts``
  (``parquet_stats``), times the unit, as ``normalise`` converts each row;
- that every row is placeable: the footer counts no null request id, event or time, and
  the id column is integer or text (ingest turns such ids into Int64 or String, never
  null).

A file for which any of this is not known has no facts (``None``), and neither has a
trace with such a file: the engine then scans, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servetrace.errors import ServetraceError
from servetrace.sources.normalise import IngestOptions, Prescan, event_mapping
from servetrace.sources.parquet_stats import IntegerRange, is_integer_or_text, no_nulls
from servetrace.units import TIME_UNITS


@dataclass(frozen=True)
class FileFacts:
    """What a file's rows, all placeable, hold: the event kinds, the time span in ns."""

    kinds: frozenset[str]
    start_ns: int | None
    end_ns: int | None


def file_facts(
    path: Path,
    options: IngestOptions,
    ranges: dict[str, IntegerRange],
    known: Prescan | None,
) -> FileFacts | None:
    """The facts of one Parquet file's canonical rows, or None when not known exactly."""
    if known is None or known.events is None or not known.ts_ok or "ts" not in ranges:
        return None
    source = {name: options.columns.get(name, name) for name in ("request_id", "event", "ts")}
    if not is_integer_or_text(path, source["request_id"]):
        return None
    if not no_nulls(path, list(source.values())):
        return None
    try:
        mapping = event_mapping(known.events, options.event_map)
    except ServetraceError:  # an unknown event: normalise reports it, not this shortcut
        return None
    span = ranges["ts"]
    factor = TIME_UNITS[options.time_unit or "ns"]
    return FileFacts(
        kinds=frozenset(mapping.values()),
        start_ns=None if span.low is None else span.low * factor,
        end_ns=None if span.high is None else span.high * factor,
    )


def combined(facts: Sequence[FileFacts | None]) -> FileFacts | None:
    """The facts of files read as one trace; None if any file's are unknown."""
    if not facts or any(f is None for f in facts):
        return None
    known = [f for f in facts if f is not None]
    starts = [f.start_ns for f in known if f.start_ns is not None]
    ends = [f.end_ns for f in known if f.end_ns is not None]
    return FileFacts(
        kinds=frozenset().union(*(f.kinds for f in known)),
        start_ns=min(starts) if starts else None,
        end_ns=max(ends) if ends else None,
    )
