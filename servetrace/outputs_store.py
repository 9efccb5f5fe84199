"""Outputs on an object store: ``--requests-out s3://bucket/requests.parquet`` (a file, by
its suffix, with the local engine) and ``--requests-out s3://bucket/requests/`` (a Parquet
dataset written by ``--engine ray``).

Checked before any work, as local outputs are (``outputs.py``): the store is reachable,
the bucket exists, nothing already lives where the output goes (a file output is not a
prefix of objects; a dataset's prefix is empty), and the output is none of the inputs nor
inside an input prefix. A frame is written to a local temporary file by the same writers
as a local output, then uploaded: an object store replaces an object whole, so a reader
never sees half of one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.errors import InputError, UsageError
from servetrace.sources import objectstore


def _store(uri: str, flag: str) -> tuple[Any, str]:
    """The output's filesystem and path; an unreachable store or a missing bucket is a
    usage error of the output (exit 2), as a missing local directory is."""
    try:
        store, path = objectstore.filesystem(uri)
        bucket = objectstore.missing_bucket(uri, store, path)
        if bucket is not None:
            raise InputError(f"{uri}: no such bucket {bucket!r}")
    except InputError as error:
        raise UsageError(f"{flag} {error.message}", hint=error.hint) from None
    return store, path.rstrip("/")


def _info(uri: str, flag: str, store: Any, path: str) -> Any:
    try:
        return objectstore.guarded(uri, lambda: store.get_file_info(path))
    except InputError as error:
        raise UsageError(f"{flag} {error.message}") from None


def check_frame_uri(uri: str, flag: str) -> None:
    """A file output on a store: a known suffix, a reachable bucket, not a prefix."""
    from pyarrow import fs

    from servetrace.outputs import FRAME_SUFFIXES

    suffix = Path(objectstore.path_of(uri)).suffix.lower()
    if suffix not in FRAME_SUFFIXES:
        raise UsageError(
            f"{flag} {uri}: cannot tell the output format from the suffix {suffix!r}",
            hint="use .parquet, .csv, .arrow or .jsonl (a dataset of parts: --engine ray)",
        )
    store, path = _store(uri, flag)
    if _info(uri, flag, store, path).type == fs.FileType.Directory:
        raise UsageError(f"{flag} {uri}: is a prefix of objects, not an object")


def output_prefix(uri: str, flag: str) -> tuple[Any, str]:
    """A dataset output on a store: ``(filesystem, path)`` of an empty prefix."""
    from pyarrow import fs

    store, path = _store(uri, flag)
    found = _info(uri, flag, store, path)
    if found.type == fs.FileType.File:
        raise UsageError(
            f"{flag} {uri}: is an object; a dataset is written below a prefix",
            hint="for example --requests-out s3://bucket/requests/",
        )
    if found.type == fs.FileType.Directory:
        listed = objectstore.guarded(
            uri, lambda: store.get_file_info(fs.FileSelector(path, recursive=True))
        )
        if any(entry.type == fs.FileType.File for entry in listed):
            raise UsageError(
                f"{flag} {uri}: is not empty; the dataset would mix with what is there",
                hint="name a new or empty prefix",
            )
    return store, path


def refuse_overwriting(outputs: Sequence[tuple[str, str]], inputs: Sequence[str]) -> None:
    """An output URI that is an input URI, or lies below an input prefix: refused."""
    for flag, output in outputs:
        target = output.rstrip("/")
        for given in inputs:
            source = str(given).rstrip("/")
            if objectstore.is_uri(source) and (target == source or target.startswith(source + "/")):
                raise UsageError(
                    f"{flag} {output}: would overwrite the input {given}",
                    hint="write the output somewhere else",
                )


def write_frame_uri(frame: pl.DataFrame, uri: str, flag: str = "--requests-out") -> None:
    """Write ``frame`` by the suffix of ``uri`` (the local writers), then upload it."""
    from pyarrow import fs

    from servetrace.outputs import write_table

    store, path = _store(uri, flag)
    with tempfile.TemporaryDirectory(prefix="servetrace-") as folder:
        local = Path(folder) / Path(path).name
        write_table(frame, local)
        try:
            fs.copy_files(str(local), path, destination_filesystem=store)
        except (OSError, ValueError) as error:
            raise UsageError(f"{flag} {uri}: cannot write: {objectstore.reason(error)}") from None
