"""What kind of input is this: a canonical trace, or one tool's per-request export?

The library (``servetrace.analyze``/``read_events``) and every command decide the same way,
so a Python user reading an AIPerf file gets what the CLI gets: an explicit ``from_format``
wins; otherwise a BLIS TraceV2 CSV or header is ``blis`` (``blis_files``), JSON-family files
(``.json``, ``.jsonl``, ``.gz``) are sniffed by content (``registry.detect_format``) and
anything else is a canonical trace. Engine exports that
are not files of parts (a folder of rotated OTLP or SGLang files, an MLCommons SQLite
database) are recognised first (``inputs``), before the paths are expanded as a trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servetrace.errors import InputError, UsageError
from servetrace.sources import blis_files
from servetrace.sources.file_scan import resolve_paths
from servetrace.sources.objectstore import is_uri
from servetrace.sources.registry import detect_format, engine_inputs

# Only these can be another tool's export; Parquet, Arrow and CSV are always canonical.
JSON_SUFFIXES = (".json", ".jsonl", ".gz")

CANONICAL = None  # what ``source_format`` returns for a servetrace event log


def source_format(paths: Sequence[Path], from_format: str | None = None) -> str | None:
    """The foreign format to import ``paths`` with, or None (``CANONICAL``) for a trace.

    All files must be of one kind: a mix of exports, or of an export and a canonical log,
    is refused rather than half-imported.
    """
    if from_format:
        return from_format
    blis = [p for p in paths if blis_files.is_blis(p)]
    if blis and len(blis) == len(paths):
        return "blis"
    if blis:
        raise InputError(
            f"the inputs are not all the same kind of file ({blis[0]} is a BLIS TraceV2 file, "
            f"{next(p for p in paths if p not in blis)} is not)",
            hint="give one BLIS trace (its CSV and its YAML header) at a time",
        )
    if not paths or not all(p.suffix.lower() in JSON_SUFFIXES for p in paths):
        return CANONICAL
    detected = {p: detect_format(p) for p in paths}
    formats = set(detected.values())
    if formats == {None}:
        return CANONICAL
    if len(formats) == 1:
        return formats.pop()
    listed = "; ".join(f"{p}: {fmt or 'not a known export'}" for p, fmt in detected.items())
    raise InputError(
        f"the inputs are not all the same kind of file ({listed})",
        hint="give one tool's per-request exports at a time (and --from FORMAT if needed)",
    )


def inputs(texts: Sequence[str], from_format: str | None = None) -> tuple[str | None, list[Path]]:
    """``(format, files)`` of what the user pointed at: an engine export's folder or database,
    else the resolved paths with their format (None for a canonical trace)."""
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
