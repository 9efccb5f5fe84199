"""AIPerf's ``server_metrics_export.jsonl`` (+ ``server_metrics_metadata.json``).

Format as AIPerf documents it (ai-dynamo/aiperf ``docs/tutorials/server-metrics.md`` at
dc415a2fdfeda3570aeafe51f733624ab453d4bd): one JSON object per scrape of one endpoint,
``{"endpoint_url", "timestamp_ns", "endpoint_latency_ns", "metrics": {FAMILY: [sample…]}}``,
a sample being ``{"labels": {…}, "value": N}`` (counter, gauge),
``{"labels", "histogram": {LE: count…}, "sum", "count"}`` or
``{"labels", "summary": {QUANTILE: value…}, "sum", "count"}``. The types are in the
metadata file's ``endpoints[URL].metric_schemas[FAMILY].type``; without it a sample with
``histogram``/``summary`` is typed by its shape, a family ending in ``_total`` is a counter,
and the rest gauges.

AIPerf **drops identical consecutive scrapes** of an endpoint, keeping the first and the
last of a run of duplicates; a value therefore holds until the next record (carried forward,
``series.gauge_at``) and a counter's delta between two records is exact. The endpoint is
kept as the label ``endpoint``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError, first_line
from servetrace.sources.reading import iter_json_lines, load_json
from servetrace.sources.server_metrics.schema import KINDS, Row, frame, label_text

METADATA = "server_metrics_metadata.json"
EXPORT = "server_metrics_export.jsonl"


def _types(folder: Path) -> dict[str, str]:
    meta = folder / METADATA
    if not meta.is_file():
        return {}
    doc = load_json(meta)
    out: dict[str, str] = {}
    for endpoint in (doc.get("endpoints") or {}).values():
        for name, schema in (endpoint.get("metric_schemas") or {}).items():
            if isinstance(schema, dict) and schema.get("type") in KINDS:
                out[name] = schema["type"]
    return out


def read(path: Path) -> pl.DataFrame:
    jsonl = path / EXPORT if path.is_dir() else path
    types = _types(jsonl.parent)
    rows: list[Row] = []

    def add(ts: int, family: str, kind: str, labels: str, le: float | None, v: Any) -> None:
        rows.append((ts, family, kind, labels, le, float(v)))

    for n, record in iter_json_lines(jsonl):
        where = f"{jsonl}: line {n}"
        try:
            ts = int(record["timestamp_ns"])
            metrics = record["metrics"]
            endpoint = str(record.get("endpoint_url", ""))
            for family, samples in metrics.items():
                for s in samples:
                    labels = {**(s.get("labels") or {}), "endpoint": endpoint}
                    text = label_text(labels)
                    if "histogram" in s:
                        for le, count in s["histogram"].items():
                            add(ts, family, "histogram", text, float(le), count)
                        add(ts, f"{family}_sum", "histogram", text, None, s["sum"])
                        add(ts, f"{family}_count", "histogram", text, None, s["count"])
                    elif "summary" in s:
                        for q, v in s["summary"].items():
                            quantile = label_text({**labels, "quantile": q})
                            add(ts, family, "summary", quantile, None, v)
                        add(ts, f"{family}_sum", "summary", text, None, s["sum"])
                        add(ts, f"{family}_count", "summary", text, None, s["count"])
                    else:
                        kind = types.get(family) or (
                            "counter" if family.endswith("_total") else "gauge"
                        )
                        add(ts, family, kind, text, None, s["value"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(
                f"{where}: not an AIPerf server-metrics record ({type(e).__name__}: "
                f"{first_line(e)})",
                hint="each line needs timestamp_ns and metrics {family: [samples]}",
            ) from None
    return frame(rows)
