"""BLIS TraceV2 traces (``blis observe``, ``blis run --trace-output``, ``blis replay
--trace-output``): a YAML header beside a CSV of one row per request.

Pinned to inference-sim/inference-sim at f90a1e3a6787da17c2cd463dab6fb2660b1b1760:
``sim/workload/tracev2.go`` (``TraceHeader``, ``TraceRecord``, ``traceV2Columns``,
``ExportTraceV2``, ``parseTraceRecord``), its writers ``cmd/observe.go`` (real mode:
``send_time_us`` when the request left, ``first_chunk_time_us``/``last_chunk_time_us``
the first and last SSE chunk, ``output_tokens``/``server_input_tokens`` the server's
usage) and ``RequestsToTraceRecords`` (generated and replayed modes: send = arrival, the
chunk times the simulator's first and last token, ``output_tokens`` the length asked
for), and its readers' definitions, ``sim/workload/calibrate.go`` (TTFT =
first_chunk − send, E2E = last_chunk − send) and ``sim/workload/replay.go``
(``injectionTime``). Which files belong together: ``blis_files``.

Every time is integer µs, converted to ns exactly. One request per row:

- arrival = ``send_time_us``, or ``arrival_time_us`` where no send was recorded (0),
  BLIS's own injection time;
- first token = ``first_chunk_time_us`` (0: none reached); a request not streamed in a
  real trace has the response's first byte there, after its whole generation;
- ``status`` ``ok`` → ``completion`` at ``last_chunk_time_us``; ``error`` → ``error`` and
  ``timeout`` (the client's deadline passed) → ``cancellation``, both at the last time
  the row records (``terminal_known=False``: the moment itself is not recorded);
  ``incomplete`` (the simulation ended first) → in flight, no terminal event;
- ``prompt_tokens`` = ``server_input_tokens`` where recorded (> 0), else
  ``prefix_length + input_tokens`` (``input_tokens`` is the part after the shared prefix);
- a completion's ``output_tokens`` = ``output_tokens``, unknown where 0 (no usage was
  returned); unknown on every other row (a simulated row holds the length asked for).

Not expressible: the times of the tokens between the first and the last (a request-level
trace: TTFT, e2e and TPOT, no ITL distribution) and admissions (the client's view).
Kept per request: ``client_id``, ``tenant_id``, ``slo_class``, ``session_id``,
``round_index``, ``model``, ``adapter``, ``streaming``, ``finish_reason``, ``status``
(an empty cell is null). ``tool_summary`` carries the header, whose facts
``runs.declared.blis`` declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources import blis_files
from servetrace.sources.events import (
    ImportResult,
    Notes,
    count_phrase,
    error_type_of,
    import_result,
)
from servetrace.sources.reading import FormatMismatch
from servetrace.sources.sniff import read_all
from servetrace.sources.times import checked_ns
from servetrace.units import TIME_UNITS

FORMAT = "blis"
_INTEGERS = (
    "request_id",
    "round_index",
    "prefix_length",
    "input_tokens",
    "output_tokens",
    "server_input_tokens",
    "arrival_time_us",
    "send_time_us",
    "first_chunk_time_us",
    "last_chunk_time_us",
    "num_chunks",
)
# parseTraceRecord refuses negative counts
_COUNTS = ("prefix_length", "input_tokens", "output_tokens", "server_input_tokens", "num_chunks")
_TIMES = ("arrival_time_us", "send_time_us", "first_chunk_time_us", "last_chunk_time_us")
_TERMINALS = {"ok": "completion", "error": "error", "timeout": "cancellation", "incomplete": None}
# strconv.ParseBool
_BOOLS = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}
_TEXT = ("client_id", "tenant_id", "slo_class", "session_id", "model", "finish_reason")
ATTRIBUTES = (*_TEXT, "adapter", "round_index", "streaming", "status", "error_type")


def _load(path: Path) -> pl.DataFrame:
    try:
        frame = pl.read_csv(read_all(path), infer_schema=False, empty_string_is_null=False)
    except pl.exceptions.PolarsError as error:
        raise InputError(f"{path}: cannot read the CSV: {error}") from None
    missing = [c for c in blis_files.COLUMNS if c not in frame.columns]
    if missing:
        raise FormatMismatch(
            f"{path}: not a BLIS TraceV2 CSV: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(c) for c in missing[:5])} (found: {', '.join(frame.columns[:8])})"
        )
    if frame.height == 0:
        raise InputError(f"{path}: no requests: the CSV has a header row only")
    return frame.with_row_index("_row")


def _refuse(path: Path, frame: pl.DataFrame, bad: pl.Expr, column: str, rule: str) -> None:
    rows = frame.filter(bad)
    if rows.height:
        first = rows.row(0, named=True)
        raise InputError(
            f"{path}: row {first['_row'] + 1} (request_id {first['request_id']!r}): field "
            f"'{column}' {rule}, got {first[column]!r}"
            + (f" ({count_phrase(rows.height, 'row')} like it)" if rows.height > 1 else ""),
            hint="is the file a TraceV2 CSV as BLIS writes it?",
        )


def _typed(path: Path, frame: pl.DataFrame) -> pl.DataFrame:
    """The CSV's text cells checked as ``parseTraceRecord`` does, then typed."""
    for column in _INTEGERS:
        text = pl.col(column).str.strip_chars()
        _refuse(
            path,
            frame,
            text.cast(pl.Int64, strict=False).is_null(),
            column,
            "must be a whole number",
        )
    for column in _COUNTS:
        count = pl.col(column).str.strip_chars().cast(pl.Int64)
        _refuse(path, frame, count < 0, column, "must be >= 0")
    flag = pl.col("streaming").str.strip_chars().str.to_lowercase()
    _refuse(path, frame, ~flag.is_in(list(_BOOLS)), "streaming", "must be true or false")
    status = pl.col("status").str.strip_chars()
    rule = "must be one of " + ", ".join(_TERMINALS)
    _refuse(path, frame, ~status.is_in(list(_TERMINALS)), "status", rule)
    return frame.with_columns(
        *(pl.col(c).str.strip_chars().cast(pl.Int64) for c in _INTEGERS),
        flag.replace_strict(_BOOLS, return_dtype=pl.Boolean).alias("streaming"),
        status.alias("status"),
        *(
            pl.col(c).str.strip_chars().replace("", None).alias(c)
            for c in (*_TEXT, "adapter")
            if c in frame.columns
        ),
    )


def _ns(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    """Each µs time as exact ns, null where BLIS writes 0 (not recorded)."""
    us = TIME_UNITS["us"]
    converted = frame.with_columns(
        checked_ns(frame[column], us, lambda row: f"{path}: row {row + 1}", field=column).alias(
            _ns_name(column)
        )
        for column in _TIMES
    )
    return converted.with_columns(
        pl.when(pl.col(_ns_name(c)) != 0).then(pl.col(_ns_name(c))).alias(_ns_name(c))
        for c in _TIMES
    )


def _ns_name(column: str) -> str:
    return column.removesuffix("_us") + "_ns"


def read(path: str | Path, header: Path | None = None) -> ImportResult:
    """The requests of a TraceV2 trace: ``path`` is its CSV (``header`` its YAML, else the
    one of the same stem beside it) or its header (the CSV of the same stem is read)."""
    path = Path(path)
    if blis_files.is_header(path):
        header, path = path, blis_files.data_beside(path)
    elif header is None:
        header = blis_files.header_beside(path)
    doc = blis_files.read_header(header) if header is not None else None
    frame = _ns(_typed(path, _load(path)), path)
    if "adapter" not in frame.columns:
        frame = frame.with_columns(adapter=pl.lit(None, pl.String))
    terminal = pl.col("status").replace_strict(_TERMINALS, return_dtype=pl.String)
    completed = pl.col("status") == "ok"
    last_seen = pl.max_horizontal("arrival", "first_chunk_time_ns", "last_chunk_time_ns")
    requests = (
        frame.with_columns(
            arrival=pl.coalesce("send_time_ns", "arrival_time_ns", pl.lit(0, pl.Int64)),
        )
        .with_columns(
            request_id=pl.col("request_id").cast(pl.String),
            arrival_ns=pl.col("arrival"),
            ticks_ns=pl.when(pl.col("first_chunk_time_ns").is_not_null()).then(
                pl.concat_list("first_chunk_time_ns")
            ),
            terminal=terminal,
            terminal_ns=pl.when(completed & pl.col("last_chunk_time_ns").is_not_null())
            .then(pl.col("last_chunk_time_ns"))
            .otherwise(last_seen),
            terminal_known=completed & pl.col("last_chunk_time_ns").is_not_null(),
            prompt_tokens=pl.when(pl.col("server_input_tokens") > 0)
            .then(pl.col("server_input_tokens"))
            .otherwise(pl.col("prefix_length") + pl.col("input_tokens")),
            output_tokens=pl.when(completed & (pl.col("output_tokens") > 0)).then(
                pl.col("output_tokens")
            ),
            error=pl.when(~completed & (pl.col("status") != "incomplete")).then(
                pl.coalesce(
                    pl.col("error_message").str.strip_chars().replace("", None), pl.col("status")
                )
            ),
        )
        .with_columns(
            # observe.go words a refused request "HTTP <status>: <body>"
            error_code=pl.col("error").str.extract(r"^HTTP (\d{3}):", 1).cast(pl.Int64),
        )
        .with_columns(
            error_type_of(pl.col("error"))
            .pipe(lambda kind: pl.when(pl.col("error_code").is_null()).then(kind))
            .alias("error_type"),
        )
    )
    notes = _notes(requests, doc, header)
    return import_result(
        requests,
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=frame.height,
        tool_summary=_summary(requests, doc, header),
        ticks_available=False,
        arrival_known=True,
        attributes=ATTRIBUTES,
    )


def _notes(requests: pl.DataFrame, doc: Mapping[str, Any] | None, header: Path | None) -> Notes:
    notes = Notes()
    mode = doc.get("mode") if doc is not None else None
    notes.add(
        "BLIS TraceV2 records each request's first and last chunk, not every token: a "
        "request-level trace (one tick, the first token, per request); TTFT, e2e and TPOT "
        "are available, the ITL distribution is not"
    )
    if header is None:
        notes.add(
            "no TraceV2 header (.yaml of the same stem) beside the CSV: the trace's mode and "
            "server are unknown"
        )
    elif mode in ("generated", "replayed"):
        notes.add(f"a BLIS simulation ({mode} mode): every time is on the simulator's clock")
    if mode == "real":
        unstreamed = requests.filter(~pl.col("streaming") & pl.col("ticks_ns").is_not_null())
        if unstreamed.height:
            notes.add(
                f"requests not streamed ({unstreamed.height}): the first token of each is the "
                "response's first byte, after the whole generation, so its TTFT is its "
                "generation time"
            )
    unsent = requests.filter(pl.col("send_time_ns").is_null()).height
    if mode == "real" and unsent:
        notes.add(
            f"requests with no send_time_us ({unsent}) are placed at their arrival_time_us "
            "(BLIS's injection time): the offset from the run's start, not the wall clock of "
            "the others"
        )
    failed = requests.filter(pl.col("terminal").is_in(["error", "cancellation"])).height
    if failed:
        notes.add(
            f"requests that failed or timed out ({failed}) end at the last time their row "
            "records (terminal_known=False); status 'error' is errored, 'timeout' cancelled"
        )
    uncounted = requests.filter(
        (pl.col("status") == "ok") & pl.col("output_tokens").is_null()
    ).height
    if uncounted:
        notes.add(
            f"completed requests with output_tokens 0 ({uncounted}: no usage was returned) "
            "have an unknown output count"
        )
    return notes


def _summary(
    requests: pl.DataFrame, doc: Mapping[str, Any] | None, header: Path | None
) -> dict[str, Any]:
    models = requests["model"].drop_nulls().unique().to_list()
    return {
        "header": dict(doc) if doc is not None else None,
        "header_file": str(header) if header is not None else None,
        "model_column": models[0] if len(models) == 1 else None,
    }
