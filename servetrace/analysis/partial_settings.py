"""The analysis settings a partial was made with, kept in its manifest (docs/partials.md).

A shard's report depends on more than its rows: ``--event-map`` decided which rows became
which events when the shard was read, and ``--goodput`` and the formula tolerances decide
what its report says. Two shards made with different settings would merge into a report
that holds neither, so ``combine`` refuses them (``differing``), and ``merge`` reports
with the settings the shards were made with unless it is given others (``applied``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from servetrace.analysis.metrics import REQUEST_COLUMNS
from servetrace.analysis.result import AnalysisOptions
from servetrace.analysis.summary import GoodputTarget
from servetrace.units import NS_PER_MS

DEFAULTS = AnalysisOptions()
GOODPUT_OPS = ("<=", "<", ">=", ">")
# Each setting and the flag it is set with, for messages.
FLAGS = {
    "event_map": "--event-map",
    "goodput": "--goodput",
    "formula_abs_tol_ns": "--formula-abs-tol-ms",
    "formula_rel_tol": "--formula-rel-tol",
}


@dataclass(frozen=True)
class ShardSettings:
    """What a partial's analysis was asked to do (the defaults: nothing special)."""

    event_map: tuple[tuple[str, str], ...] = ()  # file value -> canonical event, sorted
    goodput: tuple[GoodputTarget, ...] = ()
    formula_abs_tol_ns: int = DEFAULTS.formula_abs_tol_ns
    formula_rel_tol: float = DEFAULTS.formula_rel_tol

    @classmethod
    def of(cls, event_map: Mapping[str, str], options: AnalysisOptions) -> ShardSettings:
        return cls(
            event_map=tuple(sorted(event_map.items())),
            goodput=tuple(options.goodput),
            formula_abs_tol_ns=int(options.formula_abs_tol_ns),
            formula_rel_tol=float(options.formula_rel_tol),
        )

    def applied(self, given: AnalysisOptions) -> AnalysisOptions:
        """The options a merge reports with: each one the caller set wins (a value other
        than the default, or one named in ``explicit``: a default given on purpose),
        the shards' own otherwise."""

        def chosen(name: str) -> Any:
            mine = getattr(given, name)
            wins = name in given.explicit or mine != getattr(DEFAULTS, name)
            return mine if wins else getattr(self, name)

        return replace(
            given,
            goodput=given.goodput or self.goodput,
            formula_abs_tol_ns=chosen("formula_abs_tol_ns"),
            formula_rel_tol=chosen("formula_rel_tol"),
        )

    def differing(self, other: ShardSettings) -> tuple[str, str, str] | None:
        """The first setting ``other`` differs in: (flag, this value, other value)."""
        for name, flag in FLAGS.items():
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                return flag, self.text(name), other.text(name)
        return None

    def text(self, name: str) -> str:
        value = getattr(self, name)
        if name == "event_map":
            return ",".join(f"{k}={v}" for k, v in value) or "none"
        if name == "goodput":
            return ",".join(t.text() for t in value) or "none"
        if name == "formula_abs_tol_ns":
            return f"{value / NS_PER_MS:g}"
        return f"{value:g}"

    def to_json(self) -> dict[str, Any]:
        return {
            "event_map": dict(self.event_map),
            "goodput": [
                {"metric": t.metric, "op": t.op, "limit_ns": t.limit_ns} for t in self.goodput
            ],
            "formula_abs_tol_ns": self.formula_abs_tol_ns,
            "formula_rel_tol": self.formula_rel_tol,
        }

    @classmethod
    def from_json(cls, value: Any) -> ShardSettings:
        """The manifest's ``settings``; ``ValueError`` naming the key that is wrong."""
        if not isinstance(value, dict):
            raise ValueError("settings")
        event_map = value.get("event_map")
        if not isinstance(event_map, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in event_map.items()
        ):
            raise ValueError("settings.event_map")
        goodput = value.get("goodput")
        if not isinstance(goodput, list) or not all(_is_target(t) for t in goodput):
            raise ValueError("settings.goodput")
        abs_tol: Any = value.get("formula_abs_tol_ns")
        rel_tol: Any = value.get("formula_rel_tol")
        if not _is_number(abs_tol, integer=True) or abs_tol < 0:
            raise ValueError("settings.formula_abs_tol_ns")
        if not _is_number(rel_tol) or rel_tol < 0:
            raise ValueError("settings.formula_rel_tol")
        return cls(
            event_map=tuple(sorted(event_map.items())),
            goodput=tuple(GoodputTarget(t["metric"], t["op"], t["limit_ns"]) for t in goodput),
            formula_abs_tol_ns=int(abs_tol),
            formula_rel_tol=float(rel_tol),
        )


def _is_number(value: Any, integer: bool = False) -> bool:
    kinds = int if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value)


def _is_target(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and f"{value.get('metric')}_ns" in REQUEST_COLUMNS
        and value.get("op") in GOODPUT_OPS
        and _is_number(value.get("limit_ns"))
    )
