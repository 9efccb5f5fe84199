"""Turn the user's inputs (files, globs, directories of parts) into unique trace files.

Three rules, each fixing a way the same rows could be read twice or never finish:

- an existing path is a path, even when its name has glob characters (``run[1].parquet``);
- ``**`` never descends through a symlink to a directory, so a symlink loop
  (``runs/latest -> ..``) cannot make a glob run forever (Python 3.11's ``glob`` follows
  them; 3.13's ``Path.glob(recurse_symlinks=False)`` is the behaviour kept here);
- every file is read once: inputs resolve to unique real files (``os.path.realpath``), in
  the order first named, so ``runs/**/**/*.parquet``, a path given twice, or a directory
  plus a glob into it read each file one time.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import polars as pl

from servetrace.errors import InputError

_MAGIC = frozenset("*?[")


def has_magic(text: str) -> bool:
    return any(ch in _MAGIC for ch in text)


def hive_values(part: Path, root: Path) -> dict[str, str]:
    """``key=value`` folders between a directory and one of its parts (hive layout)."""
    return folder_values(part.relative_to(root).parts[:-1])


def folder_values(folders: Sequence[str]) -> dict[str, str]:
    """The ``key=value`` names among ``folders`` (a part's folders, outermost first)."""
    values: dict[str, str] = {}
    for folder in folders:
        key, sep, value = folder.partition("=")
        if sep and key:
            values[key] = value
    return values


def with_partition_columns(frame: pl.LazyFrame, values: Mapping[str, str]) -> pl.LazyFrame:
    """A part's hive values as constant columns, where the file has no such column."""
    if not values:
        return frame
    present = set(frame.collect_schema().names())
    return frame.with_columns(
        pl.lit(value).alias(key) for key, value in values.items() if key not in present
    )


def _walk_files(root: Path) -> Iterator[Path]:
    """Every file below ``root``, not descending into symlinked directories."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(folder)
        for name in sorted(files):
            yield base / name


def entries_of(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` by name."""
    try:
        with os.scandir(folder) as listing:
            return sorted(listing, key=lambda e: e.name)
    except OSError:  # unreadable or vanished folder: it holds nothing we can read
        return []


def _descendant_dirs(folder: Path) -> Iterator[Path]:
    """``folder`` and every directory below it, hidden ones and symlinks excluded (``**``)."""
    yield folder
    for entry in entries_of(folder):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir():
            yield from _descendant_dirs(Path(entry.path))


def segment_matches(segment: str, name: str) -> bool:
    # Like glob: a wildcard does not match a leading dot unless the pattern has one.
    if name.startswith(".") and not segment.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, segment)


def _glob(pattern: str) -> list[Path]:
    """Files matching ``pattern`` (``*``, ``?``, ``[...]``, and ``**`` for any depth)."""
    path = Path(pattern)
    segments = list(path.parts)
    anchor_count = 0
    while anchor_count < len(segments) and not has_magic(segments[anchor_count]):
        anchor_count += 1
    root = Path(*segments[:anchor_count]) if anchor_count else Path()
    rest = segments[anchor_count:]
    found: list[Path] = []

    def visit(folder: Path, index: int) -> None:
        segment = rest[index]
        last = index == len(rest) - 1
        if segment == "**":
            if last:  # "dir/**" names every file below, as glob's recursive mode does
                for sub in _descendant_dirs(folder):
                    found.extend(
                        Path(e.path)
                        for e in entries_of(sub)
                        if not e.name.startswith(".") and e.is_file()
                    )
                return
            for sub in _descendant_dirs(folder):
                visit(sub, index + 1)
            return
        if not has_magic(segment):
            candidates = [folder / segment]
        else:
            candidates = [
                Path(e.path) for e in entries_of(folder) if segment_matches(segment, e.name)
            ]
        for candidate in candidates:
            if last:
                if candidate.is_file():
                    found.append(candidate)
            elif candidate.is_dir():
                visit(candidate, index + 1)

    if root.is_dir():
        visit(root, 0)
    return sorted(dict.fromkeys(found))


def resolve_parts(
    inputs: Sequence[str], is_trace_file: Callable[[Path], bool]
) -> list[tuple[Path, dict[str, str]]]:
    """Every trace file of the inputs, once, with the hive partition values of its folders.

    ``is_trace_file`` decides which files a glob or a directory contributes (by name);
    a file named explicitly is always taken.
    """
    files: list[tuple[Path, dict[str, str]]] = []
    seen: set[str] = set()

    def add(path: Path, partition: dict[str, str]) -> None:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            files.append((path, partition))

    for text in inputs:
        path = Path(text)
        if path.is_file():
            add(path, {})
        elif path.is_dir():
            # Hidden and underscore entries below the directory (_SUCCESS, .crc) are not
            # parts; the directory's own path may contain anything.
            parts = [
                p
                for p in sorted(_walk_files(path))
                if is_trace_file(p)
                and not any(s.startswith((".", "_")) for s in p.relative_to(path).parts)
            ]
            if not parts:
                raise InputError(
                    f"{text}: directory holds no trace file",
                    hint="expected .parquet, .arrow, .csv or .jsonl files (or parts of them)",
                )
            for part in parts:
                add(part, hive_values(part, path))
        elif has_magic(text):
            matches = [p for p in _glob(text) if is_trace_file(p)]
            if not matches:
                raise InputError(f"{text}: the pattern matches no trace file")
            for match in matches:
                add(match, {})
        else:
            raise InputError(f"{text}: no such file or directory")
    return files
