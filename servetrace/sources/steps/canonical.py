"""Step files in the canonical layout (`schema.STEP_COLUMNS`): Parquet, Arrow, CSV or
JSON Lines, read as the event log's files are (`sources.file_scan.read_table`).

Times are integer ns. ``request_ids`` is a list in Parquet, Arrow and JSON Lines; CSV
cannot hold a list, so there it is text: the ids separated by ``;`` or spaces (a JSON
list's brackets, quotes and commas are read too).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from servetrace.sources.file_scan import read_table
from servetrace.sources.steps.formats import StepFile
from servetrace.sources.steps.validate import require_columns


def _ids(frame: pl.DataFrame) -> pl.DataFrame:
    """``request_ids`` from text as a list (a list of any scalar is cast by `conform`)."""
    if "request_ids" not in frame.columns or isinstance(frame.schema["request_ids"], pl.List):
        return frame
    text = pl.col("request_ids").cast(pl.String).str.replace_all(r"[\[\]\"',;]", " ")
    return frame.with_columns(
        text.str.strip_chars().str.split(" ").list.eval(pl.element().filter(pl.element() != ""))
    )


def read(path: Path, ticks: pl.Series | None = None) -> StepFile:
    """The steps of ``path``; ``ticks`` are not needed: canonical steps are on the trace's
    clock already."""
    frame = read_table(path)
    require_columns(path, frame.columns)
    return StepFile(_ids(frame))
