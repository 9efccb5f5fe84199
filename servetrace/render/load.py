"""Words and JSON of the compare ``load`` verdict (``servetrace.comparison.load``)."""

from __future__ import annotations

import math
from typing import Any

from servetrace.comparison.load import LoadMatch

_NAMES = {"request_rate_per_s": ("request rate", "req/s"), "max_concurrency": ("concurrency", "")}


def _amount(value: float | None, unit: str) -> str:
    if value is None:
        return "not declared"
    if math.isinf(value):
        return "unlimited"
    text = f"{value:g}"
    return f"{text} {unit}" if unit else text


def _factor(factor: float) -> str:
    return "∞×" if math.isinf(factor) else f"{factor:.3g}×"


def load_message(load: LoadMatch) -> str:
    """``declared load differs 16×: request rate 1 req/s vs 16 req/s …``."""
    if load.verdict == "unknown":
        return "declared load unknown: the runs do not both declare a request rate or concurrency"
    if load.verdict == "same":
        parts = [f"{_NAMES[k][0]} {_amount(load.baseline[k], _NAMES[k][1])}" for k in load.compared]
        return "same declared load: " + ", ".join(parts)
    biggest = max(d.factor for d in load.differences)
    parts = [
        f"{_NAMES[d.key][0]} {_amount(d.baseline, _NAMES[d.key][1])} vs "
        f"{_amount(d.candidate, _NAMES[d.key][1])}"
        for d in load.differences
    ]
    return (
        f"declared load differs {_factor(biggest)}: "
        + "; ".join(parts)
        + " — latency and throughput differences may be the load, not the system"
    )


def load_warning(load: LoadMatch | None) -> str | None:
    return load_message(load) if load is not None and load.verdict == "differs" else None


def load_dict(load: LoadMatch | None) -> dict[str, Any] | None:
    if load is None:
        return None

    def clean(value: float | None) -> float | str | None:
        return "inf" if value is not None and math.isinf(value) else value

    return {
        "verdict": load.verdict,
        "message": load_message(load),
        "compared": list(load.compared),
        "baseline": {k: clean(v) for k, v in load.baseline.items()},
        "candidate": {k: clean(v) for k, v in load.candidate.items()},
        "differences": [
            {
                "key": d.key,
                "baseline": clean(d.baseline),
                "candidate": clean(d.candidate),
                "factor": clean(d.factor),
            }
            for d in load.differences
        ],
    }
