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
| ``blis`` | BLIS TraceV2 CSV (+ its YAML header) | first token only | yes |
| ``otlp`` | Collector file export of spans (file or folder) | first token only | yes |
| ``sglang`` | ``sglang-request-metrics-*.log`` (file or folder) | first token only | yes |
| ``trtllm`` | appended ``/perf_metrics`` polls | first token only | steady clock |
| ``mlcommons`` | endpoints' SQLite ``events`` database | every chunk | monotonic |

The last four read what serving engines (and MLCommons' load generator) write; the
engines' are server-side traces with admissions (``source = "server"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from servetrace.errors import InputError, UsageError
from servetrace.sources import (
    aiperf,
    blis,
    blis_files,
    genai_perf,
    guidellm,
    llmperf,
    mlcommons,
    otlp,
    requests_table,
    sglang,
    sniff,
    trtllm,
    vllm_bench,
)
from servetrace.sources._engine import first_json_value, visible_files
from servetrace.sources.events import ImportResult
from servetrace.sources.file_scan import resolve_paths
from servetrace.sources.objectstore import is_uri
from servetrace.sources.reading import FormatMismatch, read_text
from servetrace.sources.summary_files import summary_kind

__all__ = [
    "FORMATS",
    "ImportResult",
    "detect_format",
    "engine_inputs",
    "format_of_inputs",
    "import_file",
    "nesting_refused",
]

Importer = Callable[[str | Path], ImportResult]

# Format name (the CLI's ``--from`` value) → importer.
FORMATS: dict[str, Importer] = {
    aiperf.FORMAT: aiperf.read,
    genai_perf.FORMAT: genai_perf.read,
    vllm_bench.FORMAT: vllm_bench.read,
    guidellm.FORMAT: guidellm.read,
    llmperf.FORMAT: llmperf.read,
    blis.FORMAT: blis.read,
    otlp.FORMAT: otlp.read,
    sglang.FORMAT: sglang.read,
    trtllm.FORMAT: trtllm.read,
    mlcommons.FORMAT: mlcommons.read,
    # one row per request, columns named with --column (never detected from content)
    requests_table.FORMAT: requests_table.read,
}

# Formats whose first JSON value says what they are (JSON Lines or appended documents).
_STREAM_SNIFFERS: dict[str, Callable[[Any], bool]] = {
    otlp.FORMAT: otlp.sniff_record,
    sglang.FORMAT: sglang.sniff_record,
    trtllm.FORMAT: trtllm.sniff_value,
}
_CANONICAL_SUFFIXES = (".parquet", ".arrow", ".ipc", ".feather", ".csv", ".tsv")
# Formats that may be given as a folder of the files the engine rotates into.
_FOLDER_SNIFFERS: dict[str, Callable[[Path], bool]] = {
    sglang.FORMAT: lambda p: p.name.startswith(sglang.FILE_PREFIX) and sglang.sniff_file(p),
    otlp.FORMAT: otlp.sniff_file,
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


@contextmanager
def nesting_refused(path: str | Path) -> Iterator[None]:
    """Python's JSON parser gives up past ~1,000 levels of nesting with a RecursionError,
    wherever a file is parsed (detection, every importer): one line naming the file."""
    try:
        yield
    except RecursionError:
        raise InputError(
            f"{path}: JSON nested deeper than Python's parser follows (about 1,000 levels): "
            "no export servetrace reads is shaped so"
        ) from None


def detect_format(path: str | Path) -> str | None:
    """The format of ``path`` judged by its content (gzip allowed), or None if unknown.

    JSON Lines whose first record is an AIPerf record (or raw record) is ``aiperf``; a
    whole JSON document is recognised by its keys. Raises ``InputError`` when the file
    cannot be read, looks like JSON but does not parse, or matches several formats.
    """
    with nesting_refused(path):
        return _detect_format(path)


def _detect_format(path: str | Path) -> str | None:
    path = Path(path)
    if path.is_dir():
        return _detect_folder(path)
    if mlcommons.is_sqlite(path):
        return mlcommons.FORMAT if mlcommons.sniff_file(path) else None
    if blis_files.is_blis(path):
        return blis.FORMAT
    # The first line decides for JSON Lines and for non-JSON files: a large trace is
    # never read whole just to learn what it is (sources/sniff.py).
    start = sniff.json_head(path)
    if start.kind == "other" and not sniff.named_json(path):
        return None  # e.g. a .csv.gz: its reader will say what is wrong with it, if anything
    if start.kind == "lines":
        if aiperf.sniff_record(start.first) or aiperf.sniff_raw_record(start.first):
            return aiperf.FORMAT
        for name, sniff_stream in _STREAM_SNIFFERS.items():
            if sniff_stream(start.first):
                return name
        return None
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
    first = first_json_value(stripped)
    for name, sniff_stream in _STREAM_SNIFFERS.items():
        if sniff_stream(first):
            return name
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


def _detect_folder(path: Path) -> str | None:
    """The engine format of a folder holding its rotated files, or None."""
    # Canonical parts are never engine exports: do not open them.
    files = [p for p in visible_files(path) if p.suffix.lower() not in _CANONICAL_SUFFIXES][:50]
    for name, accepts in _FOLDER_SNIFFERS.items():
        if any(accepts(p) for p in files):
            return name
    return None


def engine_inputs(
    inputs: Sequence[str], from_format: str | None = None
) -> tuple[str, list[Path]] | None:
    """``(format, paths)`` when the inputs are engine exports that the canonical reader
    would not take: a folder of OTLP or SGLang files, an MLCommons SQLite database, an
    SGLang ``.log``. None otherwise (the caller resolves canonical paths as before).

    The CLI calls this before expanding its inputs as canonical parts, so that
    ``servetrace analyze FOLDER`` works without ``--from``.
    """
    paths = [Path(text) for text in inputs]
    if not paths or not all(p.exists() for p in paths):
        return None
    if not all(_engine_only(p) for p in paths):
        return None
    if from_format is not None:
        engine_formats = (otlp.FORMAT, sglang.FORMAT, trtllm.FORMAT, mlcommons.FORMAT)
        return (from_format, paths) if from_format in engine_formats else None
    fmt = _one_format(paths, "export", "give one engine's exports at a time")
    if fmt is None:
        databases = [p for p in paths if mlcommons.is_sqlite(p) and detect_format(p) is None]
        if databases:
            raise InputError(
                f"{databases[0]}: an SQLite database, but not an MLCommons endpoints event "
                "database (no table 'events' with sample_uuid, event_type, timestamp_ns)",
                hint="servetrace reads Parquet, Arrow, CSV and JSON Lines traces, and the "
                "exports listed by --from",
            )
    return (fmt, paths) if fmt is not None else None


def _engine_only(path: Path) -> bool:
    """A path only an engine importer can read: a folder, an SQLite file, a ``.log``."""
    return path.is_dir() or path.suffix.lower() == ".log" or mlcommons.is_sqlite(path)


def _one_format(paths: Sequence[Path], kind: str, hint: str) -> str | None:
    """The one format ``detect_format`` finds for every path (None: no known export); a
    mix is refused rather than half-imported."""
    detected = {path: detect_format(path) for path in paths}
    if len(set(detected.values())) > 1:
        listed = "; ".join(f"{p}: {f or 'not a known export'}" for p, f in detected.items())
        raise InputError(f"the inputs are not all the same kind of {kind} ({listed})", hint=hint)
    return next(iter(detected.values()), None)


# Only these can be another tool's export; Parquet, Arrow and CSV are always canonical.
JSON_SUFFIXES = (".json", ".jsonl", ".gz")

CANONICAL = None  # what ``source_format`` returns for a servetrace event log


def source_format(paths: Sequence[Path], from_format: str | None = None) -> str | None:
    """The foreign format to import ``paths`` with, or None (``CANONICAL``) for a trace:
    an explicit ``from_format`` wins; otherwise a BLIS TraceV2 CSV or header is ``blis``,
    JSON-family files are sniffed by content and anything else is a canonical trace.

    All files must be of one kind: a mix of exports, or of an export and a canonical log,
    is refused rather than half-imported.
    """
    if from_format:
        return from_format
    blis_paths = [p for p in paths if blis_files.is_blis(p)]
    if blis_paths and len(blis_paths) == len(paths):
        return "blis"
    if blis_paths:
        raise InputError(
            f"the inputs are not all the same kind of file ({blis_paths[0]} is a BLIS "
            f"TraceV2 file, {next(p for p in paths if p not in blis_paths)} is not)",
            hint="give one BLIS trace (its CSV and its YAML header) at a time",
        )
    if not paths or not all(p.suffix.lower() in JSON_SUFFIXES for p in paths):
        return CANONICAL
    return _one_format(
        paths,
        "file",
        "give one tool's per-request exports at a time (and --from FORMAT if needed)",
    )


def format_of_inputs(
    texts: Sequence[str], from_format: str | None = None
) -> tuple[str | None, list[Path]]:
    """``(format, files)`` of what the user pointed at, decided alike by the library and
    every command: an engine export's folder or database (recognised before the paths are
    expanded as a trace), else the resolved paths with their format (None for a
    canonical trace)."""
    if any(is_uri(text) for text in texts):
        return _uri_inputs(texts, from_format)
    engine = engine_inputs(texts, from_format)
    if engine is not None:
        return engine
    paths = resolve_paths(texts)
    return source_format(paths, from_format), paths


def _uri_inputs(texts: Sequence[str], from_format: str | None) -> tuple[str | None, list[Path]]:
    """Object-store URIs are canonical traces (Parquet or Arrow), resolved when read;
    the paths returned only name the run (``RunSource.where``)."""
    if from_format:
        uri = next(text for text in texts if is_uri(text))
        raise UsageError(
            f"{uri}: --from {from_format} imports files on this machine, not object-store URIs",
            hint="copy the export here first (aws s3 cp, gsutil cp), or analyse a "
            "canonical Parquet trace on the store",
        )
    return CANONICAL, [Path(text) for text in texts]


_AGGREGATES_HINT = (
    "this is an aggregate summary (AIPerf profile_export_aiperf.json or GenAI-Perf "
    "profile_export_genai_perf.json); import the per-request profile_export.jsonl "
    "(AIPerf) or profile_export.json (GenAI-Perf) beside it"
)
# A tool's summary given where its per-request file belongs: point at that file.
_SUMMARY_HINTS = {
    "aiperf": _AGGREGATES_HINT,
    "genai-perf": _AGGREGATES_HINT,
    "llmperf": "this is an LLMPerf summary; import the *_individual_responses.json beside it",
}


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
            hint = _SUMMARY_HINTS.get(summary_kind(Path(path)) or "")
            raise InputError(
                f"{path}: not a file servetrace can import: its content matches none of the "
                "known per-request exports",
                hint=hint or "name its format with --from; choices: " + _choices(),
            )
    try:
        with nesting_refused(path):
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
