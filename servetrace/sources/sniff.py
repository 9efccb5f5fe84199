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

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
HEAD_BYTES = 1 << 16
# A first JSON Lines record longer than this is read line by line until it ends: an AIPerf
# record with many chunk timestamps can be long, but it is still one line.
MAX_FIRST_LINE = 1 << 26


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


def read_all(path: Path) -> bytes:
    """The whole (decompressed) content: only for files that must be read in memory."""
    with _open(path) as handle:
        try:
            return bytes(handle.read())
        except (OSError, EOFError, zlib.error) as error:
            raise gzip_error(path, error) from None


def named_json(path: Path) -> bool:
    """True when the name says JSON (``.json``, ``.jsonl``, ``.ndjson``, also ``.gz``)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in (".json", ".jsonl", ".ndjson")


def has_bom(head: bytes) -> bool:
    return head.startswith(UTF8_BOM)


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
    with _open(path) as handle:
        try:
            first = _first_line(handle)
            second = b"" if first is None else _next_content_line(handle)
        except (OSError, EOFError, zlib.error) as error:
            raise gzip_error(path, error) from None
    if first is None:
        return JsonHead("document")  # a first line too long to sniff: let the parser judge
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


def _first_line(handle: Any) -> bytes | None:
    """The first line that is not blank, or None when it is longer than MAX_FIRST_LINE."""
    while True:
        line = handle.readline(MAX_FIRST_LINE + 1)
        if not line:
            return b""
        if len(line) > MAX_FIRST_LINE:
            return None
        if line.strip():
            return bytes(line)


def _next_content_line(handle: Any) -> bytes:
    """The first bytes of the next non-blank line (enough to see how it starts)."""
    while True:
        line = handle.readline(64)
        if not line:
            return b""
        if line.strip():
            return bytes(line)
