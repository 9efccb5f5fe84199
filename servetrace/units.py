"""The one place unit constants live: every time inside servetrace is integer ns.

Readers convert into ns once (``TIME_UNITS``), the core computes in ns, and only
``servetrace.render`` converts back for people.
"""

from __future__ import annotations

import re
from decimal import Decimal

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
NS_PER_DAY = 86_400 * NS_PER_S

# Nanoseconds per time unit, as users and files spell them (``--time-unit``, rule limits).
TIME_UNITS: dict[str, int] = {"ns": 1, "us": NS_PER_US, "ms": NS_PER_MS, "s": NS_PER_S}
NS_PER_MIN = 60 * NS_PER_S
NS_PER_H = 60 * NS_PER_MIN
# Durations as people write them (rule limits, --window, --slice, --fluidity): the file
# units, the micro sign spellings (``500µs``), and minutes and hours (``2min``, ``2m``,
# ``1h``).
TIME_UNIT_SPELLINGS: dict[str, int] = {
    **TIME_UNITS,
    "µs": NS_PER_US,
    "μs": NS_PER_US,
    "m": NS_PER_MIN,
    "min": NS_PER_MIN,
    "h": NS_PER_H,
}
DURATION_UNITS_TEXT = "ns, us, ms, s, min or h"
OUT_OF_RANGE = 2**64  # beyond any Int64 time
_DURATION = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-zµμ]*)\s*$")


def duration_ns(text: str) -> int | None:
    """A duration as written (``1.5s``, ``500ms``, ``2min``, ``-1h``; a bare number is
    seconds) in integer ns, exactly (``Decimal``: ``1735689610123456789ns`` is itself), or
    None when ``text`` is not one. It may be negative or beyond Int64 (``1e30s``: clamped
    to ±2^64, far enough), for the caller to refuse in its own words."""
    match = _DURATION.match(text)
    if match is None:
        return None
    number, unit = match.groups()
    scale = NS_PER_S if not unit else TIME_UNIT_SPELLINGS.get(unit)
    if scale is None:
        return None
    written = Decimal(number)
    # The exponent first: arithmetic on 1e999999999 overflows Decimal's own context.
    value = written * scale if written.adjusted() < 40 else Decimal(OUT_OF_RANGE)
    if abs(value) >= OUT_OF_RANGE:
        return -OUT_OF_RANGE if written.is_signed() else OUT_OF_RANGE
    return round(value)
