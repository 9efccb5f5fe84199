"""The rules every step file obeys, whatever its format (`formats.read_steps` applies them).

A broken rule is one `InputError` naming the file, the record (row, and the step index
where the source gives one) and the rule (exit 3). Steps that overlap on one replica are
usable (an engine that pipelines its batches, or two clocks) and are a named finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.steps.schema import COUNT_COLUMNS, REQUIRED_STEP_COLUMNS

# The read's note on overlapping steps starts so (after the path): a stall analysis, which
# counts them in its own findings, leaves it out.
OVERLAP_NOTE = "finding overlapping_steps:"

_ROW = "_row"


def require_columns(
    path: Path,
    columns: Iterable[str],
    required: tuple[str, ...] = REQUIRED_STEP_COLUMNS,
    what: str = "a step file",
    hint: str | None = "see the canonical step schema in docs/design.md",
) -> None:
    """The columns ``what`` must have: by default the canonical ones (``duration`` stands
    in for ``ts_start``)."""
    present = set(columns)
    if "duration" in present:
        present.add("ts_start")
    missing = [name for name in required if name not in present]
    if missing:
        raise InputError(
            f"{path}: rule missing_column: no column {', '.join(repr(m) for m in missing)} "
            f"({what} has {', '.join(required)})",
            hint=hint,
        )


def _record(row: dict[str, object]) -> str:
    step = row.get("step")
    return f"row {row[_ROW]}" + (f" (step {step})" if step is not None else "")


def _first_bad(frame: pl.DataFrame, bad: pl.Expr) -> dict[str, object] | None:
    hit = frame.filter(bad.fill_null(False)).head(1)
    return hit.row(0, named=True) if hit.height else None


def validate(path: Path, frame: pl.DataFrame, ends_known: bool = True) -> tuple[str, ...]:
    """Check ``frame`` (canonical layout, file order); return the findings to tell.

    Rows are counted from 1 in the order the format read them (a CSV's data lines).
    ``ends_known`` False: a format whose source does not log every step's end (SGLang
    dates a prefill batch when it is formed), so a missing end is unknown, not an error.
    """
    frame = frame.with_row_index(_ROW, offset=1)
    replica = pl.col("replica").fill_null("")
    missing_end = pl.col("ts_end").is_null() if ends_known else pl.lit(False)
    rules: list[tuple[str, pl.Expr, str]] = [
        ("missing_end", missing_end, "the step has no end time"),
        (
            "negative_duration",
            pl.col("ts_end") < pl.col("ts_start"),
            "it ends before it starts",
        ),
        *(
            (
                "negative_count",
                pl.col(name) < 0,
                f"{name} is negative",
            )
            for name in COUNT_COLUMNS
        ),
        (
            "kv_usage_range",
            (pl.col("kv_usage") < 0) | (pl.col("kv_usage") > 1),
            "kv_usage is outside 0–1",
        ),
        (
            "step_out_of_order",
            # By end: a log stamped to the second ends its steps in order, but cannot
            # order the starts of two steps of one second.
            (pl.col("ts_end") < pl.col("ts_end").shift(1).over(replica))
            | (pl.col("step") <= pl.col("step").shift(1).over(replica)),
            "it ends before, or is numbered before, the step above it on its replica",
        ),
    ]
    for rule, bad, words in rules:
        row = _first_bad(frame, bad)
        if row is not None:
            raise InputError(
                f"{path}: {_record(row)}: rule {rule}: {words}",
                hint="steps of one replica are written in the order they ran",
            )
    overlap = pl.col("ts_start") < pl.col("ts_end").shift(1).over(replica)
    overlapping = frame.filter(overlap.fill_null(False))
    if overlapping.height:
        first = overlapping.row(0, named=True)
        return (
            f"{path}: {OVERLAP_NOTE} {overlapping.height:,} steps start before "
            f"the step above them on their replica ended (first: {_record(first)})",
        )
    return ()
