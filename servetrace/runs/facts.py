"""The one check of a number a run declares or a tool reports about itself.

Declared facts (a concurrency limit, a duration) and reported figures (a tool's P99 TTFT,
its request count) are divided by, sorted on and shown beside measured ones, so they are
held to the same standard as a measured value: finite, within range, whole where they
count something. A value that breaks its rule refuses the run with one line naming the
file and the field (``InputError``, exit 3), as a measured value out of range does; an
absent or non-numeric value is simply unknown (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from servetrace.errors import InputError
from servetrace.schema import MAX_ABS_NS, MAX_COUNT

Kind = Literal["count", "positive_count", "rate", "duration_s", "latency_s", "latency_ms", "per_s"]


@dataclass(frozen=True)
class _Rule:
    what: str
    whole: bool = False
    minimum: float = 0.0
    above_minimum: bool = False  # the minimum itself is refused
    maximum: float = math.inf  # refused from here up
    infinite: bool = False  # +inf is a meaningful value ("as fast as possible")


_RULES: dict[Kind, _Rule] = {
    "count": _Rule("a whole number >= 0", whole=True, maximum=MAX_COUNT),
    "positive_count": _Rule("a whole number >= 1", whole=True, minimum=1, maximum=MAX_COUNT),
    "rate": _Rule("a rate > 0 per s (or inf)", above_minimum=True, infinite=True),
    # Times must fit the canonical range once in ns, as every measured time does.
    "duration_s": _Rule("a duration > 0 s", above_minimum=True, maximum=MAX_ABS_NS / 1e9),
    "latency_s": _Rule("a latency >= 0 s", maximum=MAX_ABS_NS / 1e9),
    "latency_ms": _Rule("a latency >= 0 ms", maximum=MAX_ABS_NS / 1e6),
    "per_s": _Rule("a throughput >= 0 per s"),
}


def checked(value: Any, kind: Kind, where: Path | str, field: str) -> float | int | None:
    """``value`` as the number ``kind`` describes (an ``int`` for counts), None when it is
    absent or not a number; ``InputError`` naming ``where`` and ``field`` when it is a
    number that breaks the rule (NaN, infinite, negative, fractional count, too large)."""
    number = _as_number(value)
    if number is None:
        return None
    rule = _RULES[kind]
    fits = not math.isnan(number) and (
        (rule.infinite and number == math.inf)
        or (
            math.isfinite(number)
            and (number > rule.minimum if rule.above_minimum else number >= rule.minimum)
            and number < rule.maximum
            and (not rule.whole or number.is_integer())
        )
    )
    if not fits:
        limit = f" below {rule.maximum:.3g}" if math.isfinite(rule.maximum) else ""
        raise InputError(
            f"{where}: field '{field}' must be {rule.what}{limit}, got {value!r}",
            hint="a declared or reported figure is checked as a measured one is",
        )
    return int(number) if rule.whole else number


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer past float range: no count is that large
            return math.nan
    if isinstance(value, str):
        try:
            return float(value)  # "inf", as vLLM writes an unbounded request rate
        except ValueError:
            return None
    return None
