"""The rule grammar of ``servetrace check``: SLOs, regression budgets, goodput targets.

Grammar (whitespace is allowed between tokens)::

    line        := rule (("," | "&&") rule)*        every rule must pass
    rule        := slo | regression
    slo         := key op number unit?              ttft.p99<=500ms   cancelled.fraction<=1%
    regression  := key ":" sign? number unit?       ttft.p99:+10%     itl.p50:+2ms
    goodput     := metric op number time-unit       ttft<=200ms       (per request, no stat)
    key         := metric "." stat                  ttft.p99  itl.p50  throughput.requests_per_s
    op          := "<=" | "<" | ">=" | ">"          ("≤" and "≥" are read as "<=" and ">=")
    time-unit   := "ns" | "us" | "µs" | "ms" | "s" | "min" | "m" | "h"   (units.duration_ns)

Metrics and statistics are those of ``servetrace.comparison.catalog``. Time statistics need a
time unit; counts, fractions and rates are plain numbers (fractions also take ``%``).
MLPerf's server rule is one line: ``ttft.p99<=2s && tpot.p99<=200ms``.

A regression budget is how much *worse* than the baseline a statistic may get: ``+10%``
(relative) or ``+2ms`` (absolute, in the metric's units). For higher-is-better metrics
(throughput, goodput) worse is lower, so their budgets are written with ``-`` (an
unsigned budget is read in the worse direction).

Every number must mean something: finite (``1e999ms`` is refused), a time no longer than
a trace can hold (2^63 - 1 ns, about 292 years: timestamps are Int64 ns), a fraction
between 0 and 1 (0 % and 100 %), and a budget on a higher-is-better metric no larger than
100 % (it cannot fall further). A mistake is a ``RuleError`` whose message shows the rule
with a caret under the mistake.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from servetrace.analysis.summary import GoodputTarget
from servetrace.comparison.catalog import (
    GOODPUT_METRICS,
    METRICS,
    MetricSpec,
    canonical_metric,
    check_stat,
    is_fraction_stat,
    stats_help,
    suggest,
)
from servetrace.errors import UsageError
from servetrace.rules.rules import RegressionRule, Rule, SloRule, format_number, internal_value
from servetrace.units import DURATION_UNITS_TEXT
from servetrace.units import TIME_UNIT_SPELLINGS as TIME_UNITS_NS

Expect = Literal["slo", "regression", "goodput"]
# The longest time a trace can hold: its timestamps are Int64 nanoseconds.
MAX_TIME_NS = float(2**63 - 1)
GOODPUT_HINT = "goodput targets look like ttft<=200ms, tpot<=50ms (per request, no statistic)"
RULE_HINT = (
    "rules look like ttft.p99<=500ms (an SLO) or ttft.p99:+10% (a regression budget); "
    "separate several with ',' or '&&'"
)


# --------------------------------------------------------------------------- errors
@dataclass(frozen=True)
class RuleProblem:
    """One mistake in a rule: where it is (0-based, in ``text``) and what is wrong."""

    text: str
    position: int
    length: int
    reason: str
    source: str | None = None

    def render(self) -> str:
        where = f"{self.source}: " if self.source else ""
        caret = " " * self.position + "^" * max(1, self.length)
        return f"{where}bad rule: {self.reason}\n  {self.text}\n  {caret}"


class RuleError(UsageError):
    """A rule does not parse; the message shows the rule with a caret under the mistake."""

    def __init__(self, problems: Sequence[RuleProblem], hint: str = "") -> None:
        self.problems = tuple(problems)
        first = self.problems[0]
        self.text = first.text
        self.position = first.position
        self.length = first.length
        self.reason = first.reason
        super().__init__("\n".join(p.render() for p in self.problems), hint=hint or RULE_HINT)


class _Fail(Exception):
    def __init__(self, position: int, length: int, reason: str) -> None:
        super().__init__(reason)
        self.position, self.length, self.reason = position, length, reason


# --------------------------------------------------------------------------- scanner
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STAT = re.compile(r"[A-Za-z0-9_]+")
_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_UNIT = re.compile(r"[A-Za-zµμ%/]+")
_OPS = (("<=", "<="), (">=", ">="), ("≤", "<="), ("≥", ">="), ("<", "<"), (">", ">"))


class _Scanner:
    def __init__(self, text: str, start: int, end: int) -> None:
        self.text, self.pos, self.end = text, start, end

    def skip(self) -> None:
        while self.pos < self.end and self.text[self.pos].isspace():
            self.pos += 1

    def match(self, pattern: re.Pattern[str]) -> tuple[str, int] | None:
        found = pattern.match(self.text, self.pos, self.end)
        if not found:
            return None
        self.pos = found.end()
        return found.group(0), found.start()

    def peek(self, literal: str) -> bool:
        return self.text.startswith(literal, self.pos) and self.pos + len(literal) <= self.end

    def rest_length(self) -> int:
        return max(1, self.end - self.pos)


def segments(text: str) -> list[tuple[int, int]]:
    """Spans of the rules of a line split at ',' and '&&'."""
    spans: list[tuple[int, int]] = []
    start = i = 0
    while i < len(text):
        if text[i] == ",":
            spans.append((start, i))
            start = i = i + 1
        elif text.startswith("&&", i):
            spans.append((start, i))
            start = i = i + 2
        else:
            i += 1
    spans.append((start, len(text)))
    return spans


# --------------------------------------------------------------------------- one rule
def _metric(scan: _Scanner, expect: Expect | None) -> tuple[MetricSpec, str]:
    """The metric name and, unless a goodput target, ``.stat``."""
    found = scan.match(_NAME)
    if found is None:
        raise _Fail(scan.pos, 1, "expected a metric name such as ttft, itl, e2e")
    word, at = found
    if word.lower() == "consistency" and scan.peek("."):
        # A finding of the server-metrics checks: consistency.FINDING.STAT
        scan.pos += 1
        finding = scan.match(_NAME)
        if finding is None:
            raise _Fail(scan.pos, 1, "expected a finding such as consistency.waiting_gauge")
        word = f"{word}.{finding[0]}"
    name = canonical_metric(word)
    spec = METRICS.get(name)
    if spec is None:
        raise _Fail(
            at,
            len(word),
            f"unknown metric {word!r}{suggest(name, METRICS)}; metrics: {', '.join(METRICS)}",
        )
    if expect == "goodput":
        if name not in GOODPUT_METRICS:
            raise _Fail(
                at,
                len(word),
                f"{word!r} cannot be a per-request goodput target; "
                f"use one of {', '.join(GOODPUT_METRICS)}",
            )
        if scan.peek("."):
            raise _Fail(
                scan.pos,
                scan.rest_length(),
                f"a goodput target is per request: write {name}<=200ms, without a statistic",
            )
        return spec, ""
    if not scan.peek("."):
        raise _Fail(
            scan.pos,
            1,
            f"expected '.' and a statistic after {word!r} "
            f"(e.g. {name}.{'p99' if spec.is_distribution else spec.stats[0]})",
        )
    scan.pos += 1
    found = scan.match(_STAT)
    if found is None:
        raise _Fail(scan.pos, 1, f"expected a statistic of {name}: {stats_help(spec)}")
    raw_stat, stat_at = found
    try:
        return spec, check_stat(spec, raw_stat)
    except UsageError as error:
        raise _Fail(stat_at, len(raw_stat), f"{error.message}; {error.hint}") from None


def _operator(scan: _Scanner, expect: Expect | None, name: str, stat: str) -> str | None:
    """The comparison of a limit, or None after the ':' of a regression budget."""
    op_at = scan.pos
    literal, op = next(((lit, can) for lit, can in _OPS if scan.peek(lit)), ("", None))
    if op is not None:
        scan.pos += len(literal)
        if expect == "regression":
            raise _Fail(op_at, 1, f"a regression budget is written {name}.{stat}:+10%")
        return op
    if scan.peek(":"):
        scan.pos += 1
        if expect in ("slo", "goodput"):
            raise _Fail(
                op_at,
                1,
                "':' starts a regression budget; here write a limit such "
                f"as {name}{'.' + stat if stat else ''}<=500ms",
            )
        return None
    if scan.peek("=") or scan.peek("!"):
        raise _Fail(op_at, 2 if scan.peek("==") else 1, "use <=, <, >= or >")
    raise _Fail(
        op_at,
        scan.rest_length() if op_at < scan.end else 1,
        "expected <=, <, >=, > (a limit) or ':' (a regression budget)",
    )


def _parse_one(text: str, start: int, end: int, expect: Expect | None) -> Rule | GoodputTarget:
    scan = _Scanner(text, start, end)
    scan.skip()
    if scan.pos >= end:
        raise _Fail(min(scan.pos, max(len(text) - 1, 0)), 1, "empty rule")
    spec, stat = _metric(scan, expect)
    name = spec.name
    scan.skip()
    op = _operator(scan, expect, name, stat)
    scan.skip()
    sign_at = scan.pos
    sign = ""
    if scan.peek("+") or scan.peek("-"):
        sign = text[scan.pos]
        scan.pos += 1
    found = scan.match(_NUMBER)
    if found is None:
        raise _Fail(scan.pos, 1, "expected a number")
    number, number_at = found
    value = float(number)
    if sign and op is not None:
        raise _Fail(sign_at, 1, "a limit takes no sign")
    unit_at = scan.pos
    scan.skip()
    found = scan.match(_UNIT)
    unit, unit_at = found if found is not None else ("", unit_at)
    unit = {"μs": "us", "µs": "us"}.get(unit, unit)
    unit = _check_unit(spec, stat, unit, unit_at, op is None, number_at + len(number))
    _check_range(spec, stat, value, unit, op is None, number_at, scan.pos - number_at)
    scan.skip()
    if scan.pos < end:
        raise _Fail(scan.pos, scan.rest_length(), "unexpected text after the rule")
    rule_text = text[start:end].strip()
    if expect == "goodput":
        assert op is not None
        return GoodputTarget(name, op, value * TIME_UNITS_NS[unit])
    if op is not None:
        return SloRule(name, stat, op, value, unit, rule_text)
    return RegressionRule(
        name, stat, _budget_sign(spec, stat, sign, value, unit, sign_at), unit, rule_text
    )


def _check_unit(
    spec: MetricSpec, stat: str, unit: str, at: int, budget: bool, after_number: int
) -> str:
    time = spec.kind == "latency" and stat != "count"
    if time:
        if unit == "%" and budget:
            return unit
        if not unit:
            raise _Fail(
                after_number,
                1,
                f"{spec.name}{'.' + stat if stat else ''} is a time: "
                f"add a unit ({DURATION_UNITS_TEXT}{' or %' if budget else ''})",
            )
        if unit not in TIME_UNITS_NS:
            raise _Fail(
                at,
                len(unit),
                f"unknown unit {unit!r} (use {DURATION_UNITS_TEXT}{' or %' if budget else ''})",
            )
        return unit
    if unit == "%" and (budget or is_fraction_stat(stat)):
        return unit
    if unit and unit == spec.unit_of(stat):
        return ""
    if unit:
        plain = "a fraction (a number, or %)" if is_fraction_stat(stat) else "a plain number"
        raise _Fail(at, len(unit), f"{spec.name}.{stat} is {plain}: remove {unit!r}")
    return unit


def _check_range(
    spec: MetricSpec, stat: str, value: float, unit: str, budget: bool, at: int, length: int
) -> None:
    """Refuse numbers that cannot mean anything: infinite, longer than a trace, >100 %."""
    written = text_of(value, unit)
    if not math.isfinite(value):
        raise _Fail(at, length, "this number is too large to be finite (it reads as infinity)")
    if unit in TIME_UNITS_NS and value * TIME_UNITS_NS[unit] > MAX_TIME_NS:
        raise _Fail(
            at,
            length,
            f"{written} is longer than any trace can be "
            "(timestamps are Int64 ns: at most 2^63 - 1 ns, about 292 years)",
        )
    fraction = is_fraction_stat(stat)
    if fraction and (unit == "" or not budget) and internal_value(value, unit) > 1:
        what = "a fraction limit" if not budget else "a budget of a fraction"
        raise _Fail(at, length, f"{what} is between 0 and 1 (0% and 100%), not {written}")
    if budget and unit == "%" and spec.better == "higher" and value > 100:
        raise _Fail(
            at, length, f"{spec.name}.{stat} cannot fall by more than 100%: {written} is too much"
        )


def text_of(value: float, unit: str) -> str:
    """A number as a rule writes it: ``500ms``, ``10%``, ``0.5``."""
    if not math.isfinite(value):
        return "inf"
    return f"{format_number(value)}{unit}"


def _budget_sign(spec: MetricSpec, stat: str, sign: str, value: float, unit: str, at: int) -> float:
    worse = "-" if spec.better == "higher" else "+"
    if sign and sign != worse and value != 0:
        raise _Fail(
            at,
            1,
            f"{spec.better} {spec.name} is better, and a budget is how much "
            f"worse it may get: write {spec.name}.{stat}:{worse}"
            f"{format_number(value)}{unit}",
        )
    return -value if worse == "-" else value


# --------------------------------------------------------------------------- lines
def _parse(text: str, expect: Expect | None, source: str | None) -> list[Rule | GoodputTarget]:
    rules: list[Rule | GoodputTarget] = []
    problems: list[RuleProblem] = []
    for start, end in segments(text):
        try:
            rules.append(_parse_one(text, start, end, expect))
        except _Fail as fail:
            problems.append(RuleProblem(text, fail.position, fail.length, fail.reason, source))
    if problems:
        raise RuleError(problems, GOODPUT_HINT if expect == "goodput" else RULE_HINT)
    return rules


def parse_rules(text: str, *, source: str | None = None) -> tuple[Rule, ...]:
    """SLOs and regression budgets from one line (``,`` or ``&&`` between rules)."""
    return tuple(r for r in _parse(text, None, source) if not isinstance(r, GoodputTarget))


def parse_slo(text: str, *, source: str | None = None) -> tuple[SloRule, ...]:
    """SLO rules: ``ttft.p99<=2s, tpot.p99<=200ms`` (or ``&&``)."""
    return tuple(r for r in _parse(text, "slo", source) if isinstance(r, SloRule))


def parse_regression(text: str, *, source: str | None = None) -> tuple[RegressionRule, ...]:
    """Regression budgets: ``ttft.p99:+10%, itl.p50:+2ms``."""
    return tuple(r for r in _parse(text, "regression", source) if isinstance(r, RegressionRule))


def parse_goodput_targets(text: str, *, source: str | None = None) -> tuple[GoodputTarget, ...]:
    """Per-request goodput targets as vLLM spells them: ``ttft<=200ms, tpot<=50ms``."""
    return tuple(r for r in _parse(text, "goodput", source) if isinstance(r, GoodputTarget))


def parse_goodput_target(text: str, *, source: str | None = None) -> GoodputTarget:
    """One per-request goodput target (``ttft<=200ms``; ``e2el`` is read as ``e2e``)."""
    targets = parse_goodput_targets(text, source=source)
    if len(targets) != 1:
        position = segments(text)[1][0] - 1  # the separator after the first target
        raise RuleError(
            [
                RuleProblem(
                    text, max(position, 0), 1, "one goodput target here; give each its own", source
                )
            ],
            GOODPUT_HINT,
        )
    return targets[0]
