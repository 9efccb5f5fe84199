"""What the serving-engine importers share (OTLP spans, SGLang, TensorRT-LLM, MLCommons).

The client-tool importers see arrival, ticks and a terminal event; an engine also knows
when it **admitted** a request (its first scheduling), so its requests carry an
``admission_ns`` column and get an ``admission`` event, and the trace is server-side
(``source = "server"``). Everything else goes through ``events.import_result``, so the
events have exactly the schema of every other importer.

Also here: reading a stream of concatenated JSON values (TensorRT-LLM appends one list per
poll), listing the files of a folder an engine rotates into, and keeping the fields an
importer does not know as request attributes (never silently dropped).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.schema import CANONICAL_COLUMNS, SOURCE_COLUMN, SOURCE_SERVER
from servetrace.sources.events import (
    COMMON_ATTRIBUTES,
    REQUEST_COLUMNS,
    ImportResult,
    Notes,
    import_result,
)
from servetrace.sources.sniff import read_head

# Columns an importer's request frame may use besides REQUEST_COLUMNS.
ADMISSION = "admission_ns"
# Names an unknown field may not take as an attribute column (they mean something).
_RESERVED = set(CANONICAL_COLUMNS) | set(COMMON_ATTRIBUTES) | set(REQUEST_COLUMNS) | {ADMISSION}


def engine_result(
    requests: pl.DataFrame,
    *,
    fmt: str,
    path: Path,
    notes: Notes,
    records: int,
    ticks_available: bool,
    arrival_known: bool,
    attributes: Sequence[str] = (),
    source: str = SOURCE_SERVER,
) -> ImportResult:
    """The canonical events of ``requests`` (REQUEST_COLUMNS, optionally ``admission_ns``,
    plus ``attributes``), with an ``admission`` event right after each arrival that has one.
    """
    has_admission = ADMISSION in requests.columns
    carried = [*attributes, ADMISSION] if has_admission else list(attributes)
    result = import_result(
        requests,
        fmt=fmt,
        path=path,
        notes=notes,
        records=records,
        tool_summary=None,
        ticks_available=ticks_available,
        arrival_known=arrival_known,
        attributes=carried,
    )
    events = result.events.with_columns(pl.lit(source).alias(SOURCE_COLUMN))
    if has_admission:
        # build_events orders rows by request then lifecycle; an admission belongs right
        # after its request's arrival row, so give it that row's position plus a half.
        events = events.with_row_index("_pos").with_columns(pl.col("_pos").cast(pl.Float64))
        admissions = events.filter(
            (pl.col("event") == "arrival") & pl.col(ADMISSION).is_not_null()
        ).with_columns(
            pl.lit("admission").alias("event"),
            pl.col(ADMISSION).alias("ts"),
            pl.lit(None, dtype=pl.Int64).alias("prompt_tokens"),
            pl.col("_pos") + 0.5,
        )
        events = pl.concat([events, admissions]).sort("_pos").drop("_pos", ADMISSION)
    return dataclasses.replace(result, events=events)


# --------------------------------------------------------------------------------------
# Unknown fields → request attributes
# --------------------------------------------------------------------------------------


def extra_attributes(
    rows: Sequence[Mapping[str, Any]], prefix: str
) -> tuple[dict[str, pl.Series], list[str]]:
    """Columns for the fields of ``rows`` an importer did not consume, and their names.

    Scalars keep their type when every row agrees (numbers, strings, booleans); nested
    values and mixed types become JSON text. A name that collides with a canonical or
    importer column is prefixed with ``prefix`` (``sglang_id``), so nothing is lost and
    nothing is overwritten.
    """
    names: dict[str, None] = {}
    for row in rows:
        for key in row:
            names.setdefault(key, None)
    columns: dict[str, pl.Series] = {}
    for key in names:
        column = key if key not in _RESERVED else f"{prefix}_{key}"
        values = [row.get(key) for row in rows]
        columns[column] = _attribute_series(column, values)
    return columns, list(columns)


def _attribute_series(name: str, values: list[Any]) -> pl.Series:
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {bool}:
        return pl.Series(name, values, dtype=pl.Boolean)
    if kinds <= {int}:
        return pl.Series(name, values, dtype=pl.Int64, strict=False)
    if kinds <= {int, float}:
        return pl.Series(name, values, dtype=pl.Float64, strict=False)
    if kinds <= {str}:
        return pl.Series(name, values, dtype=pl.Utf8)
    return pl.Series(
        name,
        [None if v is None else v if isinstance(v, str) else json.dumps(v) for v in values],
        dtype=pl.Utf8,
    )


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


def iter_json_values(text: str, path: Path) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for each JSON value of ``text`` written one after another
    (``[...][...]``, one per line, or separated by blanks)."""
    decoder = json.JSONDecoder()
    position, length = 0, len(text)
    while True:
        while position < length and text[position] in " \t\r\n,":
            position += 1
        if position >= length:
            return
        line = text.count("\n", 0, position) + 1
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}: line {error.lineno}: not valid JSON at column {error.colno}: {error.msg}",
                hint="the file may be cut short (a poll written while the server stopped); "
                "remove the broken part",
            ) from None
        yield line, value


def visible_files(path: Path) -> list[Path]:
    """The files of a folder, recursively and sorted, hidden ones skipped."""
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not any(s.startswith(".") for s in p.relative_to(path).parts)
    )


def folder_files(path: Path, accept: Callable[[Path], bool]) -> list[Path]:
    """The ``visible_files`` of a folder that ``accept`` takes; an error naming the
    folder when there is none."""
    chosen = [p for p in visible_files(path) if accept(p)]
    if not chosen:
        raise InputError(f"{path}: the folder holds no file of this format")
    return chosen


def sniff_head(path: Path, sniff: Callable[[Any], bool], starts: str) -> bool:
    """True when the file's first JSON value satisfies ``sniff``; when that value is longer
    than the head (its first MiB, gunzipped when gzip), when its text matches the
    ``starts`` pattern. Reads only the head, so a folder's parts are never read whole
    just to recognise them; an unreadable file is no such file."""
    try:
        head = read_head(path, 1 << 20).decode("utf-8-sig", errors="ignore")
    except InputError:
        return False
    value = first_json_value(head)
    if value is not None:
        return sniff(value)
    return re.match(starts, head) is not None


def first_json_value(text: str) -> Any:
    """The first JSON value of ``text``, or None when it does not start with one."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.JSONDecoder().raw_decode(stripped)[0]
    except RecursionError:
        return None  # nested too deep for Python's parser: no format starts so
    except json.JSONDecodeError:
        first_line = stripped.split("\n", 1)[0]
        try:
            return json.loads(first_line)
        except json.JSONDecodeError:
            return None


def agree(count: int, singular: str = "has", plural: str = "have") -> str:
    """The verb that agrees with ``count`` ("1 span has", "2 spans have")."""
    return singular if count == 1 else plural
