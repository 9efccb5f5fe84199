"""The on-disk (and on-the-wire) form of a ``partial.Partial``: docs/partials.md.

A partial is a **directory** of Parquet files and a ``manifest.json``: each table keeps
its own schema (a shard's attribute columns, the raw rows of deferred requests), any
Parquet reader opens every part, and the manifest — format name, version, trace span,
flags, analysis settings, counts of every table, the ITL sums — is checked with every
table before anything is merged (``partial_check``), so a truncated, foreign, newer or
edited partial is an ``InputError`` naming the file, never a wrong report. The Ray
engine ships the same tables as Arrow IPC buffers (``to_record``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.analysis.histogram import RESOLUTION
from servetrace.analysis.partial import FORMAT, VERSION, Partial
from servetrace.analysis.partial_check import TABLES, bad, build, check_manifest
from servetrace.errors import InputError, UsageError, first_line, unwritable
from servetrace.sources.inputs import PARTIAL_MANIFEST as MANIFEST
from servetrace.sources.inputs import is_partial


def manifest_of(part: Partial) -> dict[str, Any]:
    from servetrace.version import SCHEMA_VERSION, __version__

    hist = part.histogram
    return {
        "format": FORMAT,
        "version": VERSION,
        "servetrace": __version__,
        "event_schema": SCHEMA_VERSION,
        "inputs": list(part.inputs),
        "trace": {
            "start_ns": part.start_ns,
            "end_ns": part.end_ns,
            "has_releases": part.has_releases,
        },
        "attributes": list(part.attributes),
        "settings": part.settings.to_json(),
        "itl": {
            "kind": "exact" if hist is None else "histogram",
            "count": part.gap_count,
            # Exact integer sums (text: Σv² outgrows 64 bits); null for exact gaps.
            "sum": None if hist is None else str(hist.total),
            "sum_sq": None if hist is None else str(hist.total_sq),
            "resolution": RESOLUTION,
        },
        "rows": {name: _table(part, name).height for name in TABLES},
        "warnings": list(part.warnings),
    }


def _table(part: Partial, name: str) -> pl.DataFrame:
    if name == "histogram":
        if part.histogram is None:
            return pl.DataFrame(schema=dict.fromkeys(("b", "n", "lo", "hi"), pl.Int64))
        return part.histogram.buckets.sort("b")
    frame: pl.DataFrame = getattr(part, name)
    return frame


# ------------------------------------------------------------------------------ files
def read_partial(path: str | os.PathLike[str]) -> Partial:
    """Read and check one partial directory; any problem is an ``InputError``."""
    where = str(path)
    directory = Path(path)
    if not directory.is_dir():
        raise bad(where, "not a directory" if directory.exists() else "no such directory")
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise bad(where, f"no {MANIFEST}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise bad(where, f"cannot read {MANIFEST}: {error}") from None
    manifest = check_manifest(where, manifest)
    tables = {}
    for name in TABLES:
        file = directory / f"{name}.parquet"
        try:
            tables[name] = pl.read_parquet(file)
        except (OSError, pl.exceptions.PolarsError) as error:
            first = first_line(error, "unreadable")
            raise InputError(
                f"{file}: cannot read this part of the partial: {first}",
                hint="write the partial again",
            ) from None
    return build(where, manifest, tables)


def check_partial_output(path: Path, flag: str) -> None:
    """Refuse, before any work, a partial output that cannot or must not be written."""
    if path.exists() and not (path.is_dir() and is_partial(path)):
        raise UsageError(
            f"{flag} {path}: exists and is not a partial; refusing to replace it",
            hint="name a new directory (or an old partial to overwrite)",
        )
    if not path.absolute().parent.is_dir():
        raise UsageError(f"{flag} {path}: directory {path.absolute().parent} does not exist")


def _replace_directory(target: Path, write: Callable[[Path], None]) -> None:
    """Write a directory beside ``target``, then swap it in (a reader never sees half)."""
    check_partial_output(target, "output")
    target = Path(os.path.realpath(target))
    fresh: Path | None = None
    old: Path | None = None
    try:
        # Inside the try: an unwritable directory fails here already (read-only, /proc).
        fresh = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        write(fresh)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / "partial")
        os.replace(fresh, target)
    except OSError as error:
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
        raise unwritable(str(target), error) from None
    except BaseException:
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def write_partial(part: Partial, path: str | os.PathLike[str]) -> None:
    """Write ``part`` as a partial directory at ``path`` (atomically replaced)."""

    def write(directory: Path) -> None:
        for name in TABLES:
            _plain(_table(part, name)).write_parquet(directory / f"{name}.parquet")
        text = json.dumps(manifest_of(part), indent=2, sort_keys=True)
        (directory / MANIFEST).write_text(text + "\n", encoding="utf-8")

    _replace_directory(Path(path), write)


def _plain(frame: pl.DataFrame) -> pl.DataFrame:
    """Enum and Categorical columns as text: any Parquet or Arrow reader, any engine."""
    kinds = [c for c, t in frame.schema.items() if isinstance(t, (pl.Enum, pl.Categorical))]
    return frame.with_columns(pl.col(c).cast(pl.String) for c in kinds) if kinds else frame


# ------------------------------------------------------------------------- in memory
def to_record(part: Partial) -> dict[str, bytes | str]:
    """The partial as Arrow IPC buffers plus its manifest (what a Ray task returns)."""
    record: dict[str, bytes | str] = {MANIFEST: json.dumps(manifest_of(part))}
    for name in TABLES:
        buffer = io.BytesIO()
        _plain(_table(part, name)).write_ipc(buffer, compression="lz4")
        record[name] = buffer.getvalue()
    return record


def from_record(record: dict[str, Any], where: str = "<ray partition>") -> Partial:
    manifest = check_manifest(where, json.loads(record[MANIFEST]))
    tables = {}
    for name in TABLES:
        with contextlib.closing(io.BytesIO(record[name])) as buffer:
            tables[name] = pl.read_ipc(buffer)
    return build(where, manifest, tables)
