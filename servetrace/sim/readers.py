"""Workload files: the Azure LLM inference trace 2023 and Mooncake (FAST'25) public
traces, and servetrace's own workload table (CSV or Parquet), dispatched by
`read_workload`.

These are the only functions of the simulator that open files; every problem with a file
is an `InputError` naming the file, the line and the field.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from servetrace.errors import InputError, UsageError, first_line
from servetrace.sim.workloads import (
    WORKLOAD_SCHEMA,
    missing_columns,
    request_ids,
    validate_workload,
)
from servetrace.units import NS_PER_DAY as _NS_PER_DAY
from servetrace.units import NS_PER_MS as _NS_PER_MS
from servetrace.units import NS_PER_S as _NS_PER_S

#: Formats `read_workload` understands, with what they are.
WORKLOAD_FORMATS: dict[str, str] = {
    "azure": "Azure LLM inference trace 2023 CSV (TIMESTAMP, ContextTokens, GeneratedTokens)",
    "mooncake": "Mooncake FAST'25 JSONL (timestamp ms, input_length, output_length, hash_ids)",
    "workload": "servetrace workload table, CSV or Parquet "
    "(request_id, arrival_ns, prompt_tokens, output_tokens)",
}

AZURE_COLUMNS: tuple[str, str, str] = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_FIELDS: tuple[str, str, str] = ("timestamp", "input_length", "output_length")

# `YYYY-MM-DD HH:MM:SS[.fffffffff]`, the Azure trace's naive timestamps (7 digits there).
_TIMESTAMP_RE = r"^\s*(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*$"


def read_workload(path: str | Path, fmt: str | None = None) -> pl.DataFrame:
    """Read a workload file; ``fmt`` is one of `WORKLOAD_FORMATS` or None to detect it.

    Detection: ``.jsonl``/``.ndjson``/``.json`` or a first character ``{`` is Mooncake;
    ``.parquet`` is a servetrace workload table; a CSV is Azure when its header has
    ``TIMESTAMP`` or ``ContextTokens``, a workload table when it has ``arrival_ns``.
    Raises `InputError` (naming the file, and the line and field when it is the data)
    when the file is missing, unreadable, of unknown format or malformed.
    """
    p = Path(path)
    _check_readable(p)
    kind = fmt.lower() if fmt is not None else _detect_format(p)
    if kind == "azure":
        return read_azure_2023(p)
    if kind == "mooncake":
        return read_mooncake(p)
    if kind == "workload":
        return _read_workload_table(p)
    raise UsageError(
        f"unknown workload format {fmt!r}",
        hint="choose one of: " + ", ".join(WORKLOAD_FORMATS),
    )


def read_azure_2023(path: str | Path) -> pl.DataFrame:
    """Read an Azure LLM inference trace 2023 CSV (Splitwise, Patel et al., ISCA 2024).

    Columns: ``TIMESTAMP`` (naive ``YYYY-MM-DD HH:MM:SS.fffffff``, 100 ns ticks),
    ``ContextTokens`` → ``prompt_tokens``, ``GeneratedTokens`` → ``output_tokens``. The
    timestamp is parsed with integer arithmetic (date, h, m, s and the fraction padded
    to 9 digits), never through float seconds, so every tick is exact. Request ids are
    ``r`` + the zero-based data-row index, zero-padded (row 0 is line 2 of the file).
    A missing final newline is fine (the published files have none).
    """
    p = Path(path)
    _check_readable(p)
    try:
        raw = pl.read_csv(p, infer_schema=False)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: not a readable CSV ({first_line(exc)})") from None
    missing = [c for c in AZURE_COLUMNS if c not in raw.columns]
    if missing:
        raise missing_columns(
            str(p),
            missing,
            raw.columns,
            "an Azure LLM inference trace has the header TIMESTAMP,ContextTokens,GeneratedTokens",
        )
    if raw.height == 0:
        raise InputError(f"{p}: no requests (the file has a header only)")

    ts = _parse_naive_timestamp_ns(pl.col("TIMESTAMP"))
    parsed = raw.select(
        ts.alias("ts_ns"),
        _parse_count(pl.col("ContextTokens")).alias("prompt_tokens"),
        _parse_count(pl.col("GeneratedTokens")).alias("output_tokens"),
    )
    for src, dst, what in (
        ("TIMESTAMP", "ts_ns", "a timestamp like 2023-11-16 18:15:46.6805900"),
        ("ContextTokens", "prompt_tokens", "a whole number of tokens >= 0"),
        ("GeneratedTokens", "output_tokens", "a whole number of tokens >= 0"),
    ):
        bad = parsed[dst].is_null()
        if bad.any():
            row = int(bad.arg_true()[0])
            count = int(bad.sum())
            raise InputError(
                f"{p}: line {row + 2}: field '{src}' is not {what} (got {raw[src][row]!r})",
                hint=(f"{count} rows in all have this problem; " if count > 1 else "")
                + "TIMESTAMP is 'YYYY-MM-DD HH:MM:SS.fffffff' (no time zone); the token "
                "counts are integers",
            )
    out = pl.DataFrame(
        {
            "request_id": request_ids(raw.height),
            "arrival_ns": parsed["ts_ns"],
            "prompt_tokens": parsed["prompt_tokens"],
            "output_tokens": parsed["output_tokens"],
        },
        schema=WORKLOAD_SCHEMA,
    )
    return validate_workload(out, str(p))


def read_mooncake(path: str | Path) -> pl.DataFrame:
    """Read a Mooncake (Kimi, FAST'25) trace: JSON Lines, one request per line.

    Fields: ``timestamp`` (int ms, relative) → ``arrival_ns`` (exact, times 10^6),
    ``input_length`` → ``prompt_tokens``, ``output_length`` → ``output_tokens``, and the
    optional ``hash_ids`` (prefix-block ids, 512 tokens each) kept as the List(Int64)
    column ``prefix_blocks`` so that prefix sharing stays visible. Tied timestamps are
    common (the conversation trace is quantised to ~1 s) and are kept, in file order.
    Request ids are ``r`` + the zero-based record index, zero-padded.
    """
    p = Path(path)
    _check_readable(p)
    try:
        raw = pl.read_ndjson(p, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        raise _mooncake_diagnose(p) from None
    ok = raw.height > 0 and all(
        f in raw.columns and raw.schema[f].is_integer() and raw[f].null_count() == 0
        for f in MOONCAKE_FIELDS
    )
    if ok and "hash_ids" in raw.columns:
        dtype = raw.schema["hash_ids"]
        ok = isinstance(dtype, pl.List) and (dtype.inner.is_integer() or dtype.inner == pl.Null)
    if ok:
        ok = not raw.select(
            pl.any_horizontal([(pl.col(f) < 0).any() for f in MOONCAKE_FIELDS])
        ).item()
    if not ok:
        raise _mooncake_diagnose(p)
    columns: dict[str, pl.Series] = {
        "request_id": pl.Series(request_ids(raw.height), dtype=pl.String),
        "arrival_ns": raw["timestamp"].cast(pl.Int64) * _NS_PER_MS,
        "prompt_tokens": raw["input_length"].cast(pl.Int64),
        "output_tokens": raw["output_length"].cast(pl.Int64),
    }
    if "hash_ids" in raw.columns:
        columns["prefix_blocks"] = raw["hash_ids"].cast(pl.List(pl.Int64))
    return validate_workload(pl.DataFrame(columns), str(p))


# --------------------------------------------------------------------------- helpers


def _check_readable(p: Path) -> None:
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a workload file")


def _parse_count(col: pl.Expr) -> pl.Expr:
    """A non-negative integer from a string column; null when it is anything else."""
    value = col.str.strip_chars().cast(pl.Int64, strict=False)
    return pl.when(value >= 0).then(value)


def _parse_naive_timestamp_ns(col: pl.Expr) -> pl.Expr:
    """Exact Int64 ns since 1970 from ``YYYY-MM-DD HH:MM:SS[.f…]`` strings; null if not."""
    parts = col.str.extract_groups(_TIMESTAMP_RE)
    day = parts.struct.field("1").str.strptime(pl.Date, "%Y-%m-%d", strict=False).cast(pl.Int64)
    hour = parts.struct.field("2").cast(pl.Int64)
    minute = parts.struct.field("3").cast(pl.Int64)
    second = parts.struct.field("4").cast(pl.Int64)
    frac_ns = parts.struct.field("5").fill_null("0").str.pad_end(9, "0").cast(pl.Int64)
    total = (
        day * _NS_PER_DAY
        + hour * 3600 * _NS_PER_S
        + minute * 60 * _NS_PER_S
        + second * _NS_PER_S
        + frac_ns
    )
    valid = (hour < 24) & (minute < 60) & (second < 60)
    return pl.when(valid).then(total)


def _mooncake_diagnose(p: Path) -> InputError:
    """Scan a Mooncake file line by line and describe its first problem."""
    records = 0
    try:
        with p.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    return InputError(
                        f"{p}: line {lineno}: not valid JSON ({exc.msg} at column {exc.colno})",
                        hint="a Mooncake trace has one JSON object per line",
                    )
                if not isinstance(obj, dict):
                    return InputError(
                        f"{p}: line {lineno}: expected a JSON object, got {type(obj).__name__}",
                        hint="a Mooncake trace has one JSON object per line",
                    )
                records += 1
                for field in MOONCAKE_FIELDS:
                    if field not in obj:
                        return InputError(
                            f"{p}: line {lineno}: missing field '{field}' "
                            f"(found: {', '.join(obj) or 'none'})",
                            hint="a Mooncake record has timestamp, input_length, "
                            "output_length and hash_ids",
                        )
                    value = obj[field]
                    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                        unit = "milliseconds" if field == "timestamp" else "tokens"
                        return InputError(
                            f"{p}: line {lineno}: field '{field}' must be a whole number "
                            f"of {unit} >= 0 (got {value!r})"
                        )
                ids = obj.get("hash_ids")
                if ids is not None and not (
                    isinstance(ids, list)
                    and all(isinstance(h, int) and not isinstance(h, bool) for h in ids)
                ):
                    return InputError(
                        f"{p}: line {lineno}: field 'hash_ids' must be a list of integers"
                    )
    except UnicodeDecodeError:
        return InputError(f"{p}: not a text file (it is not valid UTF-8)")
    except OSError as exc:
        return InputError(f"{p}: cannot be read ({exc.strerror})")
    if records == 0:
        return InputError(f"{p}: no requests (the file is empty)")
    return InputError(f"{p}: not a readable Mooncake trace")


def _detect_format(p: Path) -> str:
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "mooncake"
    if suffix == ".parquet":
        return "workload"
    try:
        with p.open("rb") as fh:
            start = fh.read(4096)
    except OSError as exc:
        raise InputError(f"{p}: cannot be read ({exc.strerror})") from None
    text = start.lstrip().decode("utf-8", errors="replace")
    if text.startswith("{"):
        return "mooncake"
    if start.startswith(b"PAR1"):
        return "workload"
    header = (
        [h.strip().strip('"') for h in text.split("\n", 1)[0].rstrip("\r").split(",")]
        if text
        else []
    )
    if "TIMESTAMP" in header or "ContextTokens" in header:
        return "azure"
    if "arrival_ns" in header:
        return "workload"
    raise InputError(
        f"{p}: cannot tell the workload format (header: {', '.join(header) or 'empty'})",
        hint="pass the format explicitly, one of: " + ", ".join(WORKLOAD_FORMATS),
    )


def _read_workload_table(p: Path) -> pl.DataFrame:
    try:
        if p.suffix.lower() == ".parquet" or p.read_bytes()[:4] == b"PAR1":
            raw = pl.read_parquet(p)
        else:
            raw = pl.read_csv(p, schema_overrides=WORKLOAD_SCHEMA)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{p}: not a readable workload table ({first_line(exc)})",
            hint="a workload has integer columns arrival_ns, prompt_tokens, output_tokens",
        ) from None
    return validate_workload(raw, str(p))
