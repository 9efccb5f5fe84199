"""The names of summary statistics (``p50``, ``median``, ``p99_9``…): plain strings, no
NumPy, so that the CLI can list and check them without paying for the numerics."""

from __future__ import annotations

import re
from typing import Final

PERCENTILE_METHOD: Final = "linear"
# The summary statistics of every metric, in report order.
STATISTICS: tuple[str, ...] = (
    "count",
    "mean",
    "std",
    "min",
    "p50",
    "p90",
    "p95",
    "p99",
    "p99_9",
    "max",
)


STAT_ALIASES: dict[str, str] = {"median": "p50", "avg": "mean", "average": "mean", "p999": "p99_9"}
_PERCENTILE_RE = re.compile(r"^p(\d{1,2}|100)(?:_(\d+))?$")
PERCENTILE_STATS = tuple(name for name in STATISTICS if name not in ("count", "mean", "std"))


def canonical_stat(stat: str) -> str:
    """The canonical spelling of a statistic name (``median`` → ``p50``)."""
    stat = stat.strip().lower()
    return STAT_ALIASES.get(stat, stat)


def percentile_of(stat: str) -> float | None:
    """The percentile (0-100) a statistic stands for, or None if it is not one.

    ``p50`` → 50, ``p99_9`` → 99.9, ``min`` → 0, ``max`` → 100.
    """
    stat = canonical_stat(stat)
    if stat == "min":
        return 0.0
    if stat == "max":
        return 100.0
    match = _PERCENTILE_RE.match(stat)
    if match is None:
        return None
    value = float(match.group(1) + ("." + match.group(2) if match.group(2) else ""))
    return value if value <= 100.0 else None


def is_statistic(stat: str) -> bool:
    """Whether ``stat`` names a statistic of a distribution (``count``, ``mean``, ``p75``…)."""
    stat = canonical_stat(stat)
    return stat in ("count", "mean", "std") or percentile_of(stat) is not None
