"""Prometheus HTTP API ``/api/v1/query_range`` JSON (prometheus/prometheus
``docs/querying/api.md``: ``{"status": "success", "data": {"resultType": "matrix",
"result": [{"metric": {"__name__": NAME, LABEL: VALUE…}, "values": [[unix_s, "value"]…]}]}}``).

A range query returns values, not types: a name ending in ``_total`` is a counter, a
``_bucket`` series with an ``le`` label a histogram bucket (its ``_sum``/``_count`` then
histogram too), anything else a gauge. A series without ``__name__`` (a query with a
function applied) cannot be typed and is an input error.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.reading import load_json
from servetrace.sources.server_metrics.schema import Row, frame, label_text, ms_ns


def _kind(name: str, labels: dict[str, str], histograms: set[str]) -> tuple[str, str]:
    """(kind, family) of one series."""
    if name.endswith("_bucket") and "le" in labels:
        return "histogram", name[: -len("_bucket")]
    for suffix in ("_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in histograms:
            return "histogram", name
    if name.endswith("_total"):
        return "counter", name
    return "gauge", name


def read(path: Path) -> pl.DataFrame:
    doc = load_json(path)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise InputError(
            f"{path}: not a Prometheus query_range answer (no data.resultType 'matrix')",
            hint="save the JSON of /api/v1/query_range",
        )
    result = data.get("result") or []
    histograms = {
        s["metric"]["__name__"][: -len("_bucket")]
        for s in result
        if isinstance(s, dict)
        and str(s.get("metric", {}).get("__name__", "")).endswith("_bucket")
        and "le" in s.get("metric", {})
    }
    rows: list[Row] = []
    for n, series in enumerate(result):
        metric = dict(series.get("metric") or {})
        name = metric.pop("__name__", None)
        if not name:
            raise InputError(
                f"{path}: data.result[{n}] has no metric.__name__: its type cannot be told",
                hint="query the raw series (no function) so each result names its metric",
            )
        kind, family = _kind(name, metric, histograms)
        le = metric.pop("le", None) if kind == "histogram" and family != name else None
        bound = None if le is None else float(le)
        labels = label_text(metric)
        for m, pair in enumerate(series.get("values") or []):
            try:
                stamp, value = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                raise InputError(
                    f"{path}: data.result[{n}].values[{m}] is not [unix_seconds, value]"
                ) from None
            if not math.isfinite(stamp):
                raise InputError(f"{path}: data.result[{n}].values[{m}] has no finite time")
            rows.append((ms_ns(stamp), family, kind, labels, bound, value))
    return frame(rows)
