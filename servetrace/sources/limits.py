"""Caps on what a read may hold: the longest line of a text file, and how far gzip data
may expand (``docs/guarantees.md``, "Bounded reads").

A 1 MB ``.jsonl.gz`` can hold one 1 GiB line: decompressed whole and parsed, it took
3.2 GB of memory and half a minute before anything was said. Text is therefore watched
as it is read, a chunk at a time, and refused with exit 3 as soon as it passes a cap:

- **a line** (a JSON Lines record, a CSV row) longer than ``max_record_bytes()``
  (64 MiB; an AIPerf record with many chunk timestamps is far below it);
- **gzip data** that expands to more than ``max_gzip_ratio()`` times the size of the
  file (200-fold; traces compress 10 to 40-fold) once past ``RATIO_EXEMPT_BYTES``, so a
  small, very regular file is never refused.

Environment variables raise (or lower) them for every command and engine alike, where a
flag would be one more option on each command: ``SERVETRACE_MAX_RECORD_BYTES`` (bytes)
and ``SERVETRACE_MAX_GZIP_RATIO`` (a whole factor).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from servetrace.errors import InputError, UsageError

RECORD_BYTES_VARIABLE = "SERVETRACE_MAX_RECORD_BYTES"
GZIP_RATIO_VARIABLE = "SERVETRACE_MAX_GZIP_RATIO"
DEFAULT_MAX_RECORD_BYTES = 64 << 20
DEFAULT_MAX_GZIP_RATIO = 200
RATIO_EXEMPT_BYTES = 64 << 20
"""gzip data that decompresses to no more than this is never refused for its ratio."""

CHUNK_BYTES = 1 << 20
"""Text is read and watched in pieces of this size: the check costs two searches each."""


def _setting(variable: str, default: int) -> int:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{variable}={text}: not a whole number ≥ 1")
    return int(text)


def max_record_bytes() -> int:
    """The longest line a text read accepts, in bytes."""
    return _setting(RECORD_BYTES_VARIABLE, DEFAULT_MAX_RECORD_BYTES)


def max_gzip_ratio() -> int:
    """How many times its own size gzip data may expand to (past ``RATIO_EXEMPT_BYTES``)."""
    return _setting(GZIP_RATIO_VARIABLE, DEFAULT_MAX_GZIP_RATIO)


def _size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count:,} bytes"


def record_too_long(path: Path, line: int, cap: int) -> InputError:
    """The error for line ``line`` of ``path`` longer than ``cap`` bytes."""
    return InputError(
        f"{path}: line {line} is longer than the record cap of {_size(cap)} "
        f"({RECORD_BYTES_VARIABLE})",
        hint=f"a genuine record this long: set {RECORD_BYTES_VARIABLE} to more bytes",
    )


def too_expanded(path: Path, compressed: int, ratio: int) -> InputError:
    """The error for gzip data of ``compressed`` bytes expanding past ``ratio`` times that."""
    return InputError(
        f"{path}: gzip data expands more than {ratio}-fold its {_size(compressed)} "
        f"(the decompression cap, {GZIP_RATIO_VARIABLE}): refusing a likely decompression bomb",
        hint=f"a genuine file this regular: set {GZIP_RATIO_VARIABLE} to a larger factor",
    )


class LineWatch:
    """Follows text fed a chunk at a time and tells as soon as a line passes ``cap``.

    A piece no longer than the cap cannot hold a whole over-long line, so each piece is
    searched for its first and its last line end only, never walked line by line, and
    lines are counted only to name the one refused (``line_number``). A CR ends a line
    too: old-Mac text has no LF."""

    def __init__(self, path: Path, cap: int | None = None) -> None:
        self.path = path
        self.cap = max_record_bytes() if cap is None else cap
        self.fed = 0  # bytes watched so far
        self.start = 0  # where the line they end in starts

    def over(self, data: bytes) -> bool:
        """Watch the next ``data`` (searched in place); True when the line starting at
        ``start`` is longer than the cap (then stop feeding)."""
        for low in range(0, len(data), self.cap):
            high = min(low + self.cap, len(data))
            first = _first_end(data, low, high)
            if first < 0:
                if self.fed + high - self.start > self.cap:
                    return True
                continue
            if self.fed + first - self.start > self.cap:
                return True
            self.start = self.fed + _last_end(data, low, high) + 1
        self.fed += len(data)
        return False

    def refused(self, chunks: Iterable[bytes]) -> InputError:
        """The error naming the over-long line; ``chunks``: the text from its start."""
        return record_too_long(self.path, line_number(chunks, self.start), self.cap)


def _first_end(data: bytes, low: int, high: int) -> int:
    """The first LF or CR of ``data[low:high]``, or -1."""
    found = [at for at in (data.find(b"\n", low, high), data.find(b"\r", low, high)) if at >= 0]
    return min(found, default=-1)


def _last_end(data: bytes, low: int, high: int) -> int:
    """The last LF or CR of ``data[low:high]`` (-1 when there is none)."""
    return max(data.rfind(b"\n", low, high), data.rfind(b"\r", low, high))


def line_number(chunks: Iterable[bytes], offset: int) -> int:
    """The line (counted by LF, as Polars counts) that byte ``offset`` of the text is on."""
    line, seen = 1, 0
    for chunk in chunks:
        if seen >= offset:
            break
        line += chunk.count(b"\n", 0, offset - seen)
        seen += len(chunk)
    return line


class GzipWatch:
    """Counts what gzip data of ``compressed`` bytes has expanded to; raises past the cap."""

    def __init__(self, path: Path, compressed: int, ratio: int | None = None) -> None:
        self.path = path
        self.compressed = compressed
        self.ratio = max_gzip_ratio() if ratio is None else ratio
        self.limit = max(RATIO_EXEMPT_BYTES, self.ratio * compressed)
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.total > self.limit:
            raise too_expanded(self.path, self.compressed, self.ratio)


def check_lines(path: Path) -> None:
    """Read a local, uncompressed text file once and refuse it if a line passes the cap
    (what a Polars scan would otherwise parse whole)."""
    watch = LineWatch(path)
    if path.stat().st_size <= watch.cap:
        return  # no line of it can be longer
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            if watch.over(chunk):
                handle.seek(0)
                raise watch.refused(iter(lambda: handle.read(CHUNK_BYTES), b""))
