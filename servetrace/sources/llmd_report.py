"""What an llm-d Benchmark Report file is, and what sits beside it.

Pinned to llm-d/llm-d-benchmark at 8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36:
``llmdbenchmark/analysis/benchmark_report/`` (``schema_v0_1.py``: top-level ``version``
``"0.1"``, ``scenario``, ``metrics``; ``schema_v0_2.py``: ``version`` ``"0.2"``, ``run``,
``scenario``, ``results``; ``schema_v0_2_1.py``: ``"0.2.1"``, an additive superset of
0.2) and ``llmdbenchmark/analysis/__init__.py``, which writes, for each result file
``NAME`` of the harness, ``benchmark_report,_NAME.yaml`` (v0.1) and
``benchmark_report_v0.2,_NAME.yaml`` (v0.2) beside it (GuideLLM's ``results.json`` of
several benchmarks: ``…,_results.json_0.yaml``, one per benchmark).

A report is an aggregate (one stage of one run): a *reported* run, its figures read by
``runs.llmd_summary``. Beside the harness's own per-request file, that file is read
instead; beside its v0.2 twin, a v0.1 report gives way to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.sources.reading import load_json
from servetrace.sources.yaml_doc import is_yaml_name, load_yaml

KIND = "llm-d"
WHAT = "an llm-d Benchmark Report"
VERSIONS = ("0.1", "0.2", "0.2.1")
_NAME = re.compile(
    r"^benchmark_report(?:_v(?P<version>[\d.]+?))?,_(?P<native>.+?)\.(?:ya?ml|json)$"
)
_PEEK_BYTES = 4_000_000  # reports are small; never parse a large file to learn what it is


def version_of(doc: Any) -> str | None:
    """The report's schema version (``"0.1"``, ``"0.2"``, ``"0.2.1"``), None for other documents.

    YAML reads an unquoted ``version: 0.2`` as a number: its text is the version.
    """
    if not isinstance(doc, Mapping):
        return None
    raw = doc.get("version")
    version = str(raw) if isinstance(raw, (str, float)) else None
    if version == "0.1" and isinstance(doc.get("scenario"), Mapping) and "metrics" in doc:
        return version
    if version in ("0.2", "0.2.1") and isinstance(doc.get("results"), Mapping) and "run" in doc:
        return version
    return None


def is_report(path: Path) -> bool:
    """True for a report named as llm-d-benchmark names them, or a small YAML document
    holding one (a JSON one is recognised by ``version_of`` where JSON is parsed)."""
    if _NAME.match(path.name.lower()):
        return True
    if not is_yaml_name(path):
        return False
    try:
        import yaml  # noqa: F401  (without PyYAML a renamed report is not recognised)
    except ImportError:
        return False
    try:
        if path.stat().st_size > _PEEK_BYTES:
            return False
        return version_of(load_yaml(path, WHAT)) is not None
    except (OSError, InputError, RecursionError):
        return False


def read(path: Path) -> tuple[str, Mapping[str, Any]]:
    """``(version, document)`` of the report in ``path`` (``InputError`` otherwise)."""
    doc = load_yaml(path, WHAT) if is_yaml_name(path) else load_json(path)
    version = version_of(doc)
    if version is None:
        raw = doc.get("version") if isinstance(doc, Mapping) else None
        raise InputError(
            f"{path}: not {WHAT} this version reads: field 'version' is {raw!r} (reads "
            f"{', '.join(VERSIONS)}: version, scenario, metrics; or version, run, results)",
            hint="is it a benchmark report written by llm-d-benchmark's benchmark_report?",
        )
    assert isinstance(doc, Mapping)
    return version, doc


def native_beside(path: Path) -> list[Path]:
    """The harness's own result file a report was made from, when it is beside it."""
    match = _NAME.match(path.name.lower())
    if match is None:
        return []
    native = path.name[match.start("native") : match.end("native")]
    candidates = [path.with_name(native)]
    split = re.match(r"^(.+)_\d+$", native)  # GuideLLM: one report per benchmark
    if split:
        candidates.append(path.with_name(split.group(1)))
    return [c for c in candidates if c.is_file()][:1]


def superseded(reports: Sequence[Path]) -> dict[Path, str]:
    """The v0.1 reports among ``reports`` whose v0.2 twin (made from the same result file)
    is there too, each with the note saying so."""
    twins: dict[tuple[Path, str], dict[str, Path]] = {}
    for report in reports:
        match = _NAME.match(report.name.lower())
        if match:
            key = (report.parent, report.name[match.start("native") : match.end("native")])
            twins.setdefault(key, {})[match.group("version") or "0.1"] = report
    out: dict[Path, str] = {}
    for found in twins.values():
        newer = found.get("0.2.1") or found.get("0.2")
        if "0.1" in found and newer is not None:
            out[found["0.1"]] = (
                f"{found['0.1']}: the v0.1 report of the same results as {newer.name}, "
                "which is read instead"
            )
    return out
