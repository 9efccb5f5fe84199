"""Importers: other benchmark tools' per-request files → the canonical event schema.

Each importer reads one tool's own per-request export, keeps everything it records and
invents nothing it does not: client-side tools see no admission, so there is none; a tool
without per-token times yields a request-level trace (one tick per request,
``ticks_available=False``); a tool without send times yields arrivals at 0
(``arrival_known=False``). Every result says so in ``ImportResult.warnings``.

>>> result = import_file("profile_export.jsonl")          # doctest: +SKIP
>>> result.format, result.events.columns[:3]               # doctest: +SKIP
('aiperf', ['request_id', 'event', 'ts'])

| format | file | ticks | send times |
|---|---|---|---|
| ``aiperf`` | ``profile_export.jsonl`` (+ ``profile_export_raw.jsonl``) | every chunk | yes |
| ``genai-perf`` | ``profile_export.json`` | every chunk | yes |
| ``vllm-bench`` | ``vllm bench serve --save-result`` JSON | every chunk | ``start_times`` only |
| ``guidellm`` | ``benchmarks.json`` | first token only | yes |
| ``llmperf`` | ``*_individual_responses.json`` | first token only | no |
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servetrace.errors import InputError, UsageError
from servetrace.sources import aiperf, genai_perf, guidellm, llmperf, sniff, vllm_bench
from servetrace.sources._common import FormatMismatch, ImportResult, read_text

__all__ = ["FORMATS", "ImportResult", "detect_format", "import_file"]

Importer = Callable[[str | Path], ImportResult]

# Format name (the CLI's ``--from`` value) → importer.
FORMATS: dict[str, Importer] = {
    aiperf.FORMAT: aiperf.read,
    genai_perf.FORMAT: genai_perf.read,
    vllm_bench.FORMAT: vllm_bench.read,
    guidellm.FORMAT: guidellm.read,
    llmperf.FORMAT: llmperf.read,
}

# Whole-document recognisers, for the formats that are one JSON value.
_DOCUMENT_SNIFFERS: dict[str, Callable[[Any], bool]] = {
    genai_perf.FORMAT: genai_perf.sniff,
    vllm_bench.FORMAT: vllm_bench.sniff,
    guidellm.FORMAT: guidellm.sniff,
    llmperf.FORMAT: llmperf.sniff,
}


def _choices() -> str:
    return ", ".join(FORMATS)


def detect_format(path: str | Path) -> str | None:
    """The format of ``path`` judged by its content (gzip allowed), or None if unknown.

    JSON Lines whose first record is an AIPerf record (or raw record) is ``aiperf``; a
    whole JSON document is recognised by its keys. Raises ``InputError`` when the file
    cannot be read, looks like JSON but does not parse, or matches several formats.
    """
    path = Path(path)
    # The first line decides for JSON Lines and for non-JSON files: a large trace is
    # never read whole just to learn what it is (sources/sniff.py).
    start = sniff.json_head(path)
    if start.kind == "other" and not sniff.named_json(path):
        return None  # e.g. a .csv.gz: its reader will say what is wrong with it, if anything
    if start.kind == "lines":
        is_aiperf = aiperf.sniff_record(start.first) or aiperf.sniff_raw_record(start.first)
        return aiperf.FORMAT if is_aiperf else None
    text = read_text(path)
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    first_line = stripped.split("\n", 1)[0].strip()
    if first_line.startswith("{"):
        try:
            head = json.loads(first_line)
        except json.JSONDecodeError:
            head = None
        if head is not None and (aiperf.sniff_record(head) or aiperf.sniff_raw_record(head)):
            return aiperf.FORMAT
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":  # JSON Lines, but not AIPerf's
            return None
        raise InputError(
            f"{path}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}",
            hint="the file may be truncated; or name its format with --from " + _choices(),
        ) from None
    matches = [name for name, sniff in _DOCUMENT_SNIFFERS.items() if sniff(doc)]
    if len(matches) > 1:
        raise InputError(
            f"{path}: the format is ambiguous: it matches {', '.join(matches)}",
            hint="name it with --from " + " or --from ".join(matches),
        )
    return matches[0] if matches else None


def _summary_hint(path: str | Path) -> str | None:
    """When the file is a tool's aggregate summary, point at the per-request file."""
    try:
        doc = json.loads(read_text(Path(path)))
    except (InputError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    records = doc.get("records")
    metrics: dict[str, Any] = records if isinstance(records, dict) else doc
    if any(isinstance(v, dict) and "unit" in v and "avg" in v for v in metrics.values()):
        return (
            "this is an aggregate summary (AIPerf profile_export_aiperf.json or GenAI-Perf "
            "profile_export_genai_perf.json); import the per-request profile_export.jsonl "
            "(AIPerf) or profile_export.json (GenAI-Perf) beside it"
        )
    if any(key.startswith("results_") for key in doc):
        return "this is an LLMPerf summary; import the *_individual_responses.json beside it"
    return None


def import_file(path: str | Path, fmt: str | None = None) -> ImportResult:
    """Import ``path`` with the importer for ``fmt`` (detected from the content if None)."""
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(
            f"unknown import format {fmt!r}",
            hint="choose one of: " + _choices(),
        )
    if fmt is None:
        fmt = detect_format(path)
        if fmt is None:
            raise InputError(
                f"{path}: not a file servetrace can import: its content matches none of the "
                "known per-request exports",
                hint=_summary_hint(path) or "name its format with --from; choices: " + _choices(),
            )
    try:
        return FORMATS[fmt](path)
    except FormatMismatch as error:
        detected: str | None
        try:
            detected = detect_format(path)
        except InputError:
            detected = None
        hint = (
            f"it looks like {detected} output: use --from {detected}"
            if detected is not None and detected != fmt
            else "check --from; choices: " + _choices()
        )
        raise InputError(error.message, hint=hint) from None
