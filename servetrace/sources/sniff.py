"""Look at the first bytes of a file, never the whole file, to decide how to read it.

Format detection used to read every ``.json``/``.jsonl``/``.gz`` input whole into Python
(a 327 MB JSON Lines trace peaked at 677 MB before the analysis started). A JSON Lines
file is recognised from its first line and the start of the second; only a file that is one
JSON document (the export formats that need their whole tree anyway) is read in full,
by the importer.

The helpers here also spot the text layouts Polars' readers do not handle on their own:
a UTF-8 byte-order mark before JSON, and CR-only line endings (old Mac exports).
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from servetrace.errors import InputError
from servetrace.sources import limits

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
HEAD_BYTES = 1 << 16


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def _open(path: Path) -> Any:
    """A binary handle on the content: decompressed when it is gzip (by magic number)."""
    try:
        return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")
    except OSError as error:
        raise unreadable(path, error) from None


def unreadable(path: Path, error: OSError) -> InputError:
    """The input error for a file that cannot be opened (missing, a directory, ...)."""
    if isinstance(error, FileNotFoundError):
        return InputError(f"{path}: no such file")
    if isinstance(error, IsADirectoryError):
        return InputError(f"{path}: is a directory, expected a file")
    return InputError(f"{path}: cannot read: {error.strerror or error}")


def gzip_error(path: Path, error: BaseException) -> InputError:
    return InputError(
        f"{path}: gzip data is corrupt or truncated ({error})",
        hint="re-copy the file; `gzip -t FILE` checks it",
    )


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """Up to ``size`` bytes of the (decompressed) content."""
    with _open(path) as handle:
        try:
            return bytes(handle.read(size))
        except (OSError, EOFError, zlib.error) as error:
            raise gzip_error(path, error) from None


def read_all(path: Path, *, lines: bool = True) -> bytes:
    """The whole (decompressed) content: only for files that must be read in memory.

    Read against the caps (``limits``): gzip data that expands past the ratio cap, and
    (``lines``: text read line by line, not one JSON document) a line past the record
    cap, are refused as soon as they are seen, before the rest is decompressed."""
    try:
        compressed = path.stat().st_size
    except OSError as error:
        raise unreadable(path, error) from None
    watch = limits.LineWatch(path) if lines else None
    with _open(path) as handle:
        try:
            if not isinstance(handle, gzip.GzipFile):
                data = bytes(handle.read())
                if watch is not None and len(data) > watch.cap and watch.over(data):
                    raise watch.refused([data])
                return data
            expansion = limits.GzipWatch(path, compressed)
            chunks = []
            while chunk := handle.read(limits.CHUNK_BYTES):
                expansion.feed(chunk)
                chunks.append(chunk)
                if watch is not None and watch.over(chunk):
                    raise watch.refused(chunks)
            return b"".join(chunks)
        except (OSError, EOFError, zlib.error) as error:
            raise gzip_error(path, error) from None


def suffix(path: Path) -> str:
    """The last suffix of the name, a final ``.gz`` looked through (lower case)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def binary_format(head: bytes) -> str | None:
    """``parquet`` or ``ipc`` (Arrow) by a file's first bytes, else None."""
    if head.startswith(b"PAR1"):
        return "parquet"
    return "ipc" if head.startswith(b"ARROW1") else None


def named_json(path: Path) -> bool:
    """True when the name says JSON (``.json``, ``.jsonl``, ``.ndjson``, also ``.gz``)."""
    return suffix(path) in (".json", ".jsonl", ".ndjson")


def cr_only_lines(head: bytes) -> bool:
    """True when lines end in a lone CR (no LF anywhere in the head)."""
    return b"\r" in head and b"\n" not in head


@dataclass(frozen=True)
class JsonHead:
    """What the start of a file says about it.

    ``kind``: ``"other"`` (does not start with ``{`` or ``[``: CSV, binary, ...),
    ``"lines"`` (a JSON object on the first line and another line after it: JSON Lines),
    or ``"document"`` (one JSON value, possibly over several lines: parse it whole).
    ``first`` is the first record of JSON Lines.
    """

    kind: Literal["other", "lines", "document"]
    first: dict[str, Any] | None = None


def json_head(path: Path) -> JsonHead:
    """Classify ``path`` from its first line (gzip allowed) without reading the rest."""
    cap = limits.max_record_bytes()
    with _open(path) as handle:
        try:
            number, first = _first_line(handle, cap)
            second = b"" if first is None else _next_content_line(handle)
        except (OSError, EOFError, zlib.error) as error:
            raise gzip_error(path, error) from None
    if first is None:
        # Longer than a record may be: a JSON Lines file by its name is refused now, before
        # the rest is decompressed; else it may be one minified document, for the parser.
        if suffix(path) in (".jsonl", ".ndjson"):
            raise limits.record_too_long(path, number, cap)
        return JsonHead("document")
    text = first.removeprefix(UTF8_BOM).lstrip()
    if not text.startswith((b"{", b"[")):
        return JsonHead("other")
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        # Pretty-printed (its first line is not a whole value), or nested too deep for
        # Python's parser: the document's reader judges it.
        return JsonHead("document")
    if isinstance(record, dict) and second.lstrip().startswith(b"{"):
        return JsonHead("lines", record)
    return JsonHead("document")


def _first_line(handle: Any, cap: int) -> tuple[int, bytes | None]:
    """The number and bytes of the first line that is not blank, its bytes None when it is
    longer than ``cap`` (only ``cap + 1`` bytes of it are read)."""
    number = 0
    while True:
        number += 1
        line = handle.readline(cap + 1)
        if not line:
            return number, b""
        if len(line.rstrip(b"\r\n")) > cap:
            return number, None
        if line.strip():
            return number, bytes(line)


def _next_content_line(handle: Any) -> bytes:
    """The first bytes of the next non-blank line (enough to see how it starts)."""
    while True:
        line = handle.readline(64)
        if not line:
            return b""
        if line.strip():
            return bytes(line)
