"""The engine's steps as a Perfetto lane and counter tracks per replica (``timeline --steps``).

One process holds them. Each replica (the step file's ``replica``; ``engine`` when it names
none) has one thread with one complete slice per step, ``ts_start`` → ``ts_end``, named by
its composition (``prefill``, ``decode``, ``prefill + decode``, or ``step`` when it carries
neither) with the step's columns as args; a step whose source leaves one end unknown
(SGLang's log, TensorRT-LLM polls without a time) is an instant at the end it has. Per
replica three counter tracks take each step's value at its start (the viewer holds it until
the next step's): ``batch size`` (``prefill_requests + decode_requests``), ``prefill
tokens`` and ``KV usage`` (``kv_usage`` as a fraction, else ``kv_tokens``). A counter whose
columns the file does not hold (null in every step) is not drawn, and ``otherData.steps``
says why; a step that does not tell one gets no point on it, and that is counted there too.

Times. Steps are on the trace's clock (the step schema; a coarse format is aligned to the
trace's ticks when read), so they are placed as the request lanes are: µs since the trace
start. Only steps overlapping the trace (or ``--window``) are drawn, a slice cut at its
edges (its args keep the whole ``duration_ns``).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import polars as pl

from servetrace.sources.steps.validate import COUNT_COLUMNS

if TYPE_CHECKING:
    from servetrace.api._steps import StepRecords

STEP_PID = 7  # after the server's series (6)
UNNAMED = "engine"  # the replica of steps that name none
# A slice carries every count the schema has (and the KV fraction) as its args.
_ARG_COLUMNS = ("step", *COUNT_COLUMNS, "kv_usage")


def _known(frame: pl.DataFrame, column: str) -> bool:
    return frame[column].null_count() < frame.height


Counter = tuple[str, str, pl.Expr]  # name, its arg key, its value


def _counters(frame: pl.DataFrame, fmt: str) -> tuple[list[Counter], dict[str, str]]:
    """The counters the file can draw; why each other one cannot."""
    drawn: list[Counter] = []
    unavailable: dict[str, str] = {}
    if _known(frame, "prefill_requests") and _known(frame, "decode_requests"):
        drawn.append(
            ("batch size", "requests", pl.col("prefill_requests") + pl.col("decode_requests"))
        )
    else:
        lacking = [c for c in ("prefill_requests", "decode_requests") if not _known(frame, c)]
        unavailable["batch size"] = f"the {fmt} step file has no {' or '.join(lacking)}"
    if _known(frame, "prefill_tokens"):
        drawn.append(("prefill tokens", "tokens", pl.col("prefill_tokens")))
    else:
        unavailable["prefill tokens"] = f"the {fmt} step file has no prefill_tokens"
    if _known(frame, "kv_usage"):
        drawn.append(("KV usage", "fraction", pl.col("kv_usage")))
    elif _known(frame, "kv_tokens"):
        drawn.append(("KV usage", "tokens", pl.col("kv_tokens")))
    else:
        unavailable["KV usage"] = f"the {fmt} step file has neither kv_usage nor kv_tokens"
    return drawn, unavailable


def _composition() -> pl.Expr:
    prefill = ((pl.col("prefill_tokens") > 0) | (pl.col("prefill_requests") > 0)).fill_null(False)
    decode = ((pl.col("decode_tokens") > 0) | (pl.col("decode_requests") > 0)).fill_null(False)
    return (
        pl.when(prefill & decode)
        .then(pl.lit("prefill + decode"))
        .when(prefill)
        .then(pl.lit("prefill"))
        .when(decode)
        .then(pl.lit("decode"))
        .otherwise(pl.lit("step"))
    )


def _lines(frame: pl.DataFrame) -> list[str]:
    # Rows end at "\n" only (render.timeline._ndjson says why).
    return frame.write_ndjson().removesuffix("\n").split("\n") if frame.height else []


def step_tracks(
    records: StepRecords, origin_ns: int, lo_ns: int, hi_ns: int
) -> tuple[list[str], list[dict[str, Any]], dict[str, Any]]:
    """The step events (NDJSON lines), the process' metadata, and what was drawn."""
    steps = records.file.frame
    replicas = (
        steps.select(pl.col("replica").fill_null(""))
        .unique()
        .sort("replica")
        .with_row_index("tid", offset=1)
        .with_columns(
            label=pl.when(pl.col("replica") == "")
            .then(pl.lit(UNNAMED))
            .otherwise(pl.lit("replica ") + pl.col("replica")),
            tid=pl.col("tid").cast(pl.Int64),
        )
    )

    def us(at: pl.Expr) -> pl.Expr:  # as render.timeline places every event
        return (at - origin_ns).cast(pl.Float64) / 1000.0

    frame = steps.with_columns(
        pl.col("replica").fill_null(""),
        at=pl.coalesce("ts_start", "ts_end"),
        duration_ns=pl.col("ts_end") - pl.col("ts_start"),
        name=_composition(),
    ).join(replicas, on="replica")
    args = pl.struct(
        *(c for c in _ARG_COLUMNS if _known(steps, c)),
        *(["duration_ns"] if frame["duration_ns"].null_count() < frame.height else []),
    ).alias("args")
    both = pl.col("ts_start").is_not_null() & pl.col("ts_end").is_not_null()
    slices = frame.filter(both & (pl.col("ts_end") >= lo_ns) & (pl.col("ts_start") <= hi_ns))
    lo = pl.max_horizontal("ts_start", pl.lit(lo_ns))
    hi = pl.min_horizontal("ts_end", pl.lit(hi_ns))
    slice_events = slices.select(
        "name",
        pl.lit("step").alias("cat"),
        pl.lit("X").alias("ph"),
        us(lo).alias("ts"),
        ((hi - lo).cast(pl.Float64) / 1000.0).alias("dur"),
        pl.lit(STEP_PID).alias("pid"),
        "tid",
        args,
    )
    inside = pl.col("at").is_between(lo_ns, hi_ns)
    instants = frame.filter(~both & pl.col("at").is_not_null() & inside).select(
        pl.col("name")
        + pl.when(pl.col("ts_start").is_null())
        .then(pl.lit(" (start unknown)"))
        .otherwise(pl.lit(" (end unknown)")),
        pl.lit("step").alias("cat"),
        pl.lit("i").alias("ph"),
        pl.lit("t").alias("s"),
        us(pl.col("at")).alias("ts"),
        pl.lit(STEP_PID).alias("pid"),
        "tid",
        args,
    )
    lines = _lines(slice_events) + _lines(instants)
    drawn, unavailable = _counters(steps, records.fmt)
    counted = frame.filter(inside)
    unknown: dict[str, int] = {}
    n_counter = 0
    for name, key, value in drawn:  # three counters, each one vectorised frame
        points = counted.filter(value.is_not_null()).select(
            (pl.lit(name + " · ") + pl.col("label")).alias("name"),
            pl.lit("C").alias("ph"),
            us(pl.col("at")).alias("ts"),
            pl.lit(STEP_PID).alias("pid"),
            pl.struct(value.alias(key)).alias("args"),
        )
        if points.height < counted.height:
            unknown[name] = counted.height - points.height
        n_counter += points.height
        lines += _lines(points)
    info: dict[str, Any] = {
        # The file's name only: the timeline is shared, this machine's paths are not.
        "file": PurePath(records.path).name,
        "format": records.fmt,
        "replicas": replicas["label"].to_list(),
        "slices": slice_events.height,
        "instants": instants.height,
        "counter_events": n_counter,
        "counters": [name for name, _, _ in drawn],
        "counters_unavailable": unavailable,
        "steps_without_value": unknown,
        "steps_outside": steps.height - slice_events.height - instants.height,
        "notes": list(records.file.notes),
    }
    title = f"engine steps: {info['file']} ({records.fmt})"
    if unavailable:
        title += "; unavailable: " + ", ".join(unavailable)
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": STEP_PID, "args": {"name": title}},
        {"name": "process_sort_index", "ph": "M", "pid": STEP_PID, "args": {"sort_index": 3}},
    ]
    for tid, label in replicas.select("tid", "label").iter_rows():  # one per replica
        meta += [
            {
                "name": "thread_name",
                "ph": "M",
                "pid": STEP_PID,
                "tid": tid,
                "args": {"name": f"steps · {label}"},
            },
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": STEP_PID,
                "tid": tid,
                "args": {"sort_index": tid},
            },
        ]
    return lines, meta, info
