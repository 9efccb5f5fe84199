"""Shared helpers for the importers: reading files and building event frames (record
fields are checked by ``fields.Fields``, re-exported here).

Every importer follows the same three steps:

1. read the tool's file (JSON, JSON Lines, optionally gzip-compressed) with errors that name
   the file, the record and the field;
2. collect one row per request into a Polars frame (the columns of ``REQUEST_COLUMNS``):
   arrival, the absolute times of the output ticks as a list, the terminal event, counts,
   and per-request attributes;
3. turn that frame into canonical events with :func:`build_events`, which explodes the tick
   lists — never a Python loop over tokens.

Times are converted to Int64 nanoseconds once, by :func:`float_to_ns`, which rounds each value
once; gaps are accumulated in integer nanoseconds afterwards, so a sum of gaps is exact.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.schema import SOURCE_CLIENT, SOURCE_COLUMN
from servetrace.sources.fields import Fields as Fields  # re-exported: importers use it

# --------------------------------------------------------------------------------------
# The result every importer returns
# --------------------------------------------------------------------------------------


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


class FormatMismatch(InputError):
    """The file is readable but is not what the chosen importer reads."""


# --------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: Path) -> bytes:
    """The file's content, decompressed when it is gzip (by magic number, not by name)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a file") from None
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise InputError(
                f"{path}: gzip data is corrupt or truncated ({error})",
                hint="re-copy the file; `gzip -t FILE` checks it",
            ) from None
    return data


def read_text(path: Path) -> str:
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: not UTF-8 text (byte {error.start}); expected JSON",
        ) from None


def parse_json_text(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":
            raise FormatMismatch(
                f"{path}: line {error.lineno}: a second JSON value follows the first: this "
                "looks like JSON Lines (one record per line), not one JSON document"
            ) from None
        truncated = error.pos >= len(text.rstrip()) - 1
        raise InputError(
            f"{path}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}",
            hint="the file looks truncated; re-export it" if truncated else None,
        ) from None


def load_json(path: Path) -> Any:
    """Parse a whole JSON document; errors name the line and column."""
    return parse_json_text(read_text(path), path)


def iter_json_lines(path: Path, text: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for every non-blank line of a JSON Lines file."""
    if text is None:
        text = read_text(path)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}: line {number}: not valid JSON at column {error.colno}: {error.msg}",
                hint="the line may be cut short; re-export the file or remove the line",
            ) from None


def sibling(path: Path, *names: str) -> Path | None:
    """The first existing file among ``names`` (also tried with ``.gz``) next to ``path``."""
    for name in names:
        for candidate in (path.with_name(name), path.with_name(name + ".gz")):
            if candidate.is_file():
                return candidate
    return None


def strip_suffixes(path: Path, *suffixes: str) -> str:
    """``profile_export.jsonl.gz`` → ``profile_export`` (the given suffixes, in any order)."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in suffixes:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


# --------------------------------------------------------------------------------------
# Time conversion (Polars expressions)
# --------------------------------------------------------------------------------------


def float_to_ns(expr: pl.Expr, scale: int | pl.Expr) -> pl.Expr:
    """A float time in some unit → Int64 ns, rounded once.

    The integer part and the fraction are scaled separately, so epoch seconds
    (1.7e9 s) keep every digit the float has instead of losing ~100 ns to the product.
    """
    whole = expr.floor()
    scale_expr = scale if isinstance(scale, pl.Expr) else pl.lit(scale, dtype=pl.Int64)
    return whole.cast(pl.Int64) * scale_expr + ((expr - whole) * scale_expr.cast(pl.Float64)).round(
        0
    ).cast(pl.Int64)


def cumulative_ticks(first_ns: pl.Expr, gaps_ns: pl.Expr) -> pl.Expr:
    """Absolute tick times: the first token, then the first token plus the running sum of
    the gaps (integer ns, so the last tick is exactly first + Σgaps). Null when there is no
    first token."""
    return (
        pl.when(first_ns.is_not_null())
        .then(
            pl.concat_list(
                first_ns, gaps_ns.fill_null(pl.lit([], dtype=pl.List(pl.Int64)))
            ).list.eval(pl.element().cum_sum())
        )
        .otherwise(None)
    )


# --------------------------------------------------------------------------------------
# Streamed chunks (OpenAI-compatible server-sent events)
# --------------------------------------------------------------------------------------

# Where a chunk's generated text can be, by API: chat (content, and reasoning under either
# of its two spellings), completions, a non-streamed chat body, Triton's generate endpoint.
_CONTENT_PATHS = (
    "$.choices[0].delta.content",
    "$.choices[0].delta.reasoning_content",
    "$.choices[0].delta.reasoning",
    "$.choices[0].text",
    "$.choices[0].message.content",
    "$.text_output",
)


def sse_payload(expr: pl.Expr) -> pl.Expr:
    """The JSON payload of one SSE ``data:`` line (prefix and blanks removed)."""
    return expr.str.strip_chars().str.strip_prefix("data:").str.strip_chars()


def is_content_chunk(payload: pl.Expr) -> pl.Expr:
    """True when a chunk's JSON payload carries generated text (or reasoning).

    Chunks that only close the stream (``finish_reason`` with an empty delta), carry usage
    (``choices: []``), or the ``[DONE]`` sentinel are not output tokens.
    """
    return pl.any_horizontal(
        payload.str.json_path_match(path).str.len_chars().fill_null(0) > 0
        for path in _CONTENT_PATHS
    )


def usage_count(payload: pl.Expr, key: str) -> pl.Expr:
    """``usage.<key>`` of a chunk as Int64 (null when the chunk has no usage)."""
    return payload.str.json_path_match(f"$.usage.{key}").cast(pl.Int64, strict=False)


# --------------------------------------------------------------------------------------
# Building the canonical events
# --------------------------------------------------------------------------------------

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


@dataclass
class Notes:
    """Warnings collected while importing, in the order they were found."""

    items: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        if message not in self.items:
            self.items.append(message)


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
    or null for a request still in flight) plus the per-request ``attributes``, which are
    repeated on every event row of their request. Each tick carries ``tokens=1``: the
    tools record when a chunk arrived, not how many tokens it held; the authoritative
    count goes on the terminal row as ``output_tokens``.

    Rows are ordered by arrival, then by the request's position in the file, then in
    lifecycle order.
    """
    missing = [name for name in REQUEST_COLUMNS if name not in requests.columns]
    if missing:  # a programming error in an importer, not a user error
        raise ValueError(f"request rows lack columns: {missing}")
    base = requests.select(
        *(pl.col(name).cast(dtype) for name, dtype in REQUEST_COLUMNS.items()),
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


def load_document(path: Path, sniff: Callable[[Any], bool], what: str, expected: str) -> Any:
    """The JSON document of ``path`` if ``sniff`` recognises it, else FormatMismatch."""
    doc = load_json(path)
    if not sniff(doc):
        raise FormatMismatch(f"{path}: not {what}: expected {expected} ({describe_json(doc)})")
    return doc


def describe_json(doc: Any) -> str:
    """A short description of a JSON document's shape, for "not this format" messages."""
    if isinstance(doc, dict):
        keys = list(doc)[:8]
        return "found keys: " + ", ".join(keys) + (", ..." if len(doc) > 8 else "")
    if isinstance(doc, list):
        return f"found a JSON list of {len(doc)} items"
    return f"found a JSON {type(doc).__name__}"


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
