"""The ``load`` verdict: did both runs declare the same offered load?

Next to the workload verdict (same requests?), this asks whether the two runs were
*driven* alike, from what each declares (``servetrace.runs.model``): the offered request
rate and the client's concurrency limit. A 16× higher rate explains a latency change by
itself, so a difference is a loud warning, with its factor. Numbers only; the words are
in ``servetrace.render.workload``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LOAD_KEYS = ("request_rate_per_s", "max_concurrency")


@dataclass(frozen=True)
class LoadDifference:
    key: str  # request_rate_per_s | max_concurrency
    baseline: float
    candidate: float

    @property
    def factor(self) -> float:
        """candidate / baseline as a factor ≥ 1 (inf when one side is unlimited)."""
        low, high = sorted((self.baseline, self.candidate))
        if math.isinf(high) and not math.isinf(low):
            return math.inf
        if low <= 0:
            return math.inf
        return high / low


@dataclass(frozen=True)
class LoadMatch:
    """``verdict``: "same" (every key both declare agrees), "differs", or "unknown"
    (no key declared by both); ``compared`` the keys both declared."""

    verdict: str
    compared: tuple[str, ...]
    differences: tuple[LoadDifference, ...]
    baseline: Mapping[str, Any]
    candidate: Mapping[str, Any]


def _value(declared: Mapping[str, Any] | None, key: str) -> float | None:
    if not declared:
        return None
    value = declared.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) else float(value)


def compare_load(
    baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> LoadMatch:
    compared: list[str] = []
    differences: list[LoadDifference] = []
    for key in LOAD_KEYS:
        base, cand = _value(baseline, key), _value(candidate, key)
        if base is None or cand is None:
            continue
        compared.append(key)
        if base != cand:
            differences.append(LoadDifference(key, base, cand))
    verdict = "unknown" if not compared else ("differs" if differences else "same")
    return LoadMatch(
        verdict=verdict,
        compared=tuple(compared),
        differences=tuple(differences),
        baseline={k: _value(baseline, k) for k in LOAD_KEYS},
        candidate={k: _value(candidate, k) for k in LOAD_KEYS},
    )
