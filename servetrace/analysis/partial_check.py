"""What a partial read from disk or the wire must be before it is merged (docs/partials.md).

A partial is written by servetrace, but read from wherever it was copied: a truncated,
foreign, newer or edited one must be an ``InputError`` naming the partial, the part and
the rule it breaks (exit 3, one line), never a wrong report nor a traceback deep in the
merge. So every manifest key has its JSON type (``true`` is not the version ``1``, ``1e30``
not a timestamp), every table its columns of their type, and the tables agree with each
other and with the manifest (row counts, ITL count, request keys).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.analysis.histogram import RESOLUTION, LogHistogram
from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.metrics import REQUEST_COLUMNS
from servetrace.analysis.partial import FORMAT, TIMELINE_COLUMNS, VERSION, Partial
from servetrace.analysis.partial_settings import ShardSettings
from servetrace.dtypes import EVENT_DTYPE
from servetrace.errors import InputError
from servetrace.sources.inputs import PARTIAL_MANIFEST as MANIFEST

TABLES = ("timeline", "requests", "transitions", "gaps", "histogram", "deferred", "quarantine")
INT64_MAX = 2**63 - 1
# Column kinds: what each column of a table must hold (Null: an all-null column of an
# empty part, which a reader cannot type).
INT, FLOAT, TEXT, ID = "integer", "number", "text", "integer or text"
_KIND = {
    INT: lambda t: t.is_integer(),
    FLOAT: lambda t: t.is_numeric(),
    TEXT: lambda t: t == pl.String,
    ID: lambda t: t.is_integer() or t == pl.String,
}
_TIMELINE = {
    "request_id": ID,
    "rule": TEXT,
    **{c: INT for c in TIMELINE_COLUMNS if c not in (KEY, "request_id", "rule")},
}
_REQUESTS = {
    **dict.fromkeys(REQUEST_COLUMNS, INT),
    "request_id": ID,
    "outcome": TEXT,
    "cancelled_in": TEXT,
    **dict.fromkeys(("tpot_ns", "itl_mean_ns", "formula_residual_ns"), FLOAT),
}
_EVENTS = {
    "request_id": ID,
    "event": TEXT,
    "ts": INT,
    "tokens": INT,
    "prompt_tokens": INT,
    "output_tokens": INT,
}
COLUMNS: dict[str, dict[str, str]] = {
    "timeline": {KEY: INT, **_TIMELINE},
    "requests": {KEY: INT, **_REQUESTS},
    "transitions": {KEY: INT, "ts": INT, "d_queued": INT, "d_running": INT, "d_in_system": INT},
    "gaps": {KEY: INT, "itl_ns": INT},
    "histogram": {"b": INT, "n": INT, "lo": INT, "hi": INT},
    "deferred": _EVENTS,
    "quarantine": {**_EVENTS, "rule": TEXT},
}
# The columns without which a table is not that table (others may be absent: an
# attribute a shard does not have, the token columns of a trace without them).
REQUIRED = {
    **{name: tuple(columns) for name, columns in COLUMNS.items()},
    "deferred": ("request_id", "event", "ts"),
    "quarantine": ("rule",),
}


def bad(where: str, what: str) -> InputError:
    return InputError(
        f"{where}: not a servetrace partial: {what}",
        hint="partials are written by 'servetrace analyze SHARD --partial-out DIR' or "
        "'servetrace merge … -o DIR' (docs/partials.md)",
    )


def _is_int(value: Any, low: int = 0, high: int = INT64_MAX) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_count(text: Any) -> bool:
    return isinstance(text, str) and text.isascii() and text.isdigit()


def _require(where: str, ok: bool, key: str, rule: str) -> None:
    if not ok:
        raise bad(where, f"its {MANIFEST} {key} {rule}")


def check_manifest(where: str, manifest: Any) -> dict[str, Any]:
    """``manifest`` as written by ``partial_io.manifest_of``, else an ``InputError``."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise bad(where, f"its {MANIFEST} does not say format {FORMAT!r}")
    version = manifest.get("version")
    if not _is_int(version) or version != VERSION:
        raise InputError(
            f"{where}: partial format version {version!r}; this servetrace reads version {VERSION}",
            hint="make the partials again with this servetrace (merge partials of one version)",
        )
    for key in ("trace", "itl", "rows"):
        _require(where, isinstance(manifest.get(key), dict), key, "is not an object")
    trace, itl, rows = manifest["trace"], manifest["itl"], manifest["rows"]
    span = []
    for key in ("start_ns", "end_ns"):
        value = trace.get(key)
        ok = value is None or _is_int(value, -INT64_MAX - 1)
        _require(where, ok, f"trace.{key}", "is not an Int64 nanosecond time or null")
        span.append(value)
    if None not in span:
        _require(where, span[0] <= span[1], "trace.end_ns", "is before trace.start_ns")
    _require(
        where,
        isinstance(trace.get("has_releases"), bool),
        "trace.has_releases",
        "is not true or false",
    )
    for name in TABLES:
        _require(where, _is_int(rows.get(name)), f"rows.{name}", "is not a row count")
    kind = itl.get("kind")
    _require(where, kind in ("exact", "histogram"), "itl.kind", "is not 'exact' or 'histogram'")
    _require(where, _is_int(itl.get("count")), "itl.count", "is not a count")
    _require(
        where,
        itl.get("resolution") == RESOLUTION and _is_int(itl.get("resolution")),
        "itl.resolution",
        f"is not {RESOLUTION}",
    )
    for key in ("sum", "sum_sq"):
        if kind == "histogram":
            ok = _is_count(itl.get(key))
            _require(where, ok, f"itl.{key}", "is not a decimal integer (the histogram kind)")
        else:
            _require(where, itl.get(key) is None, f"itl.{key}", "is not null (the exact kind)")
    for key in ("inputs", "attributes", "warnings"):
        value = manifest.get(key, [])
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        _require(where, ok, key, "is not a list of strings")
    try:
        ShardSettings.from_json(manifest.get("settings"))
    except ValueError as error:
        raise bad(where, f"its {MANIFEST} {error} is missing or garbled") from None
    return manifest


def _check_columns(where: str, name: str, frame: pl.DataFrame, expected: int) -> pl.DataFrame:
    missing = [c for c in REQUIRED[name] if c not in frame.columns]
    if missing:
        raise bad(where, f"table {name} has no column {', '.join(missing)}")
    for column, kind in COLUMNS[name].items():
        dtype = frame.schema.get(column)
        if dtype is not None and dtype != pl.Null and not _KIND[kind](dtype):
            raise bad(where, f"{name} column {column} is {dtype}, not {kind}")
    if frame.height != expected:
        raise InputError(
            f"{where}: table {name} has {frame.height:,} rows, its manifest says "
            f"{expected:,}: the partial is incomplete",
            hint="write the partial again",
        )
    return frame


def _check_keys(where: str, tables: dict[str, pl.DataFrame]) -> None:
    """Keys are ``0..n-1`` over the timeline; every other table's rows are of its requests."""
    keys = tables["timeline"][KEY]
    n = keys.len()
    if (
        keys.null_count()
        or keys.n_unique() != n
        or (n and (keys.min() != 0 or keys.max() != n - 1))
    ):
        raise bad(where, f"timeline {KEY} is not 0..{n - 1}, one per request")
    valid = tables["requests"][KEY]
    if (
        valid.null_count()
        or valid.n_unique() != valid.len()
        or not valid.is_in(keys.implode()).all()
    ):
        raise bad(where, f"requests {KEY} names no request of the timeline, or one twice")
    for name in ("transitions", "gaps"):
        frame = tables[name]
        if frame.height and not frame[KEY].is_in(valid.implode()).fill_null(False).all():
            raise bad(where, f"{name} {KEY} names no request of the requests table")


def _events(where: str, name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """The event column as the engine has it (the Enum), every value one it knows."""
    try:
        return frame.with_columns(pl.col("event").cast(pl.String).cast(EVENT_DTYPE))
    except pl.exceptions.PolarsError:
        raise bad(where, f"{name} column event holds a value that is not an event") from None


def build(where: str, manifest: dict[str, Any], tables: dict[str, pl.DataFrame]) -> Partial:
    """The partial of a checked manifest and its tables, every one checked against it."""
    for name in TABLES:
        _check_columns(where, name, tables[name], int(manifest["rows"][name]))
    _check_keys(where, tables)
    itl = manifest["itl"]
    histogram = None
    buckets = tables["histogram"].select(pl.col("b", "n", "lo", "hi").cast(pl.Int64))
    if itl["kind"] == "histogram":
        if tables["gaps"].height:
            raise bad(where, "it holds gaps and a histogram: its manifest says the histogram kind")
        histogram = LogHistogram(
            buckets=buckets, n=int(itl["count"]), total=int(itl["sum"]), total_sq=int(itl["sum_sq"])
        )
        if int(buckets["n"].sum()) != histogram.n or (buckets["n"] <= 0).any():
            raise bad(where, "its histogram buckets do not add up to the ITL count")
    elif tables["gaps"].height != int(itl["count"]) or buckets.height:
        raise bad(where, "its gap table does not hold the ITL count")
    trace = manifest["trace"]
    return Partial(
        inputs=tuple(manifest.get("inputs", [])),
        start_ns=trace["start_ns"],
        end_ns=trace["end_ns"],
        has_releases=trace["has_releases"],
        timeline=tables["timeline"],
        requests=tables["requests"],
        transitions=tables["transitions"],
        gaps=tables["gaps"].select(pl.col(KEY, "itl_ns").cast(pl.Int64)),
        histogram=histogram,
        deferred=_events(where, "deferred", tables["deferred"]),
        quarantine=_events(where, "quarantine", tables["quarantine"]),
        attributes=tuple(manifest.get("attributes", [])),
        warnings=tuple(manifest.get("warnings", [])),
        settings=ShardSettings.from_json(manifest.get("settings")),
    )
