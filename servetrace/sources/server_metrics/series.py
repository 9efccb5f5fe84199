"""The canonical metrics frame as series over time: gauges as step functions, counters as
per-interval deltas and rates, histograms as per-interval bucket deltas (design §12).

Counters and histograms are cumulative since the server started. Between two scrapes of a
series the delta is ``v − prev``; a value **below** the previous one is a reset (the server
restarted and counts from zero again), whose delta is the new value itself, as PromQL's
``increase`` takes it. Every series is one ``labels`` value; a server total sums them.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.errors import InputError

SERIES = ("family", "labels")


def families(metrics: pl.DataFrame) -> pl.DataFrame:
    """One row per family: kind, series, samples, first and last ts."""
    return (
        metrics.group_by("family", "kind")
        .agg(
            pl.col("labels").n_unique().alias("series"),
            pl.len().alias("samples"),
            pl.col("ts").min().alias("first_ns"),
            pl.col("ts").max().alias("last_ns"),
        )
        .sort("family")
    )


def gauge_at(metrics: pl.DataFrame, family: str, instants: np.ndarray) -> np.ndarray | None:
    """The gauge summed over its series at each instant, each series holding its last
    sample at or before it (NaN before a series' first sample); None without the family."""
    rows = metrics.filter(pl.col("family") == family, pl.col("le").is_null())
    if rows.is_empty():
        return None
    grid = pl.DataFrame({"at": np.asarray(instants, dtype=np.int64)}).with_row_index("i")
    total = np.zeros(len(instants), dtype=np.float64)
    for (_labels,), part in rows.sort("ts").group_by("labels", maintain_order=True):
        held = grid.sort("at").join_asof(
            part.select(pl.col("ts").alias("at"), "value"), on="at", strategy="backward"
        )
        values = held.sort("i")["value"].to_numpy().astype(np.float64)
        total += np.where(np.isnan(values), np.nan, values)
    return total


def counter_deltas(metrics: pl.DataFrame, family: str) -> pl.DataFrame:
    """Per series and scrape interval ``(start_ns, end_ns]``: ``delta`` (a drop is a reset:
    the new value), ``reset`` and ``rate_per_s``."""
    rows = metrics.filter(pl.col("family") == family, pl.col("le").is_null())
    return _deltas(rows, ["labels"])


def _deltas(rows: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    prev = pl.col("value").shift(1).over(keys)
    return (
        rows.sort([*keys, "ts"])
        .with_columns(
            pl.col("ts").shift(1).over(keys).alias("start_ns"),
            (pl.col("value") < prev).alias("reset"),
        )
        .with_columns(
            pl.when(pl.col("reset"))
            .then(pl.col("value"))
            .otherwise(pl.col("value") - prev)
            .alias("delta")
        )
        .filter(pl.col("start_ns").is_not_null())
        .select(
            *keys,
            "start_ns",
            pl.col("ts").alias("end_ns"),
            "value",
            "delta",
            "reset",
            (pl.col("delta") * 1e9 / (pl.col("ts") - pl.col("start_ns"))).alias("rate_per_s"),
        )
    )


def total_deltas(deltas: pl.DataFrame, instants: np.ndarray) -> np.ndarray:
    """Σ over series of the delta over each interval ``(instants[k-1], instants[k]]``; a
    series' delta counts in the interval holding its end."""
    edges = np.asarray(instants, dtype=np.int64)
    out = np.zeros(max(len(edges) - 1, 0), dtype=np.float64)
    if deltas.is_empty() or len(edges) < 2:
        return out
    ends = deltas["end_ns"].to_numpy()
    k = np.searchsorted(edges, ends, side="left") - 1
    keep = (k >= 0) & (k < len(out))
    np.add.at(out, k[keep], deltas["delta"].to_numpy()[keep])
    return out


def histogram_deltas(metrics: pl.DataFrame, family: str, where: str) -> pl.DataFrame:
    """Per series, interval and bucket: the cumulative bucket count's delta (``le``,
    ``delta``). Buckets that change between scrapes of a series are an input error."""
    rows = metrics.filter(
        pl.col("family") == family, pl.col("kind") == "histogram", pl.col("le").is_not_null()
    )
    layouts = rows.group_by("labels", "ts").agg(pl.col("le").sort().alias("les"))
    changed = layouts.group_by("labels").agg(pl.col("les").n_unique().alias("n"))
    bad = changed.filter(pl.col("n") > 1)
    if not bad.is_empty():
        raise InputError(
            f"{where}: {family}: the buckets change between scrapes of series {bad['labels'][0]}",
            hint="a histogram's le bounds must be the same in every scrape",
        )
    # A reset is decided on the series' +Inf bucket (its count), for every bucket at once.
    deltas = _deltas(rows, ["labels", "le"])
    resets = deltas.filter(pl.col("le") == float("inf")).select("labels", "end_ns", "reset")
    return (
        deltas.drop("reset")
        .join(resets.rename({"reset": "series_reset"}), on=["labels", "end_ns"], how="left")
        .with_columns(
            pl.when(pl.col("series_reset").fill_null(False))
            .then(pl.col("value"))
            .otherwise(pl.col("delta"))
            .alias("delta")
        )
        .drop("series_reset", "rate_per_s", "value")
    )
