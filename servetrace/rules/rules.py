"""What a parsed rule is: an SLO (``ttft.p99<=2s``) or a regression budget (``ttft.p99:+10%``).

Rules are plain values: parse them once (``servetrace.rules.grammar``), evaluate them on
many traces (``servetrace.rules.evaluate``). ``str(rule)`` is the canonical text, which
parses back to the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from servetrace.comparison.catalog import get_metric
from servetrace.units import TIME_UNIT_SPELLINGS as TIME_UNITS_NS

RuleKind = Literal["slo", "regression"]


# A rule's canonical text: the number as written, so that a rule reads back as itself.
def format_number(value: float) -> str:
    """Shortest text that reads back as the same float (``500``, ``0.5``, ``1e-05``)."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


@dataclass(frozen=True)
class _StatRule:
    """What every rule names: one statistic of one metric, ``metric.stat``."""

    metric: str
    stat: str

    @property
    def key(self) -> str:
        return f"{self.metric}.{self.stat}"


@dataclass(frozen=True)
class SloRule(_StatRule):
    """``metric.stat op value unit``; ``value``/``unit`` as written (``2``, ``"s"``)."""

    op: str
    value: float
    unit: str
    text: str = field(default="", compare=False)
    kind: ClassVar[RuleKind] = "slo"

    @property
    def limit(self) -> float:
        """The limit in internal units (ns for times, a fraction for ``%``)."""
        return internal_value(self.value, self.unit)

    def __str__(self) -> str:
        return f"{self.key}{self.op}{format_number(self.value)}{self.unit}"


@dataclass(frozen=True)
class RegressionRule(_StatRule):
    """``metric.stat:±value unit``: how much worse than the baseline the stat may get.

    ``value`` is signed in the metric's worse direction (``+10`` for a latency, ``-5``
    for throughput); ``unit`` is ``%`` (relative), a time unit, or ``""``.
    """

    value: float
    unit: str
    text: str = field(default="", compare=False)
    kind: ClassVar[RuleKind] = "regression"

    @property
    def relative(self) -> bool:
        return self.unit == "%"

    def limit_for(self, baseline: float) -> float:
        """The worst acceptable value (internal units) given the baseline's."""
        if self.relative:
            return baseline * (1.0 + self.value / 100.0)
        return baseline + internal_value(self.value, self.unit)

    @property
    def budget(self) -> str:
        """The budget as written in canonical form: ``+10%``, ``-5%``, ``+2ms``."""
        return str(self).split(":", 1)[1]

    def __str__(self) -> str:
        higher = get_metric(self.metric).better == "higher"
        sign = "-" if self.value < 0 or (self.value == 0 and higher) else "+"
        return f"{self.key}:{sign}{format_number(abs(self.value))}{self.unit}"


Rule = SloRule | RegressionRule


def internal_value(value: float, unit: str) -> float:
    """A number as written → internal units: ns for a time unit, a ratio for ``%``."""
    if unit == "%":
        return value / 100.0
    return value * TIME_UNITS_NS.get(unit, 1.0)
