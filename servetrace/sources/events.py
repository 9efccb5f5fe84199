"""What every importer returns: one row per request turned into canonical events.

Every importer follows the same three steps:

1. read the tool's file (``reading``) and check each record's fields (``fields.Fields``),
   with errors that name the file, the record and the field;
2. collect one row per request into a Polars frame (the columns of ``REQUEST_COLUMNS``):
   arrival, the absolute times of the output ticks as a list, the terminal event, counts,
   and per-request attributes, times converted once, range-checked (``times.checked_ns``);
3. turn that frame into canonical events with :func:`build_events`, which explodes the tick
   lists — never a Python loop over tokens — and wrap them, with the warnings collected in
   `Notes`, in an `ImportResult`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.schema import SOURCE_CLIENT, SOURCE_COLUMN


@dataclass(frozen=True)
class ImportResult:
    """A foreign file turned into canonical events.

    ``events`` has one row per event (``request_id``, ``event``, ``ts`` in Int64 ns,
    ``tokens``, ``prompt_tokens``, ``output_tokens``) followed by attribute columns
    that are constant per request (``source``, ``tool``, ``ticks_available``,
    ``arrival_known``, ``terminal_known``, ``error_code``, ``error``, and per-format ones).
    ``tool_summary`` holds the tool's own aggregate figures when the file (or its usual
    sibling summary file) has them, so they can be compared with servetrace's.
    """

    events: pl.DataFrame
    format: str
    path: str
    warnings: tuple[str, ...]
    records: int
    tool_summary: dict[str, Any] | None
    request_level: bool
    arrival_known: bool


# Columns every importer emits, in this order, before its own attribute columns.
EVENT_COLUMNS: dict[str, pl.DataType] = {
    "request_id": pl.Utf8(),
    "event": pl.Utf8(),
    "ts": pl.Int64(),
    "tokens": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
}
COMMON_ATTRIBUTES: dict[str, pl.DataType] = {
    SOURCE_COLUMN: pl.Utf8(),
    "tool": pl.Utf8(),
    "ticks_available": pl.Boolean(),
    "arrival_known": pl.Boolean(),
    "terminal_known": pl.Boolean(),
    "error_code": pl.Int64(),
    "error": pl.Utf8(),
}


REQUEST_COLUMNS: dict[str, pl.DataType] = {
    "request_id": pl.Utf8(),
    "arrival_ns": pl.Int64(),
    "ticks_ns": pl.List(pl.Int64()),
    "terminal": pl.Utf8(),
    "terminal_ns": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "terminal_known": pl.Boolean(),
    "error_code": pl.Int64(),
    "error": pl.Utf8(),
}
# The request columns an importer may leave out: a count or an error it cannot know is
# null, and a terminal without ``terminal_known`` is known.
OPTIONAL_REQUEST_COLUMNS = (
    "prompt_tokens",
    "output_tokens",
    "terminal_known",
    "error_code",
    "error",
)


@dataclass
class Notes:
    """Warnings collected while importing, in the order they were found."""

    items: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        if message not in self.items:
            self.items.append(message)


def error_type_of(text: pl.Expr, width: int = 80) -> pl.Expr:
    """The last non-empty line of an error text (a traceback's exception line), shortened:
    the code a failed request is counted under when the tool gives no numeric code."""
    last = text.str.strip_chars().str.split("\n").list.last().str.strip_chars()
    return (
        pl.when(last.str.len_chars() > width)
        .then(last.str.slice(0, width - 1) + pl.lit("…"))
        .otherwise(last)
        .alias("error_type")
    )


def count_phrase(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


def import_result(
    requests: pl.DataFrame,
    *,
    fmt: str,
    path: Path,
    notes: Notes,
    records: int,
    tool_summary: dict[str, Any] | None,
    ticks_available: bool,
    arrival_known: bool,
    attributes: Sequence[str] = (),
) -> ImportResult:
    """The canonical events of ``requests`` and what the importer knows about them.

    A trace without per-token times is a request-level trace: ``request_level`` is
    derived from ``ticks_available``, never stated twice.
    """
    events = build_events(
        requests,
        tool=fmt,
        ticks_available=ticks_available,
        arrival_known=arrival_known,
        attributes=attributes,
    )
    return ImportResult(
        events=events,
        format=fmt,
        path=str(path),
        warnings=tuple(notes.items),
        records=records,
        tool_summary=tool_summary,
        request_level=not ticks_available,
        arrival_known=arrival_known,
    )


def build_events(
    requests: pl.DataFrame,
    *,
    tool: str,
    ticks_available: bool,
    arrival_known: bool,
    attributes: Sequence[str] = (),
) -> pl.DataFrame:
    """One row per request → one row per event, in the canonical schema.

    ``requests`` has the columns of ``REQUEST_COLUMNS`` (``ticks_ns``: the absolute times of
    the output chunks, first token first; ``terminal``: ``"completion"``, ``"cancellation"``
    or null for a request still in flight; ``OPTIONAL_REQUEST_COLUMNS`` may be left out)
    plus the per-request ``attributes``, which are repeated on every event row of their
    request. Each tick carries ``tokens=1``: the tools record when a chunk arrived, not
    how many tokens it held; the authoritative count goes on the terminal row as
    ``output_tokens``.

    Rows are ordered by arrival, then by the request's position in the file, then in
    lifecycle order.
    """
    present = set(requests.columns)
    missing = [n for n in REQUEST_COLUMNS if n not in present | set(OPTIONAL_REQUEST_COLUMNS)]
    if missing:  # a programming error in an importer, not a user error
        raise ValueError(f"request rows lack columns: {missing}")
    base = requests.select(
        *(
            (pl.col(name) if name in present else pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in REQUEST_COLUMNS.items()
        ),
        *attributes,
    ).with_row_index("_req")

    keys = [pl.col("_req"), pl.col("arrival_ns").alias("_arrival")]
    null_int = pl.lit(None, dtype=pl.Int64)
    arrival = base.select(
        *keys,
        pl.lit(0, dtype=pl.Int64).alias("_seq"),
        pl.lit("arrival").alias("event"),
        pl.col("arrival_ns").alias("ts"),
        null_int.alias("tokens"),
        pl.col("prompt_tokens"),
        null_int.alias("output_tokens"),
    )
    ticks = (
        base.select(*keys, pl.col("ticks_ns").alias("ts"))
        .explode("ts", empty_as_null=False, keep_nulls=False)
        .filter(pl.col("ts").is_not_null())
        .with_columns(
            (pl.int_range(pl.len(), dtype=pl.Int64).over("_req") + 1).alias("_seq"),
        )
        .select(
            "_req",
            "_arrival",
            "_seq",
            pl.when(pl.col("_seq") == 1)
            .then(pl.lit("first_token"))
            .otherwise(pl.lit("token"))
            .alias("event"),
            "ts",
            pl.lit(1, dtype=pl.Int64).alias("tokens"),
            null_int.alias("prompt_tokens"),
            null_int.alias("output_tokens"),
        )
    )
    terminal = base.filter(pl.col("terminal").is_not_null()).select(
        *keys,
        pl.lit(2**62, dtype=pl.Int64).alias("_seq"),
        pl.col("terminal").alias("event"),
        pl.col("terminal_ns").alias("ts"),
        null_int.alias("tokens"),
        null_int.alias("prompt_tokens"),
        pl.col("output_tokens"),
    )
    constant = {
        SOURCE_COLUMN: pl.lit(SOURCE_CLIENT),
        "tool": pl.lit(tool),
        "ticks_available": pl.lit(ticks_available),
        "arrival_known": pl.lit(arrival_known),
    }
    per_request = base.select(
        "_req",
        pl.col("request_id"),
        *(expr.alias(name) for name, expr in constant.items()),
        pl.col("terminal_known").fill_null(True),
        "error_code",
        "error",
        *attributes,
    )
    events = (
        pl.concat([arrival, ticks, terminal], how="vertical")
        .join(per_request, on="_req", how="left")
        .sort("_arrival", "_req", "_seq")
    )
    return events.select(
        *(pl.col(name).cast(dtype) for name, dtype in EVENT_COLUMNS.items()),
        *(pl.col(name).cast(dtype) for name, dtype in COMMON_ATTRIBUTES.items()),
        *attributes,
    )
