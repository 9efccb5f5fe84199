"""``servetrace capacity`` from Python: analyse each run of a sweep, then the curve.

>>> runs = ["qps_1.json", "qps_4.json"]
>>> report = servetrace.capacity(runs, goodput="ttft<=200ms")  # doctest: +SKIP
>>> report.capacity.rate  # req/s  # doctest: +SKIP

Each path is one run (never pooled). Its offered rate is the matching ``rates`` entry,
else the rate the run's tool declared (``vllm bench serve``'s ``request_rate``), else
unknown; where the trace gives no throughput (no send times), the tool's own
``request_throughput`` / ``output_throughput`` are used and the report says so.
Ready-made ``RunPoint`` values (e.g. from a run model) are taken as they are.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from servetrace.analysis.capacity import CapacityReport, RunPoint, sweep
from servetrace.api._analyze import GoodputLike, analyze
from servetrace.errors import UsageError
from servetrace.sources import detect


def parse_attainment(text: str | float) -> float:
    """``90%`` or ``0.9`` → 0.9; a share in (0, 1]."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"--attainment {text!r} is not a share such as 90% or 0.9") from None
    if not (0 < value <= 1) or math.isnan(value):
        raise UsageError(f"--attainment {text!r} is not a share in (0, 100%]")
    return value


_SUFFIXES = (".gz", ".zst", ".json", ".jsonl", ".parquet", ".csv", ".arrow", ".ipc", ".db")


def _stem(path: PurePath) -> str:
    name = path.name
    while True:
        for suffix in _SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name


def _trim(stems: list[str]) -> list[str]:
    """Drop the ``_``-separated words every stem shares at its start and at its end."""
    words = [s.split("_") for s in stems]
    lead = 0
    while all(len(w) > lead for w in words) and len({w[lead] for w in words}) == 1:
        lead += 1
    tail = 0
    while all(len(w) > lead + tail for w in words) and len({w[-1 - tail] for w in words}) == 1:
        tail += 1
    # Keep a short key word before the part that differs: "qps_01", not "01".
    if lead and words[0][lead - 1].isalpha() and len(words[0][lead - 1]) <= 6:
        lead -= 1
    return ["_".join(w[lead : len(w) - tail]) for w in words]


def run_labels(paths: Sequence[str]) -> list[str]:
    """Short labels that tell the runs apart: the folders that differ, then the words of
    the file names that differ (``qps_01``), never the parts every run shares."""
    if len(paths) == 1:
        return [_stem(PurePath(paths[0]))]
    pure = [PurePath(p) for p in paths]
    parents = [p.parent.parts for p in pure]
    depth = max(len(p) for p in parents)
    differ = [i for i in range(depth) if len({p[i] if i < len(p) else None for p in parents}) > 1]
    stems = [_stem(p) for p in pure]
    trimmed = _trim(stems) if len(set(stems)) > 1 else [""] * len(stems)
    labels = [
        "/".join([*(p[i] for i in differ if i < len(p)), *([t] if t else [])])
        for p, t in zip(parents, trimmed, strict=True)
    ]
    if all(labels) and len(set(labels)) == len(labels):
        return labels
    return list(paths)


def declared(path: str, from_format: str | None = None) -> dict[str, float]:
    """The run-level facts the run's tool wrote, where it writes them (``vllm bench
    serve``: ``request_rate``, ``request_throughput``, ``output_throughput``)."""
    fmt, resolved = detect.inputs([path], from_format)
    if fmt != "vllm-bench" or len(resolved) != 1:
        return {}
    from servetrace.sources.registry import import_file

    summary = import_file(resolved[0], fmt).tool_summary or {}
    keys = ("request_rate", "request_throughput", "output_throughput")
    return {
        k: float(summary[k])
        for k in keys
        if isinstance(summary.get(k), (int, float)) and not isinstance(summary.get(k), bool)
    }


def capacity(
    runs: Sequence[str | os.PathLike[str] | RunPoint],
    *,
    rates: Sequence[float | None] | None = None,
    labels: Sequence[str] | None = None,
    goodput: GoodputLike = (),
    attainment: str | float | None = 0.9,
    gpus: int | None = None,
    reading: Mapping[str, Any] | None = None,
) -> CapacityReport:
    """The throughput–latency curve, SLO attainment per offered rate and capacity."""
    if not runs:
        raise UsageError("capacity needs the runs of a sweep")
    if rates is not None and len(rates) != len(runs):
        raise UsageError(f"{len(rates)} --rate values for {len(runs)} runs: give one per run")
    if labels is not None and len(labels) != len(runs):
        raise UsageError(f"{len(labels)} --label values for {len(runs)} runs: give one per run")
    texts = [r.label if isinstance(r, RunPoint) else os.fspath(r) for r in runs]
    names = list(labels) if labels is not None else run_labels(texts)
    points: list[RunPoint] = []
    for i, run in enumerate(runs):
        if isinstance(run, RunPoint):
            points.append(run)
            continue
        path = os.fspath(run)
        facts = declared(path, (reading or {}).get("from_format"))
        rate = rates[i] if rates is not None else facts.get("request_rate")
        analysis = analyze(path, goodput=goodput, **dict(reading or {}))
        points.append(RunPoint(names[i], rate, analysis, declared=facts))
    share = parse_attainment(attainment) if attainment is not None else None
    return sweep(points, share, gpus)
