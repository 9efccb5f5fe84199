"""Where ``servetrace check`` finds its rules: ``servetrace.toml`` or ``pyproject.toml``.

The ``[check]`` table of ``servetrace.toml``, or ``[tool.servetrace.check]`` of
``pyproject.toml``, found by walking up from the working directory (the first
``servetrace.toml``, or ``pyproject.toml`` that has a ``[tool.servetrace]`` table)::

    [check]
    slo = ["ttft.p99<=2s", "tpot.p99<=200ms"]   # a list, or one string with commas
    regression = ["ttft.p99:+10%", "itl.p50:+2ms"]
    goodput = ["ttft<=200ms", "tpot<=50ms"]     # per-request targets for goodput.*
    baseline = "runs/baseline.parquet"          # relative to the config file
    significance = true
    require_all = false                         # a skipped rule fails the check
    seed = 0
    resamples = 2000
    confidence = 0.95

Files are UTF-8, a byte-order mark allowed. Every value is checked: a table where a table
belongs (``[tool] servetrace = 5`` is an error, not ignored), known keys only, rules by the
grammar (a caret under the mistake), and numbers in range — a seed is an integer
from 0 to 2^64 - 1, resamples an integer from ``MIN_RESAMPLES`` to ``MAX_RESAMPLES``,
confidence a finite number in [0.5, 1). ``option_problems`` is the same check for the
options of ``servetrace.rules.evaluate.evaluate``. Every problem of a file is reported at
once.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servetrace.analysis.summary import GoodputTarget
from servetrace.comparison.catalog import suggest
from servetrace.errors import UsageError
from servetrace.rules.grammar import (
    RULE_HINT,
    RuleError,
    parse_goodput_targets,
    parse_regression,
    parse_slo,
)
from servetrace.rules.rules import Rule
from servetrace.settings import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILE = "servetrace.toml"
PYPROJECT = "pyproject.toml"
# Tables a servetrace config may hold (a typo such as [chek] must not be silently ignored).
SECTIONS = ("check",)
CONFIG_KEYS = (
    "slo",
    "regression",
    "goodput",
    "baseline",
    "significance",
    "require_all",
    "seed",
    "resamples",
    "confidence",
)
MAX_SEED = 2**64 - 1  # numpy's SeedSequence takes any non-negative integer; 64 bits is plenty
MIN_RESAMPLES = 100  # as servetrace.comparison.measure requires
MAX_RESAMPLES = 1_000_000  # beyond this a bootstrap only costs memory and time
MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class CheckConfig:
    """Rules and options of ``servetrace check``; ``source`` is the file they came from."""

    rules: tuple[Rule, ...] = ()
    goodput: tuple[GoodputTarget, ...] = ()
    baseline: Path | None = None
    significance: bool = True
    require_all: bool = False
    seed: int = 0
    resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    source: Path | None = None


# --------------------------------------------------------------------------- values
def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def seed_problem(value: Any) -> str | None:
    """Why ``value`` is not a seed, or None."""
    if not _whole(value) or not 0 <= value <= MAX_SEED:
        return f"must be an integer from 0 to {MAX_SEED}, not {value!r}"
    return None


def resamples_problem(value: Any) -> str | None:
    """Why ``value`` is not a number of bootstrap resamples, or None."""
    if not _whole(value) or not MIN_RESAMPLES <= value <= MAX_RESAMPLES:
        return f"must be an integer from {MIN_RESAMPLES} to {MAX_RESAMPLES}, not {value!r}"
    return None


def confidence_problem(value: Any) -> str | None:
    """Why ``value`` is not a confidence level, or None (NaN and ±inf are refused)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not MIN_CONFIDENCE <= value < 1.0:
        return f"must be a number from {MIN_CONFIDENCE} up to (not including) 1, not {value!r}"
    return None


def option_problems(seed: Any, resamples: Any, confidence: Any) -> list[str]:
    """Every problem of the statistical options, as ``name must be …`` phrases."""
    found = (
        ("seed", seed_problem(seed)),
        ("resamples", resamples_problem(resamples)),
        ("confidence", confidence_problem(confidence)),
    )
    return [f"{name} {problem}" for name, problem in found if problem]


# --------------------------------------------------------------------------- files
def _read_toml(file: Path) -> dict[str, Any]:
    try:
        # utf-8-sig: an editor's byte-order mark is not part of the TOML.
        text = file.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise UsageError(f"{file}: cannot read the config file ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise UsageError(f"{file}: not valid TOML: not UTF-8 text ({error.reason})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{file}: not valid TOML: {error}") from None


def _declares_servetrace(pyproject: Path) -> bool:
    """Whether a pyproject.toml has a ``tool.servetrace`` entry (of any type)."""
    tool = _read_toml(pyproject).get("tool")
    return isinstance(tool, dict) and "servetrace" in tool


def find_config(cwd: Path | None = None) -> Path | None:
    """The nearest ``servetrace.toml``, or ``pyproject.toml`` with ``[tool.servetrace]``.

    A ``pyproject.toml`` that is not valid TOML is an error: whether it holds the rules
    cannot be known, and walking past it could pick up another project's config.
    """
    here = (cwd or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_FILE
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and _declares_servetrace(pyproject):
            return pyproject
    return None


def load_config(path: Path | str | None = None, cwd: Path | None = None) -> CheckConfig:
    """Read the ``check`` rules from ``path``, or from the config found above ``cwd``.

    No config file found gives an empty ``CheckConfig``. Every problem of the file is
    reported at once, rules with a caret under the mistake.
    """
    file = Path(path) if path is not None else find_config(cwd)
    if file is None:
        return CheckConfig()
    document = _read_toml(file)
    if file.name == PYPROJECT:
        tool = document.get("tool", {})
        if not isinstance(tool, dict) or "servetrace" not in tool:
            raise UsageError(
                f"{file}: no [tool.servetrace] table",
                hint="put the rules under [tool.servetrace.check]",
            )
        table = tool["servetrace"]
        prefix = "tool.servetrace"
    else:
        table = document
        prefix = ""
    if not isinstance(table, dict):
        raise UsageError(
            f"{file}: {prefix} must be a table, not {table!r}",
            hint="write the rules under [tool.servetrace.check]",
        )
    unknown = sorted(set(table) - set(SECTIONS))
    if unknown:
        where = f"[{prefix}]" if prefix else "the file"
        raise UsageError(
            f"{file}: unknown table{'s' if len(unknown) > 1 else ''} in {where}: "
            + ", ".join(f"{key!r}{suggest(key, SECTIONS)}" for key in unknown),
            hint=f"servetrace reads {', '.join(f'[{s}]' for s in SECTIONS)}",
        )
    name = f"{prefix}.check" if prefix else "check"
    section = table.get("check", {})
    if not isinstance(section, dict):
        raise UsageError(f"{file}: [{name}] must be a table, not {section!r}")
    return _config_from_table(section, file, name)


def _rules_from(
    section: Mapping[str, Any], file: Path, prefix: str, problems: list[str]
) -> tuple[list[Rule], list[GoodputTarget]]:
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
    return rules, goodput


def _config_from_table(section: Mapping[str, Any], file: Path, prefix: str) -> CheckConfig:
    problems: list[str] = []
    unknown = sorted(set(section) - set(CONFIG_KEYS))
    if unknown:
        problems.append(
            f"{file}: unknown key{'s' if len(unknown) > 1 else ''} in [{prefix}]: "
            + ", ".join(f"{key!r}{suggest(key, CONFIG_KEYS)}" for key in unknown)
        )
    rules, goodput = _rules_from(section, file, prefix, problems)
    options: dict[str, Any] = {}
    for key in ("significance", "require_all"):
        if key in section and not isinstance(section[key], bool):
            problems.append(f"{file}: {prefix}.{key} must be true or false, not {section[key]!r}")
        elif key in section:
            options[key] = section[key]
    checks = {
        "seed": seed_problem,
        "resamples": resamples_problem,
        "confidence": confidence_problem,
    }
    for key, problem_of in checks.items():
        if key not in section:
            continue
        problem = problem_of(section[key])
        if problem:
            problems.append(f"{file}: {prefix}.{key} {problem}")
        else:
            options[key] = section[key]
    if "baseline" in section:
        baseline = section["baseline"]
        if not isinstance(baseline, str) or not baseline.strip():
            problems.append(f"{file}: {prefix}.baseline must be a path, not {baseline!r}")
        else:
            options["baseline"] = (file.parent / baseline).resolve()
    if "confidence" in options:
        options["confidence"] = float(options["confidence"])
    if problems:
        raise UsageError("\n".join(problems), hint=RULE_HINT)
    return CheckConfig(rules=tuple(rules), goodput=tuple(goodput), source=file, **options)
