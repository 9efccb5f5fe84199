"""The accounting that proves no row was lost (design §6): every input row is analysed or
quarantined under one rule, and every request is valid or invalid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import polars as pl

from servetrace.analysis.figures import EXAMPLES_SHOWN
from servetrace.analysis.lifecycle import Timeline
from servetrace.analysis.lifecycle_rules import RULES


@dataclass(frozen=True)
class Accounting:
    rows: int
    rows_analyzed: int
    rows_quarantined: int
    requests: int
    requests_valid: int
    requests_invalid: int

    @classmethod
    def valid(cls, rows: int, requests: int) -> Accounting:
        """A group's: only valid requests are in one, so every row of it is analysed."""
        rows, requests = int(rows), int(requests)
        return cls(rows, rows, 0, requests, requests, 0)


class Violation(TypedDict):
    requests: int
    rows: int
    examples: list[Any]


def _ids(frame: pl.DataFrame) -> list[Any]:
    """The first few request ids, earliest arrival first (stable across runs)."""
    ordered = frame.sort("arrival_ns", "request_id", nulls_last=True)
    return ordered["request_id"].head(EXAMPLES_SHOWN).to_list()


def violations(timeline: Timeline) -> dict[str, Violation]:
    """Per rule: how many requests (and rows) broke it, with example request ids."""
    invalid = timeline.requests.filter(pl.col("rule").is_not_null())
    result: dict[str, Violation] = {}
    broken = set(invalid["rule"].unique().to_list()) if invalid.height else set()
    for rule in RULES:
        if rule not in broken:
            continue
        of_rule = invalid.filter(pl.col("rule") == rule)
        result[rule] = {
            "requests": of_rule.height,
            "rows": int(of_rule["rows"].sum()),
            "examples": _ids(of_rule),
        }
    quarantine = timeline.row_quarantine
    row_rules = dict(quarantine.group_by("rule").len().iter_rows()) if quarantine.height else {}
    for rule in RULES:
        if rule in row_rules:
            result[rule] = {"requests": 0, "rows": row_rules[rule], "examples": []}
    return result


def accounting(timeline: Timeline) -> Accounting:
    requests = timeline.requests
    invalid = requests.filter(pl.col("rule").is_not_null())
    quarantined = int(invalid["rows"].sum()) + timeline.row_quarantine.height
    total = int(requests["rows"].sum()) + timeline.row_quarantine.height
    return Accounting(
        rows=total,
        rows_analyzed=total - quarantined,
        rows_quarantined=quarantined,
        requests=requests.height,
        requests_valid=requests.height - invalid.height,
        requests_invalid=invalid.height,
    )
