"""Numbers for people: reporting units and the short text of one value.

The core keeps times in ns; reports show them in ms (the JSON contract's unit for every
time). ``display_unit``/``to_display`` are the one conversion of a compare or check value,
``format_value`` its text.
"""

from __future__ import annotations

import math
from typing import Any

from servetrace.comparison.catalog import MetricSpec
from servetrace.units import NS_PER_MS

# The unit a report shows for each internal unit (times: ns inside, ms outside).
DISPLAY_UNITS: dict[str, str] = {"ns": "ms"}


def display_unit(spec: MetricSpec, stat: str) -> str:
    """Reporting unit of ``spec.stat``: ``ms`` for a time, else the value's own unit."""
    unit = spec.unit_of(stat)
    return DISPLAY_UNITS.get(unit, unit)


def ns_to_ms(value: float | None) -> float | None:
    """ns → ms; None, NaN and infinities pass through."""
    if value is None or not math.isfinite(value):
        return value
    return value / NS_PER_MS


def to_display(spec: MetricSpec, stat: str, value: float | None) -> float | None:
    """Internal value → reporting unit (ns → ms for time statistics)."""
    return ns_to_ms(value) if spec.unit_of(stat) == "ns" else value


def format_value(value: float | None, unit: str) -> str:
    """``208 ms``, ``0.0123``, ``18.1 req/s``, ``n/a``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        text = "inf" if value > 0 else "-inf"
    elif value != 0 and abs(value) >= 1000:
        text = f"{value:.0f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}" if unit else text


def table_number(value: float | None, digits: int = 2) -> str:
    """A table cell: ``–`` for none, ``12,345``, ``1,234``, ``123.4``, ``12.34``."""
    if value is None:
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def fixed(value: float | None, digits: int = 1) -> str:
    """A table cell: ``–`` for none, ``12.3`` (``digits`` decimals), whole from 1,000."""
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if abs(value) < 1000 else f"{value:,.0f}"


def short_ms(ms: float) -> str:
    """A magnitude in ms, short: ``155 ms``, ``27.3 ms``, ``420 µs``."""
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1000:.3g} µs"


def signed(value: float | None, unit: str) -> str:
    """``+20 ms``, ``-0.41 ms``, ``0 ms``, ``n/a``."""
    if value is None:
        return "n/a"
    text = format_value(abs(value), unit)
    if value == 0 or text.startswith("0 ") or text == "0":
        return text
    return ("+" if value > 0 else "-") + text


def ms_words(ns: float | None) -> str:
    """A duration in ns for a sentence: ``45.4 ms``, ``548 ms``, ``1,234 ms``, ``n/a``."""
    if ns is None:
        return "n/a"
    ms = ns / 1e6
    return f"{ms:,.0f} ms" if abs(ms) >= 100 else f"{ms:,.3g} ms"


def counted(count: int, noun: str) -> str:
    """``1 step``, ``2,114 steps``: a count and its noun, agreeing."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def plain_text(renderable: Any, width: int, *, soft_wrap: bool) -> str:
    """A Rich renderable as plain text ``width`` wide: no colour, no trailing spaces."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        highlight=False,
        soft_wrap=soft_wrap,
    )
    console.print(renderable)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().rstrip("\n").split("\n"))
