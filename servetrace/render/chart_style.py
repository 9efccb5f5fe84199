"""What every chart of the report shares: axis style, log scales, words for series names.

Each builder ends with ``finish`` so the page, ``--plots`` and the browser tests see one
style: tick labels keep a gap (Vega drops a label that would touch its neighbour, so a
log axis never reads ``200300``), counts are whole numbers, and a log scale ends at the
data rather than at the next decade.
"""

from __future__ import annotations

import math
from typing import Any

Spec = dict[str, Any]

CONFIG: Spec = {
    "axis": {"labelSeparation": 6},
    "axisQuantitative": {"labelOverlap": "greedy"},
    "legend": {"labelLimit": 360},
}

# Column and series names of the frames, as a reader says them (with units).
WORDS = {
    "arrivals_per_s": "arrivals (req/s)",
    "output_tokens_per_s": "output tokens (tok/s)",
    "requests_per_s": "completed (req/s)",
    "goodput_requests_per_s": "goodput (req/s)",
    "queued": "queued",
    "running": "running",
    "in_system": "in system",
    "queued_mean": "queued (mean)",
    "running_mean": "running (mean)",
    "ttft_p50_ms": "TTFT p50",
    "ttft_p99_ms": "TTFT p99",
    "tpot_p50_ms": "TPOT p50",
    "tpot_p99_ms": "TPOT p99",
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "e2e latency",
}

# queued, running and in system: three hues far apart, in system dashed (it equals
# running wherever nothing queues, and must not hide it).
LEVEL_COLORS = {"queued": "#f28e2b", "running": "#4e79a7", "in system": "#59a14f"}
LEVEL_DASHES = {"queued": [1, 0], "running": [1, 0], "in system": [5, 3]}

COUNT_FORMAT = ",d"  # a count on an axis or in a tooltip: 3, never 3.000


def log_ticks(low: float | None, high: float | None) -> list[float]:
    """Tick values of a log axis from ``low`` to ``high``: 1, 2, 5 per power of ten (only
    the powers over many decades; more steps when that leaves fewer than three), so
    labels are round and never crowd."""
    if low is None or high is None or not (0 < low <= high) or not math.isfinite(high):
        return []
    powers = range(math.floor(math.log10(low)), math.floor(math.log10(high)) + 1)
    ticks: list[float] = []
    for steps in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [
            float(f"{step * 10.0**power:.6g}")
            for power in powers
            for step in steps
            if low <= step * 10.0**power <= high
        ]
        if len(ticks) > 9:
            return [t for t in ticks if f"{t:.6g}".lstrip("0.").startswith("1")]
        if len(ticks) >= 3:
            return ticks
    return ticks


def log_scale(**extra: Any) -> Any:
    """A log scale that ends where the data ends (no padding to the next power of 10)."""
    import altair as alt

    return alt.Scale(type="log", nice=False, **extra)


def log_axis(values: Any, **extra: Any) -> Any:
    """The axis of a log scale over ``values`` (a Polars Series): round tick values."""
    import altair as alt

    finite = values.filter(values.is_finite() & (values > 0)) if values.len() else values
    if finite.len() == 0:
        return alt.Axis(**extra)
    return alt.Axis(values=log_ticks(float(finite.min()), float(finite.max())), **extra)


def finish(chart: Any) -> Spec:
    """The chart as a Vega-Lite spec with the report's shared style."""
    spec: Spec = chart.to_dict()
    config = spec.setdefault("config", {})
    for key, values in CONFIG.items():
        config[key] = {**values, **config.get(key, {})}
    return spec
