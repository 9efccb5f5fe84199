"""``analyze --engine ray``: a Parquet dataset analysed on a Ray cluster (docs/scale.md).

The only module that imports Ray (``servetrace[ray]``), and only when called.

1. **Read.** ``ray.data.read_parquet`` over the inputs: local files or directories, or
   object-store URIs pyarrow understands (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``).
2. **Prepare** (``map_batches``, Arrow in, Arrow out): each block goes through the
   canonical normalisation of a local read (``sources.normalise``: column names, event
   aliases, time units, range checks), and gets its partition, ``hash(request_id as
   text) mod K``. What is shuffled is narrow: the event kind as one byte, the id as text
   (its integer-or-text type is decided again per partition and unified by ``combine``
   exactly as a read of several files does), ts and counts as Int64.
3. **Shuffle** (``groupby(partition).map_groups``): every row of a request lands in one
   group; K is chosen so that a group holds about ``batch_rows`` rows.
4. **Kernel** (per group, Arrow in, Arrow out): ``partial.partial_of`` — the per-request
   kernel of every engine — returns the group's partial as one row of Arrow IPC buffers
   (``partial_io.to_record``).
5. **Merge** on the driver: ``partial_merge.combine`` then ``partial_merge.finish``, item
   for item the merge of ``servetrace merge``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from servetrace.analysis.histogram import EXACT_GAPS
from servetrace.analysis.partial import partial_of
from servetrace.analysis.partial_io import from_record, to_record
from servetrace.analysis.partial_merge import combine, finish
from servetrace.analysis.partitioned import PART, partition_count
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.dtypes import EVENT_DTYPE
from servetrace.errors import ExitCode, InputError, ServetraceError, UsageError, first_line
from servetrace.schema import EVENT_KINDS
from servetrace.settings import DEFAULT_BATCH_ROWS
from servetrace.sources.canonical import IngestOptions, normalise
from servetrace.sources.objectstore import is_uri, named, resolve_all

PARQUET_SUFFIXES = (".parquet", ".pq")
MARK = "servetrace-error"  # how a worker's ServetraceError crosses Ray's exception wrapping


def _is_uri(text: str) -> bool:
    return is_uri(text) and not text.startswith("file://")


def _parquet_object(relative: str) -> bool:
    return relative.lower().endswith(PARQUET_SUFFIXES)


def dataset_inputs(texts: Sequence[str]) -> tuple[list[str], Any]:
    """``(paths, filesystem)`` Ray reads: local paths (filesystem None), or the objects the
    URIs name, listed here once (``sources.objectstore``) with the one filesystem that
    every read task is given — so a missing bucket or object, or an endpoint that does not
    answer, fails here in a moment, and the workers need no configuration of their own."""
    uris = [text for text in texts if _is_uri(text)]
    if not uris:
        return _local_inputs(texts), None
    if len(uris) < len(texts):
        raise UsageError(
            "--engine ray reads one store at a time: these inputs mix local paths and URIs",
            hint="upload the local files beside the others, or analyse them apart",
        )
    parts = resolve_all(uris, _parquet_object)
    store = parts[0].filesystem
    for part in parts:
        if not part.path.lower().endswith(PARQUET_SUFFIXES):
            raise UsageError(
                f"--engine ray: {part.uri} is not Parquet",
                hint="--engine ray reads Parquet datasets (files, prefixes or globs)",
            )
        if not part.filesystem.equals(store):
            raise UsageError(
                f"--engine ray reads one store at a time: {part.uri} is on another than "
                f"{parts[0].uri}",
                hint="analyse each store's dataset apart, or copy them into one",
            )
    return [part.path for part in parts], store


def _local_inputs(texts: Sequence[str]) -> list[str]:
    out: list[str] = []
    for text in texts:
        path = Path(text.removeprefix("file://"))
        if path.is_dir():
            files = [p for p in path.rglob("*") if p.suffix.lower() in PARQUET_SUFFIXES]
            if not files:
                raise UsageError(
                    f"--engine ray: {text} holds no .parquet files",
                    hint="--engine ray reads Parquet datasets; analyse other formats "
                    "with the local engine, or convert them with 'servetrace import'",
                )
        elif not path.exists():
            raise InputError(f"{text}: no such file or directory")
        elif path.suffix.lower() not in PARQUET_SUFFIXES:
            raise UsageError(
                f"--engine ray: {text} is not Parquet ({path.suffix or 'no suffix'})",
                hint="--engine ray reads Parquet datasets (files, directories, or "
                "object-store URIs); analyse other formats with the local engine",
            )
        out.append(str(path.resolve()))
    return out


def _row_count(paths: list[str], store: Any = None) -> int:
    """Rows of the dataset from the Parquet footers (no scan), local or object store."""
    import pyarrow.dataset as ds

    return int(ds.dataset(paths, format="parquet", filesystem=store).count_rows())


def _marked(error: ServetraceError) -> RuntimeError:
    return RuntimeError(
        "\x1f".join((MARK, str(int(error.exit_code)), error.message, error.hint or ""))
    )


def _internal(error: Exception) -> RuntimeError:
    first = f"{type(error).__name__}: {first_line(error, '')}"
    return RuntimeError("\x1f".join((MARK, str(int(ExitCode.INTERNAL)), first, "")))


class RayWorkerBug(RuntimeError):
    """A servetrace kernel failed on a Ray worker for a reason that is not the input's."""


def _unmarked(error: BaseException) -> Exception | None:
    """The ServetraceError a worker raised, from Ray's wrapped exception text."""
    text = str(error)
    start = text.find(MARK + "\x1f")
    if start < 0:
        return None
    fields = text[start:].split("\x1f", 3)
    if len(fields) < 4:
        return None
    _, code, message, rest = fields
    hint = rest.splitlines()[0] if rest else ""
    if int(code) == ExitCode.INTERNAL:
        return RayWorkerBug(f"on a Ray worker: {message}")
    kind = UsageError if int(code) == ExitCode.USAGE else InputError
    return kind(message, hint=hint or None)


def _prepare(ingest: IngestOptions, partitions: int, label: str) -> Any:
    """One raw Arrow block → canonical, narrow rows with their partition."""

    def prepare(block: Any) -> Any:
        try:
            lazy = pl.from_arrow(block).lazy()  # type: ignore[union-attr]
            frame = normalise(lazy, label, ingest).collect()
        except ServetraceError as error:
            raise _marked(error) from None
        except Exception as error:  # a bug in servetrace, not the user's input
            raise _internal(error) from None
        rid = pl.col("request_id").cast(pl.String)
        kinds = [c for c, t in frame.schema.items() if isinstance(t, (pl.Enum, pl.Categorical))]
        return frame.with_columns(
            rid,
            pl.col("event").to_physical().cast(pl.UInt8),
            *[pl.col(c).cast(pl.String) for c in kinds if c != "event"],
            (rid.hash(seed=0) % partitions).cast(pl.Int64).alias(PART),
        ).to_arrow()

    return prepare


def _kernel(label: str, exact_gaps: int) -> Any:
    """All rows of the requests of one partition → its partial, as one Arrow row."""

    def kernel(group: Any) -> Any:
        import pyarrow as pa

        from servetrace.sources.normalise import _normalise_request_id

        try:
            frame = pl.from_arrow(group).drop(PART)  # type: ignore[union-attr]
            codes = dict(enumerate(EVENT_KINDS))
            frame = frame.with_columns(
                pl.col("event").replace_strict(codes, return_dtype=EVENT_DTYPE)
            )
            frame = _normalise_request_id(frame.lazy(), named(label)).collect()
            record = to_record(partial_of(frame, (label,), exact_gaps=exact_gaps))
        except ServetraceError as error:
            raise _marked(error) from None
        except Exception as error:  # a bug in servetrace, not the user's input
            raise _internal(error) from None
        return pa.table({name: [value] for name, value in record.items()})

    return kernel


def _reachable(address: str) -> None:
    """Fail in seconds, not after Ray's minutes of retries, when nothing listens there."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", "local": Ray's own lookup
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=3).close()
    except OSError as error:
        raise UsageError(
            f"--ray-address {address}: nothing answers there ({error.strerror or error})",
            hint="start the cluster (ray start --head) or unset RAY_ADDRESS for a local Ray",
        ) from None


def _ray(address: str | None) -> Any:
    """Ray, connected: ``address``, else ``RAY_ADDRESS``, else a local Ray (2 CPUs at most
    of this machine's, no dashboard)."""
    # Ray Data logs every failed task's stack to stderr; servetrace reports one line.
    os.environ.setdefault("RAY_DATA_LOG_LEVEL", "CRITICAL")
    try:
        import ray
        import ray.data
    except ImportError:
        raise UsageError(
            "--engine ray needs Ray Data, which is not installed",
            hint="pip install 'servetrace[ray]'",
        ) from None
    if not ray.is_initialized():
        target = address or os.environ.get("RAY_ADDRESS") or None
        if target is not None:
            _reachable(target)
        options: dict[str, Any] = {"log_to_driver": False, "logging_level": "error"}
        if target is None:
            options.update(include_dashboard=False)
        try:
            ray.init(address=target, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise UsageError(
                f"--ray-address {target}: cannot connect to Ray: {str(error).splitlines()[0]}",
                hint="start the cluster (ray start --head) or unset RAY_ADDRESS for a local Ray",
            ) from None
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    return ray


def analyze_ray(
    texts: Sequence[str],
    ingest: IngestOptions,
    options: AnalysisOptions,
    address: str | None = None,
    from_format: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    exact_gaps: int = EXACT_GAPS,
) -> Analysis:
    """Analyse a Parquet dataset on Ray; the report of the local engine (module docstring)."""
    if from_format:
        raise UsageError(
            f"--engine ray reads canonical Parquet event logs, not --from {from_format}",
            hint="convert the export first: servetrace import … -o trace.parquet",
        )
    paths, store = dataset_inputs(texts)
    # Ray's driver prints the raylet's warnings ("N worker processes have been started")
    # to stdout whatever log_to_driver says; stdout is where the report goes, so while
    # Ray works they go to stderr with the other diagnostics.
    with contextlib.redirect_stdout(sys.stderr):
        ray = _ray(address)
        label = ", ".join(texts)
        try:
            dataset = ray.data.read_parquet(
                paths, filesystem=store, file_extensions=["parquet", "pq"]
            )
            events = _row_count(paths, store)
            if events == 0:
                raise InputError(
                    f"{label}: the trace has no event rows",
                    hint="a trace needs at least one row: request_id, event, ts",
                )
            partitions = partition_count(events, batch_rows)
            # Gaps cannot outnumber events: below the budget every partition keeps them exact.
            keep = exact_gaps if events <= exact_gaps else 0
            prepared = dataset.map_batches(
                _prepare(ingest, partitions, label), batch_format="pyarrow", zero_copy_batch=True
            )
            grouped = prepared.groupby(PART, num_partitions=partitions).map_groups(
                _kernel(label, keep), batch_format="pyarrow"
            )
            records = grouped.take_all()
        except ServetraceError:
            raise
        except Exception as error:
            found = _unmarked(error)
            if found is not None:
                raise found from None
            root = _root(error)
            first = f"{type(root).__name__}: {first_line(root, '')}"
            raise InputError(
                f"{label}: Ray could not read or analyse the dataset: {first}",
                hint="is every file Parquet with the same columns, and reachable from every node?",
            ) from None
    result = finish(combine([from_record(r) for r in records], exact_gaps), options)
    return _named(result, tuple(texts))


def _root(error: BaseException) -> BaseException:
    """The innermost cause of Ray's wrapping (``RayTaskError.cause``, ``__cause__``)."""
    seen = set()
    while id(error) not in seen:
        seen.add(id(error))
        inner = getattr(error, "cause", None) or error.__cause__
        if not isinstance(inner, BaseException):
            break
        error = inner
    return error


def _named(analysis: Analysis, inputs: tuple[str, ...]) -> Analysis:
    from dataclasses import replace

    return replace(analysis, inputs=inputs)


def write_dataset(frame: pl.DataFrame, path: str, address: str | None = None) -> None:
    """``--requests-out DIR``: the per-request frame as a Parquet dataset, written by Ray
    (a local directory, or a prefix on an object store through its pyarrow filesystem)."""
    store, where = None, path
    if _is_uri(path):
        from servetrace.outputs_store import output_prefix

        store, where = output_prefix(path, "--requests-out")
    ray = _ray(address)
    try:
        ray.data.from_arrow(frame.to_arrow()).write_parquet(where, filesystem=store)
    except Exception as error:
        reason = first_line(_root(error), type(error).__name__)
        raise UsageError(f"--requests-out {path}: cannot write the dataset: {reason}") from None
