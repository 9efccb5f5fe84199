"""A distribution as the JSON contract spells it: ``{"unit", "count", "mean", …}``,
times converted from ns to the unit named beside them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servetrace.render._json import clean
from servetrace.stats.names import STATISTICS
from servetrace.units import TIME_UNITS

STAT_KEYS = STATISTICS


def distribution_ms(
    stats: Mapping[str, Any], unit: str = "ms", keys: Sequence[str] = STAT_KEYS
) -> dict[str, Any]:
    """A distribution in ns as the JSON contract spells it (``keys`` of it), in ``unit``."""
    scale = TIME_UNITS.get(unit, 1)
    out: dict[str, Any] = {"unit": unit}
    for key in keys:
        value = clean(stats.get(key))
        out[key] = value if key == "count" or value is None else value / scale
    return out


def counts_dict(stats: Mapping[str, Any], unit: str) -> dict[str, Any]:
    return {"unit": unit, **{k: clean(stats.get(k)) for k in STAT_KEYS}}
