"""The canonical metrics frame's columns (the package docstring defines them)."""

from __future__ import annotations

import json

import polars as pl

from servetrace.units import NS_PER_MS

SCHEMA = {
    "ts": pl.Int64,
    "family": pl.String,
    "kind": pl.String,
    "labels": pl.String,
    "le": pl.Float64,
    "value": pl.Float64,
}
KINDS = ("gauge", "counter", "histogram", "summary")
# format → the module whose ``read(path)`` reads it, imported only when its format is read.
FORMATS = {
    "prometheus": "servetrace.sources.server_metrics.prometheus_text",
    "query_range": "servetrace.sources.server_metrics.query_range",
    "aiperf": "servetrace.sources.server_metrics.aiperf",
}


# One sample as a reader collects it: (ts, family, kind, labels, le, value).
Row = tuple[int, str, str, str, float | None, float]


def frame(rows: list[Row]) -> pl.DataFrame:
    """The canonical frame of ``rows``, sorted by series then time."""
    out = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    return out.sort("family", "labels", "le", "ts", nulls_last=True)


def ms_ns(seconds: float) -> int:
    """A Prometheus timestamp in ns: its whole milliseconds, given as float seconds."""
    return round(seconds * 1000) * NS_PER_MS


def label_text(labels: dict[str, str]) -> str:
    """Labels as sortable JSON text: keys sorted, no spaces."""
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":"))
