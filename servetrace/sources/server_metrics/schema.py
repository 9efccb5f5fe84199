"""The canonical metrics frame's columns (the package docstring defines them)."""

from __future__ import annotations

import json

import polars as pl

SCHEMA = {
    "ts": pl.Int64,
    "family": pl.String,
    "kind": pl.String,
    "labels": pl.String,
    "le": pl.Float64,
    "value": pl.Float64,
}
KINDS = ("gauge", "counter", "histogram", "summary")
FORMATS = ("prometheus", "query_range", "aiperf")


def frame(rows: dict[str, list[object]] | None = None) -> pl.DataFrame:
    """The canonical frame of ``rows`` (column lists), sorted by series then time."""
    out = pl.DataFrame(rows or {k: [] for k in SCHEMA}, schema=SCHEMA)
    return out.sort("family", "labels", "le", "ts", nulls_last=True)


def label_text(labels: dict[str, str]) -> str:
    """Labels as sortable JSON text: keys sorted, no spaces."""
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":"))
