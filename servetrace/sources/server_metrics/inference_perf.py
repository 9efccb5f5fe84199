"""inference-perf's per-stage summaries: ``stage_N_lifecycle_metrics.json`` (the client)
beside ``stage_N_prometheus_metrics.json`` (the server, from Prometheus).

Field names from kubernetes-sigs/inference-perf (the KubeCon NA 2025 demo's ``results/``):
client ``load_summary{count, send_duration, requested_rate, achieved_rate}``,
``successes{count, latency{request_latency, time_to_first_token, time_per_output_token,
…}{mean, median, p90, p99, …}, throughput{requests_per_sec, …}, prompt_len, output_len}``;
server ``successes{count, rate, prompt_len{mean, rate}, output_len{mean, rate},
request_latency, time_to_first_token, time_per_output_token{mean, median, p90, p99},
queue_len, kv_cache_usage_percentage, num_preemptions_total, …}``, each an instant PromQL
query (``inference_perf/client/metricsclient/prometheus_client/base.py`` at
834819fb99847997fd47ec52a09c0052714fba35) over the stage's start to its end plus the
scrape interval plus 2 s; a query that fails or finds no series is written as 0.0.

These are summaries, not series: there is no time axis, so they are read apart from the
canonical metrics frame, as one long frame ``stage, side, quantity, stat, value``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.reading import load_json

_STAGE = re.compile(r"stage_(\d+)_(lifecycle|prometheus)_metrics\.json$")
SIDES = {"lifecycle": "client", "prometheus": "server"}


def stage_folder(path: Path) -> Path | None:
    """The folder holding ``stage_N_*_metrics.json`` (``path`` or its ``results/``)."""
    for folder in (path, path / "results"):
        if folder.is_dir() and any(_STAGE.search(p.name) for p in folder.iterdir()):
            return folder
    return None


def _flat(prefix: str, node: Any, out: list[tuple[str, str, float | None]]) -> None:
    """(quantity, stat, value) of every number under ``node``: the last key is the stat."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict):
                _flat(f"{prefix}.{key}" if prefix else key, value, out)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((prefix, key, float(value)))
            elif value is None:
                out.append((prefix, key, None))


def read_stages(path: Path) -> pl.DataFrame:
    """Every number of every stage file: ``stage, side, quantity, stat, value``."""
    folder = stage_folder(path)
    if folder is None:
        raise InputError(f"{path}: no inference-perf stage_N_*_metrics.json files")
    rows: list[tuple[int, str, str, str, float | None]] = []
    for file in sorted(folder.iterdir()):
        found = _STAGE.search(file.name)
        if not found:
            continue
        doc = load_json(file)
        if not isinstance(doc, dict) or not isinstance(doc.get("successes"), dict):
            raise InputError(f"{file}: no 'successes' object: not an inference-perf stage file")
        flat: list[tuple[str, str, float | None]] = []
        _flat("", doc, flat)
        rows += [(int(found[1]), SIDES[found[2]], q, s, v) for q, s, v in flat]
    stages = {r[0] for r in rows}
    for stage in sorted(stages):
        sides = {r[1] for r in rows if r[0] == stage}
        if sides != {"client", "server"}:
            missing = ({"client", "server"} - sides).pop()
            kind = "lifecycle" if missing == "client" else "prometheus"
            raise InputError(f"{folder}: stage {stage} has no stage_{stage}_{kind}_metrics.json")
    return pl.DataFrame(
        rows,
        schema={
            "stage": pl.Int64,
            "side": pl.String,
            "quantity": pl.String,
            "stat": pl.String,
            "value": pl.Float64,
        },
        orient="row",
    ).sort("stage", "side", "quantity", "stat")
