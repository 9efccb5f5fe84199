"""A baseline given as the JSON report of ``servetrace analyze --format json``.

Such a report holds summary numbers and no samples, so a regression budget against it is
the budget alone (no significance test). One place decides whether a document is such a
report (``read_report`` for a file, ``as_report`` for a parsed document) and reads a
statistic from it in internal units (``ReportBaseline.value``).

A file that is not a servetrace document at all is not ours (``read_report`` returns
None and the trace readers and importers try it); a servetrace document of another kind
(a ``compare`` or ``check`` report) or written with ``--naming`` is refused (exit 3).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servetrace.analysis.unavailable import output_unknown
from servetrace.comparison.catalog import MetricSpec
from servetrace.errors import InputError, UsageError
from servetrace.rules.outcome import TraceFacts
from servetrace.units import TIME_UNIT_SPELLINGS as TIME_UNITS_NS

WRITE_HINT = "write the baseline with: servetrace analyze TRACE --format json > base.json"


@dataclass(frozen=True)
class ReportBaseline:
    """A checked ``servetrace analyze --format json`` report; ``source`` names its file."""

    document: Mapping[str, Any]
    source: str | None = None

    def value(self, spec: MetricSpec, stat: str) -> float | None:
        """``spec.stat`` in internal units (ns for times); None where the report has null.

        A statistic the report cannot hold at all (``ttft.p75``, preemptions) is a
        UsageError: only a trace baseline has every statistic.
        """
        where = f"{spec.name}.{stat}"
        document = self.document
        if spec.kind == "latency":
            entry = document["metrics"].get(spec.name)
            if not isinstance(entry, Mapping) or stat not in entry:
                have = sorted(k for k in entry if k != "unit") if isinstance(entry, Mapping) else []
                raise UsageError(
                    f"the baseline JSON has no {where}"
                    + (f" (it has {', '.join(have)})" if have else ""),
                    hint="give the baseline as a trace to compare this statistic",
                )
            value = self._number(entry[stat], where)
            if value is None or stat == "count":
                return value
            unit = str(entry.get("unit", "ms"))
            if unit not in TIME_UNITS_NS:
                raise self._broken(f"gives {spec.name} in unknown unit {unit!r}")
            return value * TIME_UNITS_NS[unit]
        index = _mapping(_mapping(document.get("fluidity")).get("index"))
        if spec.kind == "index" and stat in index:
            return self._number(index[stat], where)
        throughput = _mapping(document.get("throughput"))
        if spec.name == "throughput" and stat in throughput:
            return self._number(throughput[stat], where)
        if (
            spec.name == "goodput"
            and stat == "requests_per_s"
            and "goodput_requests_per_s" in (throughput)
        ):
            return self._number(throughput["goodput_requests_per_s"], where)
        goodput = _mapping(document.get("goodput"))
        key = {"fraction": "fraction", "count": "requests_met"}.get(stat)
        if spec.name == "goodput" and key and key in goodput:
            return self._number(goodput[key], where)
        if spec.name in ("cancelled", "errored"):
            outcomes = _mapping(document.get("outcomes"))
            kinds = ("completed", "cancelled", "in_flight", "errored")
            counts = {k: _count(outcomes.get(k)) for k in kinds}
            if spec.name == "errored" and counts["errored"] is None and counts["completed"]:
                counts["errored"] = 0  # a report from before the errored outcome: none
            chosen = counts[spec.name]
            if chosen is not None:
                if stat == "count":
                    return chosen
                # fraction of every valid request: errored ones count in the total
                total = sum(v for v in counts.values() if v is not None)
                return chosen / total if total else None
        raise UsageError(
            f"the baseline JSON has no {where}",
            hint="give the baseline as a trace to compare this statistic",
        )

    def facts(self) -> TraceFacts:
        """What the baseline run could express, from the report's own fields."""
        document = self.document
        accounting = _mapping(document.get("accounting"))
        outcomes = _mapping(document.get("outcomes"))
        valid = _count(accounting.get("requests_valid"))
        completed = _count(outcomes.get("completed"))
        if valid is None:  # an older report: every counted outcome is a valid request
            kinds = ("completed", "cancelled", "in_flight")
            valid = sum(_count(outcomes.get(k)) or 0 for k in kinds)
        window = _mapping(document.get("throughput")).get("window_s")
        return TraceFacts(
            requests_valid=int(valid),
            completed=int(completed or 0),
            client=document.get("source") == "client",
            ticks_available=document.get("ticks_available", True) is not False,
            arrival_known=document.get("arrival_known", True) is not False,
            window_known=isinstance(window, int | float) and not isinstance(window, bool),
            output_unknown=output_unknown(_mapping(document.get("unavailable"))),
        )

    def _number(self, value: Any, where: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._broken(f"gives {where} as {value!r}, not a number")
        if not math.isfinite(value):
            raise self._broken(f"gives {where} as {value!r}")
        return float(value)

    def _broken(self, what: str) -> InputError:
        return InputError(f"{self.source or 'the baseline JSON'}: {what}", hint=WRITE_HINT)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


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


def as_report(document: Mapping[str, Any], source: str | None = None) -> ReportBaseline:
    """The document as a baseline, or InputError (exit 3) saying why it cannot be one."""
    name = source or "the baseline JSON"
    if not isinstance(document.get("metrics"), Mapping) or "rows" in document:
        kind = "a servetrace report, but not" if "servetrace_version" in document else "not"
        raise InputError(
            f"{name}: {kind} one of 'servetrace analyze --format json'", hint=WRITE_HINT
        )
    naming = document.get("naming", "servetrace")
    if naming != "servetrace":
        raise InputError(
            f"{name}: written with --naming {naming}: its metric names are another tool's",
            hint="write the baseline without --naming",
        )
    return ReportBaseline(document, source)


def read_report(path: Path) -> ReportBaseline | None:
    """The report in ``path`` if it is a servetrace JSON document, else None.

    None lets the trace readers and importers try the file (a JSON export of another
    tool is a trace). A servetrace document that cannot be a baseline is InputError.
    """
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8-sig") as handle:
            document = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None  # not ours: let the trace readers and importers try it
    if not (isinstance(document, dict) and "servetrace_version" in document):
        return None
    return as_report(document, str(path))
