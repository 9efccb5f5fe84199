"""Which step format a file is: an engine's log or record file by its first bytes, a
Vidur batch file by its name or columns, else the canonical layout."""

from __future__ import annotations

from pathlib import Path

from servetrace.errors import InputError
from servetrace.sources.file_scan import table_columns
from servetrace.sources.sniff import read_head
from servetrace.sources.steps.formats import STEP_FORMATS
from servetrace.sources.steps.vidur import BATCH_COLUMNS

# Marks in a file's first 64 KiB → its format (an engine's own text and record formats).
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"servetrace-zmq-record", "forward-pass"),
    (b"iterLatencyMS", "trtllm-iterations"),
    (b"Prefill batch", "sglang-log"),
    (b"Decode batch", "sglang-log"),
    (b"generation requests", "vllm-log"),
)


def _signature(path: Path) -> str | None:
    if path.suffix.lower() in (".parquet", ".arrow", ".ipc", ".gz"):
        return None
    try:
        head = read_head(path, 1 << 16)
    except (OSError, InputError):
        return None  # the reader says why, as for any other format
    return next((fmt for mark, fmt in _SIGNATURES if mark in head), None)


def detect_step_format(path: Path) -> str:
    """The `STEP_FORMATS` key to read ``path`` with."""
    found = _signature(path)
    if found is not None:
        return found
    name = path.name.lower()
    if name.endswith(("_batches.csv.gz", "_batches.csv")):
        return "vidur"
    columns = set(table_columns(path))
    if set(BATCH_COLUMNS) <= columns:
        return "vidur"
    if "ts_end" in columns:
        return "canonical"
    raise InputError(
        f"{path}: not a step file servetrace knows (columns: {', '.join(sorted(columns)[:8])})",
        hint="give --steps-from FORMAT, one of: " + ", ".join(STEP_FORMATS),
    )
