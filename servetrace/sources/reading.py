"""Reading a tool's files: bytes (gzip by magic number, not by name), UTF-8 text, one
JSON document or JSON Lines, and the files an export writes beside it.

Every error names the file, and the line and column when it is the data; a file that is
readable but is not what the chosen importer reads is a `FormatMismatch`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from servetrace.errors import InputError
from servetrace.sources import limits
from servetrace.sources.sniff import read_all


class FormatMismatch(InputError):
    """The file is readable but is not what the chosen importer reads."""


def read_bytes(path: Path) -> bytes:
    """The file's content, decompressed when it is gzip (by magic number, not by name),
    within the decompression cap (``limits``); one JSON document may be one long line."""
    return read_all(path, lines=False)


def read_text(path: Path, expected: str = "JSON") -> str:
    """The file's content as UTF-8 text; ``expected`` names what it should hold."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: not UTF-8 text (byte {error.start}); expected {expected}"
        ) from None


def load_json(path: Path) -> Any:
    """Parse a whole JSON document; errors name the line and column."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":
            raise FormatMismatch(
                f"{path}: line {error.lineno}: a second JSON value follows the first: this "
                "looks like JSON Lines (one record per line), not one JSON document"
            ) from None
        truncated = error.pos >= len(text.rstrip()) - 1
        raise InputError(
            f"{path}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}",
            hint="the file looks truncated; re-export it" if truncated else None,
        ) from None


def json_lines(text: str) -> list[str]:
    """The lines of JSON text, split at LF, CR LF and a lone CR only.

    Not ``str.splitlines``: it also splits at U+2028, U+2029, U+0085 (and a few control
    characters), and JSON allows the first three raw inside a string, so a record holding
    one would be cut in two. A CR is never raw inside a JSON string, so splitting at it
    only keeps old-Mac line ends readable."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def iter_json_lines(path: Path, text: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for every non-blank line of a JSON Lines file."""
    if text is None:
        text = read_text(path)
    cap = limits.max_record_bytes()
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        # A character is 1 to 4 bytes: only a line that may pass the cap is measured.
        if len(line) > cap // 4 and len(line.encode("utf-8")) > cap:
            raise limits.record_too_long(path, number, cap)
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}: line {number}: not valid JSON at column {error.colno}: {error.msg}",
                hint="the line may be cut short; re-export the file or remove the line",
            ) from None


def sibling(path: Path, *names: str) -> Path | None:
    """The first existing file among ``names`` (also tried with ``.gz``) next to ``path``."""
    for name in names:
        for candidate in (path.with_name(name), path.with_name(name + ".gz")):
            if candidate.is_file():
                return candidate
    return None


def strip_suffixes(path: Path, *suffixes: str) -> str:
    """``profile_export.jsonl.gz`` → ``profile_export`` (the given suffixes, in any order)."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in suffixes:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


def load_document(path: Path, sniff: Callable[[Any], bool], what: str, expected: str) -> Any:
    """The JSON document of ``path`` if ``sniff`` recognises it, else FormatMismatch."""
    doc = load_json(path)
    if not sniff(doc):
        raise FormatMismatch(f"{path}: not {what}: expected {expected} ({describe_json(doc)})")
    return doc


def holds_blocks(doc: Any, key: str, inner: str) -> bool:
    """True when ``doc[key]`` is a list whose first item, if any, is an object with
    ``inner``: a report of blocks (GenAI-Perf's experiments, GuideLLM's benchmarks)."""
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        return False
    blocks = doc[key]
    return not blocks or (isinstance(blocks[0], dict) and inner in blocks[0])


def describe_json(doc: Any) -> str:
    """A short description of a JSON document's shape, for "not this format" messages."""
    if isinstance(doc, dict):
        keys = list(doc)[:8]
        return "found keys: " + ", ".join(keys) + (", ..." if len(doc) > 8 else "")
    if isinstance(doc, list):
        return f"found a JSON list of {len(doc)} items"
    return f"found a JSON {type(doc).__name__}"


def tool_aggregates(path: Path, nested: str | None = None) -> dict[str, Any] | None:
    """The metric entries (objects with a ``unit``) of a tool's own summary document, or
    None when the file is unreadable or has none: a summary beside an export is optional.

    ``nested``: the key the entries may sit under (older AIPerf nests them in ``records``).
    """
    try:
        doc = load_json(path)
    except InputError:
        return None
    if not isinstance(doc, dict):
        return None
    inner = doc.get(nested) if nested is not None else None
    source: dict[str, Any] = inner if isinstance(inner, dict) else doc
    return {
        key: dict(value)
        for key, value in source.items()
        if isinstance(value, dict) and "unit" in value
    } or None
