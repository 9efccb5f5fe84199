"""Plain JSON values for every report: one place that says how numbers are written."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def clean(value: Any) -> Any:
    """numpy scalars unwrapped, NaN and ±inf as null, mappings and sequences recursively."""
    kind = type(value)
    if kind is int or kind is str or value is None:  # the common cases, first (--by: 300 reports)
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value
