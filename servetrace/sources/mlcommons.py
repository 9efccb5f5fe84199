"""MLCommons endpoints (``inference-endpoint``) event database: SQLite ``events`` table.

Pinned to mlcommons/endpoints:

- current schema (v0.5 and main): ``src/inference_endpoint/async_utils/services/
  event_logger/sql_writer.py`` at ea3327530376fef63d706f4105612e17c2c80a8d
  (``EventRowModel``): ``events(id, sample_uuid, event_type, timestamp_ns,
  conversation_id, turn, data)``, ``event_type`` a topic string of
  ``src/inference_endpoint/core/record.py`` (``sample.issued``, ``sample.recv_first``,
  ``sample.recv_non_first``, ``sample.complete``, ``error.generic`` …, ``session.*``);
  ``load_generator/session.py`` writes ``error.generic`` **before** ``sample.complete``
  for a failed sample, with ``data`` = msgspec-encoded ``ErrorData`` (``error_type``,
  ``error_message``);
- the older schema, removed in 2026 (``src/inference_endpoint/metrics/recorder.py``
  before 2a60f634fb06778a7ae8c667203f8661d49ec3a9): ``events(sample_uuid, event_type,
  timestamp_ns, data)`` with ``loadgen_issue_called``, ``first_chunk_received``,
  ``non_first_chunk_received``, ``complete`` and ``error``.

``timestamp_ns`` is integer ns on the load generator's ``time.monotonic_ns()``: exact,
relative within one run (not wall-clock). This is a **client-side** trace with every
chunk's time, so ITL is available. Mapping per ``sample_uuid``:

- ``sample.issued`` → arrival; ``sample.recv_first`` → first token;
  ``sample.recv_non_first`` → tokens; ``sample.complete`` → completion;
- an error row (``error.*`` / ``error``) for the sample, then its completion → an
  **errored** request: ``error`` at the completion (not a cancellation) with ``error``
  (the message) and the ``error_type`` attribute it is counted under; its chunks
  received before the error are kept; an error row whose type is a cancellation
  (``asyncio.CancelledError``) is the client's cancellation, so → ``cancellation``;
- a completed sample without chunks (not streamed) gets its one tick at the completion
  (``first_token_known=False``, TTFT = e2e).

Not expressible: admission (client-side: queue wait and prefill are unavailable), token
counts (the database stores chunks, not tokens: each chunk is a tick of one token, so
TPOT and ITL are per chunk), completions of warm-up samples (not logged, so such samples
stay in flight). Session events and errors without a sample are counted in the warnings.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.schema import MAX_ABS_NS, SOURCE_CLIENT
from servetrace.sources._engine import agree, engine_result
from servetrace.sources.events import ImportResult, Notes, count_phrase
from servetrace.sources.reading import FormatMismatch

FORMAT = "mlcommons"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_REQUIRED = ("sample_uuid", "event_type", "timestamp_ns")
# event_type (current topic, or the removed schema's value) → role
_ROLES = {
    "sample.issued": "issued",
    "loadgen_issue_called": "issued",
    "sample.recv_first": "first",
    "first_chunk_received": "first",
    "sample.recv_non_first": "chunk",
    "non_first_chunk_received": "chunk",
    "sample.complete": "complete",
    "complete": "complete",
    "error": "error",
}
_NO_SAMPLE = ("", "<NO_SAMPLE_UUID>")
# Events about the run, not one sample: counted, not imported. The removed schema's were
# ``test_started`` / ``test_ended``; the current topics are ``session.*``.
_SESSION_ROW = "(event_type LIKE 'session.%' OR event_type IN ('test_started', 'test_ended'))"


def is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def sniff_file(path: Path) -> bool:
    """True for an SQLite file with an ``events`` table of this shape; an SQLite file
    that cannot be read at all is an error (it is no other format either)."""
    if not path.is_file() or not is_sqlite(path):
        return False
    return set(_REQUIRED) <= set(_columns(path))


def _connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise InputError(f"{path}: cannot open the SQLite database: {error}") from None


def _columns(path: Path) -> list[str]:
    """The columns of table ``events`` (none without one); an unreadable database is an
    error naming the file."""
    connection = _connect(path)
    try:
        rows = connection.execute("PRAGMA table_info(events)").fetchall()
    except sqlite3.DatabaseError as error:
        raise InputError(
            f"{path}: the SQLite database is unreadable: {error}",
            hint="the file may be cut short or still being written; copy it again",
        ) from None
    finally:
        connection.close()
    return [row[1] for row in rows]


def read(path: str | Path) -> ImportResult:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if not is_sqlite(path):
        raise FormatMismatch(f"{path}: not an SQLite database (MLCommons endpoints' events.db)")
    columns = _columns(path)
    missing = [name for name in _REQUIRED if name not in columns]
    if missing:
        found = ", ".join(columns) if columns else "no 'events' table"
        raise FormatMismatch(
            f"{path}: not an MLCommons endpoints event database: table 'events' lacks "
            f"{', '.join(missing)} ({found})"
        )
    schema = "current" if "conversation_id" in columns else "removed four-column"
    frame, loose = _load(path, columns)
    notes = Notes()
    notes.add(
        f"MLCommons endpoints event database ({schema} schema): client-side times on the "
        "load generator's monotonic clock (exact ns, relative within this run)"
    )
    if loose:
        notes.add(_loose_note(loose))
    requests = _requests(path, frame, notes)
    attributes = [name for name in ("conversation_id", "turn") if name in requests.columns]
    return engine_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=requests.height,
        ticks_available=True,
        arrival_known=True,
        attributes=["error_type", "first_token_known", *attributes],
        source=SOURCE_CLIENT,
    )


def _in(role: str) -> str:
    names = [name for name, r in _ROLES.items() if r == role]
    return "event_type IN (" + ", ".join(f"'{n}'" for n in names) + ")"


_ERROR_ROW = "(event_type = 'error' OR event_type LIKE 'error.%')"
_SAMPLE_ROW = f"sample_uuid IS NOT NULL AND sample_uuid NOT IN {tuple(_NO_SAMPLE)!r}"


def _load(path: Path, columns: list[str]) -> tuple[pl.DataFrame, dict[str, int]]:
    """One row per sample, aggregated by SQLite itself (the database may hold millions of
    chunk rows; Python sees one row per sample). Also the rows not imported, counted by
    what they are (``_loose_note``), so every row of the table is accounted for."""
    optional = [c for c in ("conversation_id", "turn") if c in columns]
    known = " OR ".join([*(_in(r) for r in ("issued", "first", "chunk", "complete")), _ERROR_ROW])
    ticks = f"{_in('first')} OR {_in('chunk')}"
    query = f"""
        SELECT sample_uuid,
            MIN(CASE WHEN {_in("issued")} THEN timestamp_ns END),
            SUM(CASE WHEN {_in("issued")} THEN 1 ELSE 0 END),
            group_concat(CASE WHEN {ticks} THEN timestamp_ns END),
            MIN(CASE WHEN {_in("complete")} THEN timestamp_ns END),
            MIN(CASE WHEN {_ERROR_ROW} THEN timestamp_ns END)
            {"".join(f", MAX({c})" for c in optional)}
        FROM events WHERE {_SAMPLE_ROW} AND ({known})
        GROUP BY sample_uuid ORDER BY MIN({"id" if "id" in columns else "rowid"})
    """
    data = "data" if "data" in columns else "NULL"
    connection = _connect(path)
    try:
        _check_rows(path, connection, known)
        samples = connection.execute(query).fetchall()
        errors = connection.execute(
            f"SELECT sample_uuid, {data} FROM events WHERE {_SAMPLE_ROW} AND {_ERROR_ROW} "
            "ORDER BY timestamp_ns"
        ).fetchall()
        loose = connection.execute(
            f"SELECT CASE WHEN {_SESSION_ROW} THEN 'session' WHEN {_ERROR_ROW} THEN 'error' "
            f"WHEN {known} THEN 'no sample' ELSE 'unknown ' || event_type END, COUNT(*) "
            f"FROM events WHERE NOT ({_SAMPLE_ROW} AND ({known})) GROUP BY 1 ORDER BY 1"
        ).fetchall()
    except sqlite3.DatabaseError as error:
        raise InputError(f"{path}: cannot read table 'events': {error}") from None
    finally:
        connection.close()
    names = ["sample", "arrival_ns", "issued", "chunks", "complete_ns", "error_ns", *optional]
    dtypes = [pl.Utf8, pl.Int64, pl.Int64, pl.Utf8, pl.Int64, pl.Int64]
    dtypes += [pl.Utf8 if c == "conversation_id" else pl.Int64 for c in optional]
    values = list(zip(*samples, strict=True)) if samples else [() for _ in names]
    frame = pl.DataFrame(
        [pl.Series(n, v, dtype=d) for n, v, d in zip(names, values, dtypes, strict=True)]
    ).with_columns(
        chunks_ns=pl.col("chunks")
        .str.split(",")
        .list.eval(pl.element().cast(pl.Int64))
        .list.sort()
        .fill_null(pl.lit([], dtype=pl.List(pl.Int64)))
    )
    first_error: dict[str, Any] = {}
    for sample, blob in errors:  # error rows only: few
        first_error.setdefault(sample, blob)
    decoded = [
        _error_text(first_error.get(s)) if s in first_error else (None, None)
        for s in frame["sample"]
    ]
    frame = frame.with_columns(
        error_type=pl.Series([d[0] for d in decoded], dtype=pl.Utf8),
        error=pl.Series([d[1] for d in decoded], dtype=pl.Utf8),
    )
    return frame, {str(kind): int(count) for kind, count in loose}


def _check_rows(path: Path, connection: sqlite3.Connection, known: str) -> None:
    """Refuse the first row SQLite would hand over in a shape the import cannot use: a
    missing event type, a time that is not integer ns within the canonical range, a
    sample id that is not text, or an event of a sample whose type is not known (dropping
    it would move that sample's times)."""
    limit = MAX_ABS_NS
    checks = (
        ("event_type IS NULL", "event_type", "must be present"),
        (
            f"typeof(timestamp_ns) != 'integer' OR timestamp_ns >= {limit} "
            f"OR timestamp_ns <= -{limit}",
            "timestamp_ns",
            "must be an integer (ns) within the ±4.6e18 ns (±146 years) a time may span",
        ),
        (
            "typeof(sample_uuid) NOT IN ('text', 'integer', 'null')",
            "sample_uuid",
            "must be text",
        ),
        (
            f"{_SAMPLE_ROW} AND NOT ({known}) AND NOT {_SESSION_ROW}",
            "event_type",
            "is not an event type this importer knows",
        ),
    )
    for condition, field, rule in checks:
        row = connection.execute(
            f"SELECT rowid, quote({field}) FROM events WHERE {condition} LIMIT 1"
        ).fetchone()
        if row is not None:
            raise InputError(
                f"{path}: events row {row[0]}: field '{field}' {rule}, got {row[1]}",
                hint="known types: " + ", ".join(_ROLES) + ", error.*, session.*"
                if field == "event_type" and row[1] != "NULL"
                else None,
            )


def _loose_note(loose: dict[str, int]) -> str:
    """What the rows not imported were: session events, errors and sample events without a
    sample, and event types not known, each named."""
    described = {
        "session": "session events",
        "error": "errors without a sample",
        "no sample": "sample events without a sample id",
    }
    parts = [
        f"{count} {described[kind]}"
        if kind in described
        else f"{count} of unknown type {kind.removeprefix('unknown ')!r}"
        for kind, count in loose.items()
    ]
    total = sum(loose.values())
    return (
        f"{count_phrase(total, 'row')} {agree(total, 'is', 'are')} not about one sample "
        f"({'; '.join(parts)}) and {agree(total, 'was', 'were')} not imported"
    )


def _requests(path: Path, per_sample: pl.DataFrame, notes: Notes) -> pl.DataFrame:
    orphans = per_sample.filter(pl.col("arrival_ns").is_null())
    if orphans.height:
        raise InputError(
            f"{path}: sample {orphans['sample'][0]!r}: it has events but no "
            "'sample.issued' row (the arrival)",
            hint="the database may be cut short at its start; "
            f"{count_phrase(orphans.height, 'sample')} {agree(orphans.height, 'is', 'are')} "
            "affected",
        )
    errored = pl.col("error_ns").is_not_null()
    # asyncio.CancelledError: the client cancelled the sample; it did not fail.
    cancelled = pl.col("error_type").str.contains("(?i)cancel").fill_null(False)
    done = pl.col("complete_ns").is_not_null()
    no_chunks = pl.col("chunks_ns").list.len() == 0
    requests = per_sample.with_columns(
        request_id=pl.col("sample"),
        first_token_known=~no_chunks,
        ticks_ns=pl.when(no_chunks & done & ~errored)
        .then(pl.concat_list(pl.col("complete_ns")))
        .otherwise(pl.col("chunks_ns")),
        terminal=pl.when(errored & cancelled)
        .then(pl.lit("cancellation"))
        .when(errored)
        .then(pl.lit("error"))
        .when(done)
        .then(pl.lit("completion")),
        terminal_ns=pl.when(errored)
        .then(pl.coalesce("complete_ns", "error_ns"))
        .otherwise(pl.col("complete_ns")),
    )
    _report(requests, notes)
    return requests


def _error_text(data: Any) -> tuple[str | None, str | None]:
    """``(error_type, message)`` of an ErrorData blob: msgspec writes it as a tagged array
    (``["ErrorData", type, message]``); older writers as an object."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("utf-8", errors="replace")
    if data is None or data == "":
        return None, "error"
    try:
        value = json.loads(data) if isinstance(data, str) else data
    except json.JSONDecodeError:
        return None, str(data)
    if isinstance(value, dict):
        kind = value.get("error_type")
        message = value.get("error_message")
        return (None if kind is None else str(kind)), ": ".join(
            str(p) for p in (kind, message) if p
        ) or None
    if isinstance(value, list):
        parts = [str(p) for p in value if isinstance(p, str)]
        if parts and parts[0] == "ErrorData":
            parts = parts[1:]
        kind = parts[0] if parts else None
        return kind, ": ".join(p for p in parts if p) or None
    return None, str(value)


def _report(requests: pl.DataFrame, notes: Notes) -> None:
    notes.add(
        "the database stores when each chunk arrived, not how many tokens it held: each "
        "chunk is one tick of one token, so TPOT and ITL are per chunk; prompt lengths are "
        "not stored; admission is not seen by a client (queue wait and prefill unavailable)"
    )
    errored = requests.filter(pl.col("terminal") == "error").height
    if errored:
        notes.add(
            f"{count_phrase(errored, 'sample')} failed (an error row, then completion): each "
            "is an errored request ending with an 'error' (not a cancellation), its message in "
            "'error', counted by its 'error_type'"
        )
    unstreamed = requests.filter(
        ~pl.col("first_token_known") & (pl.col("terminal") == "completion")
    ).height
    if unstreamed:
        notes.add(
            f"{count_phrase(unstreamed, 'completed sample')} {agree(unstreamed)} "
            "no chunk (not streamed): "
            "their one tick is the completion (first_token_known=False, TTFT = e2e)"
        )
    open_ = requests.filter(pl.col("terminal").is_null()).height
    if open_:
        notes.add(
            f"{count_phrase(open_, 'sample')} {agree(open_, 'was', 'were')} "
            "issued but never completed (warm-up "
            "samples, whose completion is not logged, or in flight when the run stopped): "
            "they are in flight"
        )
    reissued = requests.filter(pl.col("issued") > 1).height
    if reissued:
        notes.add(
            f"{count_phrase(reissued, 'sample')} {agree(reissued, 'was', 'were')} "
            "issued more than once: the first "
            "issue is the arrival"
        )
