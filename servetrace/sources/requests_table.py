"""One row per request (``--from requests``): BurstGPT's client log, in-house tables.

Many logs hold one row per request with a send time and durations rather than one row
per event. The columns are named with ``--column FIELD=NAME`` (or already carry the
field's name); the fields are:

| field | meaning |
|---|---|
| ``request_id`` | the request's id (default: the row's key in a JSON object, else its index) |
| ``arrival`` | when it was sent (a time point) |
| ``first_token`` | when its first token arrived (a time point) |
| ``end`` | when it ended (a time point) |
| ``ttft`` | first token − arrival (a duration) |
| ``e2e`` | end − arrival (a duration) |
| ``output_tokens`` / ``prompt_tokens`` | token counts |
| ``error_code`` / ``error`` | a failure: a code other than 0/200, or a text → ``error`` |

(``error_code`` 499 is the client closing the request: ``cancellation``.) Without an
``output_tokens`` column the output counts are *unknown* (``analysis/output_counts.py``):
output and total tok/s, ``output_tokens``, TPOT and the formula check are unavailable,
never computed from a guess of 1 per request.

The arrival is ``arrival``, else ``end − e2e``; the first token ``first_token``, else
``arrival + ttft``; the end ``end``, else ``arrival + e2e``. Without any time point the
arrivals are 0 (``arrival_known=False``: throughput unavailable). Numbers follow the
canonical rule: integers are ns, floats are s, unless ``--time-unit`` says otherwise
(durations and time points alike); timestamp columns are exact.

Files: CSV/TSV, Parquet, Arrow IPC, JSON Lines, a JSON list of records, or a JSON
object of records keyed by id (BurstGPT's ``detail_log``). Each row becomes arrival →
first token (one tick: a request-level trace, no ITL) → completion; latencies are those
of ``build_events`` on the one-row-per-request path, like every other importer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError, UsageError
from servetrace.sources.events import ImportResult, Notes, count_phrase, import_result
from servetrace.sources.file_scan import format_of, read_table
from servetrace.sources.reading import json_lines, read_text
from servetrace.sources.times import checked_ns
from servetrace.sources.workload_files import workload_error
from servetrace.units import TIME_UNITS

FORMAT = "requests"
FIELDS = (
    "request_id",
    "arrival",
    "first_token",
    "end",
    "ttft",
    "e2e",
    "output_tokens",
    "prompt_tokens",
    "error_code",
    "error",
)
_POINTS = ("arrival", "first_token", "end")
_DURATIONS = ("ttft", "e2e")
_HINT = (
    "name the columns, e.g. --from requests --column arrival=send_time --column ttft=ttft_s "
    "--column e2e=latency_s --column output_tokens=n_out (fields: " + ", ".join(FIELDS) + ")"
)


def _load(path: Path) -> pl.DataFrame:
    if format_of(path) in ("parquet", "ipc", "csv"):  # a table read as the canonical reader does
        return read_table(path)
    text = read_text(path)
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError:
        try:
            doc = [json.loads(line) for line in json_lines(text) if line.strip()]
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}: neither one JSON document nor JSON Lines ({error.msg}, line "
                f"{error.lineno})"
            ) from None
    if isinstance(doc, dict) and doc and all(isinstance(v, dict) for v in doc.values()):
        rows = [{"_key": key, **value} for key, value in doc.items()]
    elif isinstance(doc, list) and all(isinstance(v, dict) for v in doc):
        rows = doc
    else:
        raise InputError(
            f"{path}: expected one record per request (a list of objects, JSON Lines, or an "
            "object of objects keyed by id)"
        )
    try:
        return pl.DataFrame(rows, infer_schema_length=None)
    except (pl.exceptions.PolarsError, TypeError, ValueError) as error:
        raise InputError(f"{path}: the records do not form one table: {error}") from None


def _to_ns(frame: pl.DataFrame, column: str, unit: str | None, path: Path, field: str) -> pl.Expr:
    dtype = frame.schema[column]
    col = pl.col(column)
    if isinstance(dtype, pl.Datetime):
        return col.dt.epoch("ns")
    if isinstance(dtype, pl.Duration):
        return col.dt.total_nanoseconds()
    if dtype.is_integer() or dtype.is_float():
        scale = TIME_UNITS[unit or ("ns" if dtype.is_integer() else "s")]
        return pl.lit(
            checked_ns(frame[column], scale, lambda row: f"{path}: row {row + 1:,}", field=column)
        )
    raise InputError(
        f"{path}: --column {field}={column}: expected numbers or timestamps, found {dtype}",
        hint="integers are ns and floats are s unless --time-unit says otherwise",
    )


def read(
    path: str | Path,
    columns: Mapping[str, str] | None = None,
    time_unit: str | None = None,
) -> ImportResult:
    path = Path(path)
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise UsageError(f"--time-unit must be one of {', '.join(TIME_UNITS)}, got {time_unit!r}")
    frame = _load(path)
    found = frame.columns
    found_text = ", ".join(c for c in found if c != "_key")
    mapping = dict(columns or {})
    unknown = [k for k in mapping if k not in FIELDS]
    if unknown:
        raise UsageError(
            f"--column {unknown[0]}=…: not a per-request field", hint="fields: " + ", ".join(FIELDS)
        )
    missing_cols = [f"{k}={v}" for k, v in mapping.items() if v not in found]
    if missing_cols:
        raise InputError(
            f"{path}: --column {missing_cols[0]}: no such column (found: {found_text})",
            hint=_HINT,
        )
    source = {f: mapping.get(f, f) for f in FIELDS if mapping.get(f, f) in found}
    if workload_error(path, found, bool(mapping)) is not None:
        raise workload_error(path, found, bool(mapping))  # type: ignore[misc]
    has = set(source)
    if not (has & {"ttft", "first_token"}) or not (has & {"e2e", "end"}):
        raise InputError(
            f"{path}: a per-request table needs a first-token time (ttft or first_token) and "
            f"an end (e2e or end); mapped: {', '.join(sorted(has)) or 'nothing'} "
            f"(found: {found_text})",
            hint=_HINT,
        )
    ns = {
        f: _to_ns(frame, source[f], time_unit, path, f)
        for f in (*_POINTS, *_DURATIONS)
        if f in source
    }
    null = pl.lit(None, pl.Int64)
    arrival_known = "arrival" in ns or ("end" in ns and "e2e" in ns)
    arrival = ns.get("arrival", (ns["end"] - ns["e2e"]) if "end" in ns and "e2e" in ns else None)
    if arrival is None:
        arrival = pl.lit(0, pl.Int64)
    first = ns.get("first_token", arrival + ns["ttft"] if "ttft" in ns else null)
    end = ns.get("end", arrival + ns["e2e"] if "e2e" in ns else null)
    if "request_id" in source:
        rid = pl.col(source["request_id"]).cast(pl.String)
    elif "_key" in found:
        rid = pl.col("_key").cast(pl.String)
    else:
        rid = pl.int_range(pl.len()).cast(pl.String)

    def integers(field: str) -> pl.Expr:
        """The column mapped to ``field`` cast to Int64; null when no column is."""
        return pl.col(source[field]).cast(pl.Int64, strict=False) if field in source else null

    code = integers("error_code")
    text = (
        pl.col(source["error"]).cast(pl.String).str.strip_chars()
        if "error" in source
        else pl.lit(None, pl.String)
    )
    failed = (code.is_not_null() & (code != 0) & (code != 200)) | (
        text.is_not_null() & (text != "")
    )
    cancelled = failed & (code == 499)
    requests = frame.select(
        rid.alias("request_id"),
        arrival.alias("arrival_ns"),
        first.alias("first_ns"),
        end.alias("end_ns"),
        integers("prompt_tokens").alias("prompt_tokens"),
        integers("output_tokens").alias("output_tokens"),
        code.alias("error_code"),
        pl.when(failed)
        .then(pl.coalesce(text.replace("", None), code.cast(pl.String)))
        .alias("error"),
        failed.fill_null(False).alias("_failed"),
        cancelled.fill_null(False).alias("_cancelled"),
    )
    bad = requests.filter(pl.col("arrival_ns").is_null() | pl.col("end_ns").is_null())
    if bad.height:
        raise InputError(
            f"{path}: request {bad['request_id'][0]!r}: no "
            + ("arrival" if bad["arrival_ns"][0] is None else "end")
            + f" time ({count_phrase(bad.height, 'row')} like it)",
            hint="every row needs its times; leave such rows out or fill them",
        )
    served = pl.col("first_ns").is_not_null() & (pl.col("first_ns") <= pl.col("end_ns"))
    requests = requests.with_columns(
        ticks_ns=pl.when(served).then(pl.concat_list("first_ns")),
        terminal=pl.when(pl.col("_cancelled"))
        .then(pl.lit("cancellation"))
        .when(pl.col("_failed"))
        .then(pl.lit("error"))
        .otherwise(pl.lit("completion")),
        terminal_ns=pl.max_horizontal("end_ns", pl.when(served).then(pl.col("first_ns"))),
        error_type=pl.when(pl.col("_failed") & pl.col("error_code").is_null()).then(
            pl.col("error")
        ),
    )
    notes = Notes()
    notes.add(
        "one row per request: a request-level trace (one tick, the first token, per request); "
        + (
            "TTFT, e2e and TPOT are available, the ITL distribution is not"
            if "output_tokens" in source
            else "TTFT and e2e are available, TPOT and the ITL distribution are not"
        )
    )
    if not arrival_known:
        notes.add(
            "no send time in the table (arrival, or end and e2e): every arrival is set to 0, "
            "throughput and concurrency are unavailable"
        )
    if "output_tokens" not in source:
        notes.add(
            "no output_tokens column: output token counts are unknown, so output and total "
            "tok/s, output_tokens, TPOT and the formula check are unavailable (not 1)"
        )
    unserved = requests.filter(~pl.col("_failed") & pl.col("ticks_ns").is_null()).height
    if unserved:
        notes.add(
            f"{count_phrase(unserved, 'request')} without a first token before their end: "
            "invalid (completion with no output token)"
        )
    return import_result(
        requests.drop("first_ns", "end_ns", "_failed", "_cancelled"),
        fmt=FORMAT,
        path=path,
        notes=notes,
        records=frame.height,
        tool_summary=None,
        ticks_available=False,
        arrival_known=arrival_known,
        attributes=["error_type"],
    )
