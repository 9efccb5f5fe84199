"""Writing what servetrace produces, without ever destroying what it read.

Every output (``--requests-out``, ``--quarantine-out``, ``check --output``, ``import -o``,
``simulate -o``) goes through here:

- ``refuse_overwriting_inputs`` rejects, before any work, an output that *is* one of the
  inputs — same real path (through symlinks, ``..`` and relative paths), the same file
  under another name (hard link), or a file inside an input directory — as a usage error
  (exit 2), so nothing is written;
- ``write_frame`` / ``write_table`` / ``write_text`` write a temporary file in the
  target's directory and ``os.replace`` it onto the target: a crash or a full disk leaves
  the old file whole, and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import polars as pl

from servetrace.errors import ServetraceError, UsageError, unwritable
from servetrace.sources.file_scan import resolve_paths

FRAME_SUFFIXES = (".parquet", ".csv", ".arrow", ".ipc", ".jsonl", ".ndjson")


def check_frame_output(path: Path | None, flag: str) -> None:
    """Refuse a frame output whose format or directory is wrong, before the analysis runs."""
    if path is None:
        return
    if path.suffix.lower() not in FRAME_SUFFIXES:
        raise UsageError(
            f"{flag} {path}: cannot tell the output format from the suffix {path.suffix.lower()!r}",
            hint="use .parquet, .csv, .arrow or .jsonl",
        )
    check_directory(path, flag)


def check_directory(path: Path, flag: str) -> None:
    # Where the file goes: a symlink's target, which may point into a missing directory.
    parent = Path(os.path.realpath(path)).parent
    if not parent.is_dir():
        # Named as the user wrote it, unless a symlink sent the file elsewhere.
        shown = parent if path.is_symlink() else path.parent
        raise UsageError(f"{flag} {path}: directory {shown} does not exist")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory, not a file")


def _input_entries(inputs: Sequence[str | Path]) -> Iterator[Path]:
    """Every path the inputs name: files, directories, and what their globs match."""
    for item in inputs:
        text = str(item)
        if any(ch in text for ch in "*?[") and not Path(text).exists():
            # The files the trace reader would read, resolved as it resolves them.
            with contextlib.suppress(ServetraceError):
                yield from resolve_paths([text])
        else:
            yield Path(text)


def _same_file(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def refuses(output: Path, inputs: Sequence[str | Path]) -> Path | None:
    """The input that writing ``output`` would overwrite (or sit inside), else None."""
    target = Path(os.path.realpath(output))
    for entry in _input_entries(inputs):
        real = Path(os.path.realpath(entry))
        if target == real or _same_file(output, entry):
            return entry
        if real.is_dir() and target.is_relative_to(real):
            return entry
    return None


def refuse_overwriting_inputs(
    outputs: Sequence[tuple[str, Path | None]], inputs: Sequence[str | Path]
) -> None:
    """Exit 2 if any ``(flag, path)`` output resolves to an input; or two outputs coincide."""
    given = [(flag, path) for flag, path in outputs if path is not None]
    for flag, path in given:
        hit = refuses(path, inputs)
        if hit is not None:
            where = "is inside the input directory" if Path(hit).is_dir() else "is the input"
            raise UsageError(
                f"{flag} {path}: {where} {hit}; refusing to overwrite what servetrace reads",
                hint="write the output to another file",
            )
    for i, (flag, path) in enumerate(given):
        for other_flag, other in given[i + 1 :]:
            if Path(os.path.realpath(path)) == Path(os.path.realpath(other)):
                raise UsageError(f"{flag} and {other_flag} name the same file {path}")


def _atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Write through a temporary sibling and rename it onto ``path`` (same filesystem)."""
    target = Path(os.path.realpath(path))  # replace the file a symlink names, keep the link
    temporary = ""
    try:
        # Inside the try: an unwritable directory fails here already (read-only, /proc).
        handle, temporary = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
        )
        os.close(handle)
        write(Path(temporary))
        with contextlib.suppress(OSError):
            # mkstemp creates 0600; give the file the mode a plain open() would.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except OSError as error:
        _remove(temporary)
        raise unwritable(str(path), error) from None
    except BaseException:
        _remove(temporary)
        raise


def _remove(temporary: str) -> None:
    if temporary:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def write_frame(frame: pl.DataFrame, path: Path) -> None:
    """Write a frame as Parquet, CSV, Arrow IPC or JSON Lines by the file's suffix."""
    check_frame_output(path, "output")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        # CSV cannot hold nested values; lists are written as JSON text.
        nested = [c for c, t in frame.schema.items() if isinstance(t, (pl.List, pl.Struct))]
        frame = frame.with_columns(
            pl.col(c).map_elements(str, return_dtype=pl.String) for c in nested
        )
    writers: dict[str, Callable[[Path], object]] = {
        ".parquet": frame.write_parquet,
        ".csv": frame.write_csv,
        ".arrow": frame.write_ipc,
        ".ipc": frame.write_ipc,
        ".jsonl": frame.write_ndjson,
        ".ndjson": frame.write_ndjson,
    }
    _atomic(path, writers[suffix])


def write_table(frame: pl.DataFrame, path: Path) -> None:
    """Write a table of results (``--requests-out``, ``--quarantine-out``) as
    ``write_frame`` does; as CSV, a text cell that would run as a spreadsheet formula is
    neutralised (``render._csv``). Traces (``import -o``, ``simulate -o``) are data for
    servetrace to read back, so they go through ``write_frame`` as they are."""
    if path.suffix.lower() == ".csv":
        from servetrace.render._csv import neutral_frame

        frame = neutral_frame(frame)
    write_frame(frame, path)


def write_text(text: str, path: Path) -> None:
    """Write a report (UTF-8 text) atomically."""
    _atomic(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def write_bytes(data: bytes, path: Path) -> None:
    """Write bytes atomically; a ``.gz`` name is gzip-compressed with mtime 0, so the same
    content gives the same file (Perfetto opens gzipped trace JSON directly)."""
    import gzip

    def write(temporary: Path) -> None:
        if path.suffix.lower() == ".gz":
            with gzip.GzipFile(temporary, "wb", mtime=0) as handle:
                handle.write(data)
        else:
            temporary.write_bytes(data)

    _atomic(path, write)
