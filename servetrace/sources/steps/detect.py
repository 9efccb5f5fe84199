"""Which step format a file is: by its name, else by its columns."""

from __future__ import annotations

from pathlib import Path

from servetrace.errors import InputError
from servetrace.sources.file_scan import table_columns
from servetrace.sources.steps.formats import STEP_FORMATS
from servetrace.sources.steps.vidur import BATCH_COLUMNS


def detect_step_format(path: Path) -> str:
    """The `STEP_FORMATS` key to read ``path`` with."""
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
