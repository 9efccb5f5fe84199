"""Parse a text trace (CSV, JSON Lines) once; every later query reads the parsed columns.

A lazy text scan is parsed again by every query on it, and reading a trace asks several:
the parse check, the blank-line check, one range or type check per column
(``normalise``), then the analysis itself. With full-schema inference (every row seen
before a column's type is decided: ``canonical``) each JSON Lines parse also walks the
whole file, so a 1e6-event JSONL cost seven passes over the text where Parquet costs
none. Here the text is parsed exactly once, with the full-file schema, into Arrow:

- a file up to ``IN_MEMORY_BYTES`` is collected into memory (it is freed with the frame);
- a larger one is streamed into an LZ4-compressed Arrow IPC file in a temporary directory
  (``sink_ipc``: bounded memory, so a trace larger than memory still streams) and scanned
  from there. The directory is removed when the process exits.

Rows keep their file order, so "row N" in a message is still line N of the file. A parse
error surfaces here, as a Polars error, for ``canonical`` to name the line.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import polars as pl

IN_MEMORY_BYTES = 64 << 20
"""Text files up to this size are parsed into memory; larger ones are spilled to disk."""

_directory: Path | None = None


def _spill_directory() -> Path:
    """One private directory per process for the parsed copies, removed at exit."""
    global _directory
    if _directory is None or not _directory.is_dir():
        _directory = Path(tempfile.mkdtemp(prefix="servetrace-parsed-"))
        atexit.register(shutil.rmtree, _directory, ignore_errors=True)
    return _directory


def parse_once(scan: pl.LazyFrame, source: Path) -> pl.LazyFrame:
    """``scan`` (a lazy text scan of ``source``) parsed once: in memory, or spilled."""
    if source.stat().st_size <= IN_MEMORY_BYTES:
        return scan.collect().lazy()
    handle, name = tempfile.mkstemp(suffix=".arrow", dir=_spill_directory())
    os.close(handle)  # a unique name, reserved; sink_ipc writes over it
    target = Path(name)
    try:
        scan.sink_ipc(target, compression="lz4")
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return pl.scan_ipc(target)
