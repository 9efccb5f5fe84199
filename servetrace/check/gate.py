"""SLO rules and regression budgets: parse them, find them in config, evaluate them.

Grammar (whitespace is allowed between tokens)::

    line        := rule (("," | "&&") rule)*        every rule must pass
    rule        := slo | regression
    slo         := key op number unit?              ttft.p99<=500ms   cancelled.fraction<=1%
    regression  := key ":" sign? number unit?       ttft.p99:+10%     itl.p50:+2ms
    goodput     := metric op number time-unit       ttft<=200ms       (per request, no stat)
    key         := metric "." stat                  ttft.p99  itl.p50  throughput.requests_per_s
    op          := "<=" | "<" | ">=" | ">"          ("≤" and "≥" are read as "<=" and ">=")
    time-unit   := "ns" | "us" | "µs" | "ms" | "s"

Metrics and statistics are those of ``servetrace.compare.catalog``. Time statistics need a
time unit; counts, fractions and rates are plain numbers (fractions also take ``%``).
MLPerf's server rule is one line: ``ttft.p99<=2s && tpot.p99<=200ms``.

A regression budget is how much *worse* than the baseline a statistic may get: ``+10%``
(relative) or ``+2ms`` (absolute, in the metric's units). For higher-is-better metrics
(throughput, goodput) worse is lower, so their budgets are written with ``-`` (an
unsigned budget is read in the worse direction). A budget fails when the candidate is
beyond it **and** the change is significant: the interval of ``candidate / baseline``
(``servetrace.compare.measure``, paired when the workloads match) lies entirely on the worse
side of 1. With ``significance=False``, or a baseline given as the JSON of
``servetrace analyze --format json`` (summary numbers, no samples to test), only the
budget applies and ``significant`` is null.

Configuration: the ``[check]`` table of ``servetrace.toml``, or ``[tool.servetrace.check]``
of ``pyproject.toml``, found by walking up from the working directory (the first
``servetrace.toml``, or ``pyproject.toml`` that has a ``[tool.servetrace]`` table)::

    [check]
    slo = ["ttft.p99<=2s", "tpot.p99<=200ms"]   # a list, or one string with commas
    regression = ["ttft.p99:+10%", "itl.p50:+2ms"]
    goodput = ["ttft<=200ms", "tpot<=50ms"]     # per-request targets for goodput.*
    baseline = "runs/baseline.parquet"          # relative to the config file
    significance = true
    seed = 0
    resamples = 2000
    confidence = 0.95
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from servetrace.analysis.memory import Analysis
from servetrace.compare.catalog import (
    GOODPUT_METRICS,
    METRICS,
    OPERATORS,
    GoodputTarget,
    MetricSpec,
    MetricUnavailable,
    canonical_metric,
    check_stat,
    get_metric,
    metric_value,
    stats_help,
    suggest,
)
from servetrace.compare.measure import measure
from servetrace.compare.workload import WorkloadMatch, match_workloads
from servetrace.errors import UsageError
from servetrace.render.compare_words import skipped_text
from servetrace.render.format import display_unit, format_number, format_value, to_display
from servetrace.render.workload import workload_dict, workload_message
from servetrace.stats.bootstrap import DEFAULT_RESAMPLES
from servetrace.stats.ratio import DEFAULT_CONFIDENCE
from servetrace.stats.verdicts import MIN_SAMPLES
from servetrace.units import TIME_UNIT_SPELLINGS as TIME_UNITS_NS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

RuleKind = Literal["slo", "regression"]
CONFIG_FILE = "servetrace.toml"
PYPROJECT = "pyproject.toml"
CONFIG_KEYS = (
    "slo",
    "regression",
    "goodput",
    "baseline",
    "significance",
    "seed",
    "resamples",
    "confidence",
)
_NEGATION = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}
_TIME_UNITS_TEXT = "ns, us, ms or s"
_GOODPUT_HINT = "goodput targets look like ttft<=200ms, tpot<=50ms (per request, no statistic)"
_RULE_HINT = (
    "rules look like ttft.p99<=500ms (an SLO) or ttft.p99:+10% (a regression budget); "
    "separate several with ',' or '&&'"
)


# --------------------------------------------------------------------------- rules
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
        return _internal(self.value, self.unit)

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
        return baseline + _internal(self.value, self.unit)

    def __str__(self) -> str:
        sign = "-" if self.value < 0 or (self.value == 0 and _higher(self.metric)) else "+"
        return f"{self.key}:{sign}{format_number(abs(self.value))}{self.unit}"


Rule = SloRule | RegressionRule


def _internal(value: float, unit: str) -> float:
    if unit == "%":
        return value / 100.0
    return value * TIME_UNITS_NS.get(unit, 1.0)


def _higher(metric: str) -> bool:
    return get_metric(metric).better == "higher"


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
        super().__init__("\n".join(p.render() for p in self.problems), hint=hint or _RULE_HINT)


class _Fail(Exception):
    def __init__(self, position: int, length: int, reason: str) -> None:
        super().__init__(reason)
        self.position, self.length, self.reason = position, length, reason


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


def _segments(text: str) -> list[tuple[int, int]]:
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


def _parse_one(
    text: str, start: int, end: int, expect: Literal["slo", "regression", "goodput"] | None
) -> Rule | GoodputTarget:
    scan = _Scanner(text, start, end)
    scan.skip()
    if scan.pos >= end:
        raise _Fail(min(scan.pos, max(len(text) - 1, 0)), 1, "empty rule")
    found = scan.match(_NAME)
    if found is None:
        raise _Fail(scan.pos, 1, "expected a metric name such as ttft, itl, e2e")
    word, at = found
    name = canonical_metric(word)
    spec = METRICS.get(name)
    if spec is None:
        raise _Fail(
            at,
            len(word),
            f"unknown metric {word!r}{suggest(name, METRICS)}; metrics: {', '.join(METRICS)}",
        )
    stat = ""
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
    else:
        if not scan.peek("."):
            raise _Fail(
                scan.pos,
                1,
                f"expected '.' and a statistic after {word!r} "
                f"(e.g. {name}.{'p99' if spec.kind == 'latency' else spec.stats[0]})",
            )
        scan.pos += 1
        found = scan.match(_STAT)
        if found is None:
            raise _Fail(scan.pos, 1, f"expected a statistic of {name}: {stats_help(spec)}")
        raw_stat, stat_at = found
        try:
            stat = check_stat(spec, raw_stat)
        except UsageError as error:
            raise _Fail(stat_at, len(raw_stat), f"{error.message}; {error.hint}") from None
    scan.skip()
    op_at = scan.pos
    literal, op = next(((lit, can) for lit, can in _OPS if scan.peek(lit)), ("", None))
    if op is not None:
        scan.pos += len(literal)
        if expect == "regression":
            raise _Fail(op_at, 1, f"a regression budget is written {name}.{stat}:+10%")
    elif scan.peek(":"):
        scan.pos += 1
        if expect in ("slo", "goodput"):
            raise _Fail(
                op_at,
                1,
                "':' starts a regression budget; here write a limit such "
                f"as {name}{'.' + stat if stat else ''}<=500ms",
            )
    elif scan.peek("=") or scan.peek("!"):
        raise _Fail(op_at, 2 if scan.peek("==") else 1, "use <=, <, >= or >")
    else:
        raise _Fail(
            op_at,
            scan.rest_length() if op_at < end else 1,
            "expected <=, <, >=, > (a limit) or ':' (a regression budget)",
        )
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
                f"add a unit ({_TIME_UNITS_TEXT}{' or %' if budget else ''})",
            )
        if unit not in TIME_UNITS_NS:
            raise _Fail(
                at,
                len(unit),
                f"unknown unit {unit!r} (use {_TIME_UNITS_TEXT}{' or %' if budget else ''})",
            )
        return unit
    if unit == "%" and (budget or stat == "fraction"):
        return unit
    if unit and unit == spec.unit_of(stat):
        return ""
    if unit:
        plain = "a fraction (a number, or %)" if stat == "fraction" else "a plain number"
        raise _Fail(at, len(unit), f"{spec.name}.{stat} is {plain}: remove {unit!r}")
    return unit


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


def _parse(
    text: str,
    expect: Literal["slo", "regression", "goodput"] | None,
    source: str | None = None,
) -> list[Rule | GoodputTarget]:
    rules: list[Rule | GoodputTarget] = []
    problems: list[RuleProblem] = []
    spans = _segments(text)
    for start, end in spans:
        try:
            rules.append(_parse_one(text, start, end, expect))
        except _Fail as fail:
            problems.append(RuleProblem(text, fail.position, fail.length, fail.reason, source))
    if problems:
        raise RuleError(problems, _GOODPUT_HINT if expect == "goodput" else _RULE_HINT)
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
        position = _segments(text)[1][0] - 1  # the separator after the first target
        raise RuleError(
            [
                RuleProblem(
                    text, max(position, 0), 1, "one goodput target here; give each its own", source
                )
            ],
            _GOODPUT_HINT,
        )
    return targets[0]


# --------------------------------------------------------------------------- config
@dataclass(frozen=True)
class GateConfig:
    """Rules and options of ``servetrace check``; ``source`` is the file they came from."""

    rules: tuple[Rule, ...] = ()
    goodput: tuple[GoodputTarget, ...] = ()
    baseline: Path | None = None
    significance: bool = True
    seed: int = 0
    resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    source: Path | None = None


def find_config(cwd: Path | None = None) -> Path | None:
    """The nearest ``servetrace.toml``, or ``pyproject.toml`` with ``[tool.servetrace]``."""
    here = (cwd or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_FILE
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT
        if pyproject.is_file():
            try:
                document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
                continue
            if isinstance(document.get("tool"), dict) and "servetrace" in document["tool"]:
                return pyproject
    return None


def load_config(path: Path | str | None = None, cwd: Path | None = None) -> GateConfig:
    """Read the ``check`` rules from ``path``, or from the config found above ``cwd``.

    No config file found gives an empty ``GateConfig``. Every problem of the file is
    reported at once, rules with a caret under the mistake.
    """
    file = Path(path) if path is not None else find_config(cwd)
    if file is None:
        return GateConfig()
    try:
        document = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"{file}: cannot read the config file ({error.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"{file}: not valid TOML: {error}") from None
    if file.name == PYPROJECT:
        tool = document.get("tool", {})
        if not isinstance(tool, dict) or "servetrace" not in tool:
            raise UsageError(
                f"{file}: no [tool.servetrace] table",
                hint="put the rules under [tool.servetrace.check]",
            )
        table = tool["servetrace"]
        prefix = "tool.servetrace.check"
    else:
        table = document
        prefix = "check"
    section = table.get("check", {}) if isinstance(table, dict) else {}
    if not isinstance(section, dict):
        raise UsageError(f"{file}: [{prefix}] must be a table")
    return _config_from_table(section, file, prefix)


def _config_from_table(section: Mapping[str, Any], file: Path, prefix: str) -> GateConfig:
    problems: list[str] = []
    unknown = sorted(set(section) - set(CONFIG_KEYS))
    if unknown:
        problems.append(
            f"{file}: unknown key{'s' if len(unknown) > 1 else ''} in [{prefix}]: "
            + ", ".join(f"{key!r}{suggest(key, CONFIG_KEYS)}" for key in unknown)
        )
    rules: list[Rule] = []
    goodput: list[GoodputTarget] = []
    for key in ("slo", "regression", "goodput"):
        value = section.get(key, [])
        lines = [value] if isinstance(value, str) else value
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            problems.append(f"{file}: {prefix}.{key} must be a string or a list of strings")
            continue
        for index, line in enumerate(lines):
            where = f"{file}: {prefix}.{key}" + (f"[{index}]" if isinstance(value, list) else "")
            try:
                if key == "slo":
                    rules.extend(parse_slo(line, source=where))
                elif key == "regression":
                    rules.extend(parse_regression(line, source=where))
                else:
                    goodput.extend(parse_goodput_targets(line, source=where))
            except RuleError as error:
                problems.append(error.message)
    options: dict[str, Any] = {}
    checks: dict[str, tuple[type | tuple[type, ...], str]] = {
        "significance": (bool, "true or false"),
        "seed": (int, "an integer"),
        "resamples": (int, "an integer"),
        "confidence": ((int, float), "a number"),
        "baseline": (str, "a path"),
    }
    for key, (kinds, wanted) in checks.items():
        if key not in section:
            continue
        value = section[key]
        if not isinstance(value, kinds) or (key != "significance" and isinstance(value, bool)):
            problems.append(f"{file}: {prefix}.{key} must be {wanted}, not {value!r}")
        else:
            options[key] = value
    if "baseline" in options:
        options["baseline"] = (file.parent / options["baseline"]).resolve()
    if "confidence" in options:
        options["confidence"] = float(options["confidence"])
    if problems:
        raise UsageError("\n".join(problems), hint=_RULE_HINT)
    return GateConfig(rules=tuple(rules), goodput=tuple(goodput), source=file, **options)


# --------------------------------------------------------------------------- evaluate
@dataclass(frozen=True)
class RuleResult:
    """The outcome of one rule; numbers in reporting units (``unit``)."""

    rule: str
    kind: RuleKind
    passed: bool
    value: float | None
    limit: float | None
    unit: str
    baseline: float | None
    significant: bool | None
    message: str
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "kind": self.kind,
            "passed": self.passed,
            "value": self.value,
            "limit": self.limit,
            "unit": self.unit,
            "baseline": self.baseline,
            "significant": self.significant,
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "message": self.message,
        }


@dataclass(frozen=True)
class GateResult:
    """Every rule's result; ``passed`` only if all passed."""

    passed: bool
    results: tuple[RuleResult, ...]
    significance: bool
    seed: int
    resamples: int
    confidence: float
    baseline_kind: Literal["trace", "json"] | None
    workload: WorkloadMatch | None = None
    notes: tuple[str, ...] = ()

    @property
    def failures(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "rules": [result.to_dict() for result in self.results],
            "significance": self.significance,
            "seed": self.seed,
            "resamples": self.resamples,
            "confidence": self.confidence,
            "baseline": self.baseline_kind,
            "workload": None if self.workload is None else workload_dict(self.workload),
            "notes": list(self.notes),
        }


def _json_baseline_value(document: Mapping[str, Any], spec: MetricSpec, stat: str) -> float:
    """A statistic from ``servetrace analyze --format json`` output, in internal units."""
    where = f"{spec.name}.{stat}"
    if spec.kind == "latency":
        entry = document.get("metrics", {}).get(spec.name)
        if not isinstance(entry, Mapping) or entry.get(stat) is None:
            have = sorted(k for k in entry if k != "unit") if isinstance(entry, Mapping) else []
            raise UsageError(
                f"the baseline JSON has no {where}"
                + (f" (it has {', '.join(have)})" if have else "")
            )
        value = float(entry[stat])
        if stat == "count":
            return value
        unit = str(entry.get("unit", "ms"))
        if unit not in TIME_UNITS_NS:
            raise UsageError(f"the baseline JSON gives {spec.name} in unknown unit {unit!r}")
        return value * TIME_UNITS_NS[unit]
    throughput = document.get("throughput", {})
    if spec.name == "throughput" and throughput.get(stat) is not None:
        return float(throughput[stat])
    goodput_rate = throughput.get("goodput_requests_per_s")
    if spec.name == "goodput" and stat == "requests_per_s" and goodput_rate is not None:
        return float(goodput_rate)
    goodput = document.get("goodput") or {}
    key = {"fraction": "fraction", "count": "requests_met"}.get(stat)
    if spec.name == "goodput" and key and goodput.get(key) is not None:
        return float(goodput[key])
    if spec.name == "cancelled":
        outcomes = document.get("outcomes", {})
        counts = {k: _count(outcomes.get(k)) for k in ("completed", "cancelled", "in_flight")}
        if counts["cancelled"] is not None:
            cancelled = counts["cancelled"]
            if stat == "count":
                return cancelled
            total = sum(v for v in counts.values() if v is not None)
            return cancelled / total if total else 0.0
    raise UsageError(
        f"the baseline JSON has no {where}",
        hint="give the baseline as a trace to compare this statistic",
    )


def _count(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):  # e.g. cancelled by state: {"queued": 3, ...}
        if "total" in value:
            return _count(value["total"])
        parts = [_count(v) for v in value.values()]
        return float(sum(p for p in parts if p is not None))
    return None


def _check_json_baseline(document: Mapping[str, Any]) -> None:
    if not isinstance(document.get("metrics"), Mapping):
        raise UsageError(
            "the baseline JSON has no 'metrics' object",
            hint="write it with `servetrace analyze --format json`",
        )
    naming = document.get("naming", "servetrace")
    if naming != "servetrace":
        raise UsageError(
            f"the baseline JSON was written with --naming {naming}: its metric "
            "names are another tool's",
            hint="write it with `servetrace analyze --format json` without --naming",
        )


def _coerce_rules(rules: Sequence[Rule] | str) -> tuple[Rule, ...]:
    return parse_rules(rules) if isinstance(rules, str) else tuple(rules)


def evaluate(
    analysis: Analysis,
    rules: Sequence[Rule] | str,
    baseline: Analysis | Mapping[str, Any] | None = None,
    *,
    goodput: Sequence[GoodputTarget] = (),
    significance: bool = True,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    pair_on: str | None = None,
) -> GateResult:
    """Evaluate SLO rules and regression budgets on one trace.

    ``baseline`` is another trace's analysis (budgets are tested for significance), the
    parsed JSON of ``servetrace analyze --format json`` (budget only), or None (then a
    regression budget is a usage error). Rules that the traces cannot provide (no prompt
    lengths, no goodput targets) are usage errors, all reported at once.
    """
    checked = _coerce_rules(rules)
    if not checked:
        raise UsageError(
            "no rules to check",
            hint="give SLO rules or regression budgets, or put them in the "
            "[check] table of servetrace.toml",
        )
    regressions = [r for r in checked if isinstance(r, RegressionRule)]
    if regressions and baseline is None:
        raise UsageError(
            "regression budget"
            + ("s " if len(regressions) > 1 else " ")
            + ", ".join(repr(str(r)) for r in regressions)
            + " need a baseline",
            hint="give a baseline trace (or its `servetrace analyze --format json` output)",
        )
    json_baseline = isinstance(baseline, Mapping)
    if isinstance(baseline, Mapping):
        _check_json_baseline(baseline)
    problems: list[str] = []
    values: dict[str, float | None] = {}
    base_values: dict[str, float] = {}
    for rule in checked:
        try:
            values[rule.key] = metric_value(analysis, rule.metric, rule.stat, goodput=goodput)
        except MetricUnavailable as error:
            problems.append(f"{rule}: {error.message}")
            continue
        if isinstance(rule, RegressionRule):
            try:
                if isinstance(baseline, Mapping):
                    base_values[rule.key] = _json_baseline_value(
                        baseline, get_metric(rule.metric), rule.stat
                    )
                elif baseline is not None:
                    value = metric_value(baseline, rule.metric, rule.stat, goodput=goodput)
                    if value is not None:
                        base_values[rule.key] = value
            except UsageError as error:
                problems.append(f"{rule}: {error.message}")
    if problems:
        raise UsageError("; ".join(problems))

    tested: dict[str, Any] = {}
    workload: WorkloadMatch | None = None
    notes: list[str] = []
    test_significance = significance and regressions and not json_baseline
    if test_significance and baseline is not None and not isinstance(baseline, Mapping):
        workload = match_workloads(baseline.requests, analysis.requests, pair_on)
        measured, skipped = measure(
            baseline,
            analysis,
            [(r.metric, r.stat) for r in regressions],
            match=workload,
            seed=seed,
            resamples=resamples,
            confidence=confidence,
            min_change=0.0,
            goodput=goodput,
        )
        notes = [skipped_text(s) for s in skipped]
        tested = {f"{m.spec.name}.{m.stat}": m for m in measured}
        if not workload.paired:
            notes.append(f"baseline: {workload_message(workload)}")

    results = []
    for rule in checked:
        if isinstance(rule, SloRule):
            results.append(_slo_result(rule, values.get(rule.key)))
        else:
            results.append(
                _regression_result(
                    rule,
                    values.get(rule.key),
                    base_values.get(rule.key),
                    tested.get(rule.key),
                    bool(test_significance),
                )
            )
    return GateResult(
        passed=all(r.passed for r in results),
        results=tuple(results),
        significance=bool(significance),
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        baseline_kind=None if baseline is None else ("json" if json_baseline else "trace"),
        workload=workload,
        notes=tuple(notes),
    )


def _slo_result(rule: SloRule, value: float | None) -> RuleResult:
    spec = get_metric(rule.metric)
    unit = display_unit(spec, rule.stat)
    limit = rule.limit
    shown_value = to_display(spec, rule.stat, value)
    shown_limit = to_display(spec, rule.stat, limit)
    if value is None:
        return RuleResult(
            str(rule),
            "slo",
            False,
            None,
            shown_limit,
            unit,
            None,
            None,
            f"FAIL {rule.key}: no value: no completed request of this trace has a "
            f"{rule.metric} (a rule that cannot be checked does not pass)",
        )
    passed = OPERATORS[rule.op](value, limit)
    relation = rule.op if passed else _NEGATION[rule.op]
    message = (
        f"{'PASS' if passed else 'FAIL'} {rule.key}: {format_value(shown_value, unit)} "
        f"{relation} {format_value(shown_limit, unit)}"
    )
    return RuleResult(str(rule), "slo", passed, shown_value, shown_limit, unit, None, None, message)


def _regression_result(
    rule: RegressionRule,
    value: float | None,
    base: float | None,
    tested: Any,
    test_significance: bool,
) -> RuleResult:
    spec = get_metric(rule.metric)
    unit = display_unit(spec, rule.stat)
    shown_value = to_display(spec, rule.stat, value)
    shown_base = to_display(spec, rule.stat, base)
    if value is None or base is None:
        which = "candidate" if value is None else "baseline"
        return RuleResult(
            str(rule),
            "regression",
            False,
            shown_value,
            None,
            unit,
            shown_base,
            None,
            f"FAIL {rule.key}: no value in the {which}: none of its completed requests "
            f"has a {rule.metric}",
        )
    limit = rule.limit_for(base)
    shown_limit = to_display(spec, rule.stat, limit)
    worse_is_higher = spec.better == "lower"
    exceeded = value > limit if worse_is_higher else value < limit
    significant: bool | None = None
    too_few: int | None = None
    ratio = ci_low = ci_high = p_value = None
    if tested is not None:
        ci = tested.ci
        ratio, ci_low, ci_high, p_value = ci.ratio, ci.ci_low, ci.ci_high, ci.p_value
        if ci_low is None or ci_high is None:
            significant = False
        else:
            significant = ci_low > 1.0 if worse_is_higher else ci_high < 1.0
            if min(ci.n_baseline, ci.n_candidate) < MIN_SAMPLES and ci.method != "poisson":
                significant = False
                too_few = min(ci.n_baseline, ci.n_candidate)
    elif test_significance:
        significant = False
    passed = not exceeded or (test_significance and significant is False)
    change = _change_text(value, base, unit, spec, rule.stat)
    relation = (
        (">" if worse_is_higher else "<") if exceeded else ("<=" if worse_is_higher else ">=")
    )
    budget = str(rule).split(":", 1)[1]
    message = (
        f"{'PASS' if passed else 'FAIL'} {rule.key}: {format_value(shown_value, unit)} "
        f"{relation} {format_value(shown_limit, unit)} "
        f"(baseline {format_value(shown_base, unit)} {budget}; {change}"
    )
    if significant is None:
        message += ")"
    elif too_few is not None:
        # Say why a large change still passes: it could not be tested, not that it held.
        message += (
            f", not testable: {too_few} requests, {MIN_SAMPLES} needed; "
            "use --no-significance to gate on the budget alone)"
        )
    else:
        message += ", significant)" if significant else ", not significant)"
    return RuleResult(
        str(rule),
        "regression",
        passed,
        shown_value,
        shown_limit,
        unit,
        shown_base,
        significant,
        message,
        ratio,
        ci_low,
        ci_high,
        p_value,
    )


def _change_text(value: float, base: float, unit: str, spec: MetricSpec, stat: str) -> str:
    if base != 0:
        return f"{(value / base - 1.0) * 100:+.1f}%"
    shown = to_display(spec, stat, value - base)
    return f"{'+' if (shown or 0) >= 0 else ''}{format_value(shown, unit)}"
