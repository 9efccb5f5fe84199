"""The server's series as Perfetto counter tracks (``timeline --server-metrics``).

One track per series, named as Prometheus writes it (``family{label="value",…}``), in its
own process, on the timeline's clock: a scrape at server time ``t`` is drawn at
``t − offset`` (the offset ``analyze`` uses, ``server_clock.align``), µs from the trace
start, so a gauge's value sits where the requests it counted are. A gauge (or a summary's
quantile) carries ``value`` at each scrape; a counter (and a histogram's ``_sum`` and
``_count``) carries ``total`` as scraped and ``per_s``, its increase over the interval
from this scrape to the next per second (a reset counts from zero, ``series``), so the
viewer, which holds a value until the next, draws each rate over its own interval. A
histogram's buckets are not drawn (their ``_sum`` and ``_count`` are). Only scrapes within
the trace (or ``--window``) are kept.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any

import polars as pl

from servetrace.analysis.result import Analysis
from servetrace.sources.server_metrics.series import SERIES, counter_deltas

SERVER_PID = 6  # after the system's counters (1) and the requests (2)
COUNTING = ("counter", "histogram")  # cumulative: a histogram's _sum and _count


def series_name(family: str, labels: str) -> str:
    """``family{a="x",b="y"}`` from the canonical frame's labels JSON (``{}``: the family)."""
    pairs = json.loads(labels)
    if not pairs:
        return family
    return family + "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


def server_tracks(
    analysis: Analysis, origin_ns: int, lo_ns: int, hi_ns: int
) -> tuple[list[str], list[dict[str, Any]], int]:
    """The counter events (NDJSON lines), the process' metadata, and how many events."""
    found = analysis.server_metrics
    if found is None or found.metrics is None:
        return [], [], 0
    metrics = found.metrics.filter(pl.col("le").is_null())
    off = found.alignment.offset_ns
    counting = metrics.filter(pl.col("kind").is_in(COUNTING))
    rates = [
        counter_deltas(metrics, family).select(
            pl.lit(family).alias("family"), "labels", pl.col("start_ns").alias("ts"), "rate_per_s"
        )
        for family in counting["family"].unique(maintain_order=True)
    ]
    if rates:
        counting = counting.join(pl.concat(rates), on=[*SERIES, "ts"], how="left")
    else:
        counting = counting.with_columns(pl.lit(None, pl.Float64).alias("rate_per_s"))
    # One name per series (a handful), joined on: no Python call per sample.
    names = pl.DataFrame(
        [(f, lab, series_name(f, lab)) for f, lab in metrics.select(SERIES).unique().iter_rows()],
        schema={"family": pl.String, "labels": pl.String, "name": pl.String},
        orient="row",
    )
    inside = ((pl.col("ts") - off) >= lo_ns) & ((pl.col("ts") - off) <= hi_ns)

    def events(frame: pl.DataFrame, args: pl.Expr) -> pl.DataFrame:
        return (
            frame.filter(inside)
            .join(names, on=SERIES)
            .sort(*SERIES, "ts")
            .select(
                "name",
                pl.lit("C").alias("ph"),
                ((pl.col("ts") - off - origin_ns).cast(pl.Float64) / 1000.0).alias("ts"),
                pl.lit(SERVER_PID).alias("pid"),
                args.alias("args"),
            )
        )

    gauges = events(metrics.filter(~pl.col("kind").is_in(COUNTING)), pl.struct(pl.col("value")))
    counters = events(
        counting, pl.struct(pl.col("value").alias("total"), pl.col("rate_per_s").alias("per_s"))
    )
    lines = []
    for frame in (gauges, counters):
        if frame.height:
            # A rate is unknown after a series' last scrape: that key is left out, not 0.
            lines += [
                _drop_nulls(line) for line in frame.write_ndjson().removesuffix("\n").split("\n")
            ]
    a = found.alignment
    meta = [
        {
            "name": "process_name",
            "ph": "M",
            "pid": SERVER_PID,
            "args": {
                # The file's name only: the timeline is shared, this machine's paths are not.
                "name": f"server metrics: {PurePath(found.path).name} (clock offset "
                f"{a.offset_ns / 1e6:g} ms: {a.statement})"
            },
        },
        {"name": "process_sort_index", "ph": "M", "pid": SERVER_PID, "args": {"sort_index": 2}},
    ]
    return lines, meta, gauges.height + counters.height


def _drop_nulls(line: str) -> str:
    if '"per_s":null' not in line:
        return line
    event = json.loads(line)
    event["args"] = {k: v for k, v in event["args"].items() if v is not None}
    return json.dumps(event, ensure_ascii=False)
