"""Object-store URIs (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``…) as trace inputs.

Everything goes through ``pyarrow.fs`` — the one configuration a user sets for every
engine (the local one, ``--engine ray`` and its workers, ``--requests-out``):

- **where**: ``FileSystem.from_uri``, so the standard variables work: ``AWS_ENDPOINT_URL``
  (a MinIO, Ceph or moto endpoint; Arrow ≥ 15), ``AWS_ACCESS_KEY_ID`` and the rest of the
  AWS credential chain, ``AWS_DEFAULT_REGION``; and the URI's own query
  (``s3://bucket/key?endpoint_override=host:9000&scheme=http``);
- **how hard to try**: ``AWS_MAX_ATTEMPTS`` (the AWS SDKs' standard variable, which Arrow
  itself does not read) bounds the retries, so an unreachable endpoint fails in a moment
  instead of after the default retries' seconds; an S3 connection is given up after
  ``CONNECT_TIMEOUT_S``, and a GCS call, whose client retries for 15 minutes by default
  (a ``gs://`` URI without network gave no answer in a minute), after
  ``GCS_RETRY_LIMIT_S`` of retries unless the URI sets ``retry_limit_seconds``.

A URI names an object (always taken), a prefix (every trace file below it, hidden and
``_``-prefixed keys skipped, ``key=value`` folders added as columns: a local directory of
parts, exactly) or a glob (``s3://bucket/logs/*/part-*.parquet``). Objects are read as
Parquet or Arrow IPC (by suffix, else by their first bytes); text formats are refused.
Every failure is one ``InputError`` naming the URI: no such bucket, no such object,
endpoint unreachable, access denied.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import polars as pl

from servetrace.errors import InputError, UsageError, first_line
from servetrace.sources.paths import (
    folder_values,
    has_magic,
    segment_matches,
    with_partition_columns,
)
from servetrace.sources.sniff import binary_format

_T = TypeVar("_T")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
READABLE = {".parquet": "parquet", ".pq": "parquet", ".arrow": "ipc", ".ipc": "ipc"}
READABLE |= {".feather": "ipc"}
BUCKETED = ("S3FileSystem", "GcsFileSystem")  # the first path segment is a bucket
CONNECT_TIMEOUT_S = 5.0
"""An S3 endpoint that does not accept the connection by then is unreachable."""
GCS_RETRY_LIMIT_S = 5
"""How long a GCS call retries (credentials, connection, transient errors) before failing."""


def is_uri(text: str | os.PathLike[str]) -> bool:
    """``scheme://…`` with a scheme of two letters or more (``C://`` stays a path)."""
    return isinstance(text, str) and _SCHEME.match(text) is not None


def named(text: str) -> Path:
    """A source's name for messages: ``Path`` would fold a URI's ``//``; a URI is only
    ever formatted into text, so it travels as itself."""
    return cast(Path, text) if is_uri(text) else Path(text)


@dataclass(frozen=True)
class Part:
    """One object of a trace: its URI (for messages), where pyarrow finds it, its hive values."""

    uri: str
    filesystem: Any
    path: str
    hive: dict[str, str]

    def __str__(self) -> str:
        return self.uri


def path_of(uri: str) -> str:
    """The part of ``uri`` after its scheme, before any query."""
    return _SCHEME.sub("", _split(uri)[0])


def _split(uri: str) -> tuple[str, str]:
    base, sep, query = uri.partition("?")
    return base, (sep + query) if sep else ""


def reason(error: BaseException) -> str:
    """The part of an AWS SDK message a user acts on."""
    text = first_line(error)
    if "NETWORK_CONNECTION" in text or "curlCode" in text:
        detail = text.rpartition("Details: ")[2] if "Details: " in text else text
        return f"cannot reach the endpoint: {detail}"
    if "ACCESS_DENIED" in text or "AccessDenied" in text:
        return f"access denied: {text}"
    if "google::cloud::Status(" in text:
        return _gcs_reason(text)
    azure = _AZURE_EXCEPTION.search(text)
    if azure:
        # the Azure SDK names its C++ exception class mangled ("N5Azure…E"): keep its words
        detail = text[azure.end() :].strip()
        if "Credentials" in azure.group(0):
            return f"no credentials for the store: {detail}"
        return detail
    return text


_AZURE_EXCEPTION = re.compile(r"N5Azure\w*E: ")


def _gcs_reason(text: str) -> str:
    """A GCS client status (a paragraph, repeated in its metadata) cut to what happened."""
    detail = text.split(" error_info=", 1)[0]
    underlying = detail.rpartition("The underlying error message was: ")[2]
    curl = re.search(r"CURL error \[\d+\]=(.+)", underlying)
    if curl:
        return f"cannot reach the store: {curl.group(1).strip()}"
    if "OAuth2 access token" in detail:
        return f"no credentials for the store: {underlying.strip()}"
    return detail


def _configured(filesystem: Any) -> Any:
    """A filesystem that fails in seconds when its store cannot be reached (module
    docstring); an S3 one also made self-contained, so that a Ray worker on another node
    reaches the same store as this process: the region resolved here, the credentials of
    this process's ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``
    when set (else each node's own chain, e.g. its instance role), and
    ``AWS_MAX_ATTEMPTS`` as the retry budget (Arrow itself ignores that variable)."""
    from pyarrow import fs

    kind = type(filesystem).__name__
    if kind not in BUCKETED:
        return filesystem
    options = dict(filesystem.__reduce__()[1][0])  # the constructor's arguments, as pickled
    if kind == "GcsFileSystem":
        if options.get("retry_time_limit") is None:
            options["retry_time_limit"] = timedelta(seconds=GCS_RETRY_LIMIT_S)
        return fs.GcsFileSystem(**options)
    options["region"] = options.get("region") or filesystem.region
    if options.get("connect_timeout", -1) < 0:
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret and not options.get("access_key") and not options.get("anonymous"):
        options.update(
            access_key=key,
            secret_key=secret,
            session_token=os.environ.get("AWS_SESSION_TOKEN") or None,
        )
    attempts = os.environ.get("AWS_MAX_ATTEMPTS", "").strip()
    if attempts:
        if not attempts.isdigit() or int(attempts) < 1:
            raise UsageError(f"AWS_MAX_ATTEMPTS={attempts}: not a whole number ≥ 1")
        options["retry_strategy"] = fs.AwsStandardS3RetryStrategy(max_attempts=int(attempts))
    return fs.S3FileSystem(**options)


def filesystem(uri: str) -> tuple[Any, str]:
    """``(pyarrow filesystem, its path)`` for ``uri``; an unknown scheme is an InputError."""
    from pyarrow import fs

    try:
        found, path = fs.FileSystem.from_uri(uri)
    except (ValueError, OSError) as error:
        raise InputError(
            f"{uri}: pyarrow cannot open this URI: {first_line(error)}",
            hint="object stores pyarrow reads: s3://, gs://, abfs://, hdfs://, file://",
        ) from None
    return _configured(found), path


def guarded(uri: str, work: Callable[[], _T]) -> _T:
    """``work`` on one object; its failures as one InputError naming the URI."""
    try:
        return work()
    except FileNotFoundError:
        raise InputError(f"{uri}: no such object") from None
    except (OSError, ValueError, pl.exceptions.PolarsError) as error:
        raise InputError(f"{uri}: cannot read: {reason(error)}") from None
    except Exception as error:
        # pyarrow's own base class (a GCS "permanent error") is none of the above; pyarrow
        # is imported by then, as every store call goes through it.
        from pyarrow.lib import ArrowException

        if not isinstance(error, ArrowException):
            raise
        raise InputError(f"{uri}: cannot read: {reason(error)}") from None


def _info(uri: str, filesystem: Any, path: str) -> Any:
    return guarded(uri, lambda: filesystem.get_file_info(path))


def missing_bucket(uri: str, filesystem: Any, path: str, known_missing: bool = False) -> str | None:
    """On a store of buckets, the bucket of ``path`` when it does not exist (asked of the
    store unless ``known_missing``: ``path`` is the bucket and was not found)."""
    from pyarrow import fs

    bucket = path.strip("/").split("/", 1)[0]
    if type(filesystem).__name__ not in BUCKETED or not bucket:
        return None
    if known_missing and bucket == path.strip("/"):
        return bucket
    return bucket if _info(uri, filesystem, bucket).type == fs.FileType.NotFound else None


def _missing(uri: str, filesystem: Any, path: str) -> InputError:
    """Not found: on a store of buckets, say whether the bucket itself is missing."""
    bucket = missing_bucket(uri, filesystem, path, known_missing=True)
    if bucket is not None:
        return InputError(f"{uri}: no such bucket {bucket!r}")
    return InputError(f"{uri}: no such object or prefix")


def _hive(relative: str) -> dict[str, str]:
    return folder_values(relative.split("/")[:-1])


def _below(uri: str, filesystem: Any, root: str) -> list[tuple[str, str]]:
    """``(path, path relative to root)`` of every file below ``root``, sorted."""
    from pyarrow import fs

    selector = fs.FileSelector(root, recursive=True)
    infos = guarded(uri, lambda: filesystem.get_file_info(selector))
    prefix = root.rstrip("/") + "/"
    return sorted(
        (i.path, i.path.removeprefix(prefix)) for i in infos if i.type == fs.FileType.File
    )


def _child(base: str, query: str, relative: str) -> str:
    return base.rstrip("/") + "/" + relative + query


def resolve_parts(text: str, is_trace_file: Callable[[str], bool]) -> list[Part]:
    """Every trace object ``text`` names (module docstring), in key order."""
    from pyarrow import fs

    base, query = _split(text)
    filesystem_, path = filesystem(text)
    path = path.rstrip("/") or path
    if has_magic(path):
        return _globbed(text, filesystem_, path, is_trace_file)
    info = _info(text, filesystem_, path)
    if info.type == fs.FileType.File:
        return [Part(text, filesystem_, path, {})]
    if info.type == fs.FileType.NotFound:
        raise _missing(text, filesystem_, path)
    parts = [
        Part(_child(base, query, relative), filesystem_, child, _hive(relative))
        for child, relative in _below(text, filesystem_, path)
        if is_trace_file(relative)
        and not any(s.startswith((".", "_")) for s in relative.split("/"))
    ]
    if not parts:
        raise InputError(
            f"{text}: the prefix holds no trace file",
            hint="expected .parquet or .arrow objects (or parts of them) below it",
        )
    return parts


def _globbed(
    text: str, filesystem_: Any, pattern: str, is_trace_file: Callable[[str], bool]
) -> list[Part]:
    """A glob: list below its literal prefix, match every segment (``**``: any depth)."""
    from pyarrow import fs

    segments = pattern.split("/")
    literal = 0
    while literal < len(segments) and not has_magic(segments[literal]):
        literal += 1
    root = "/".join(segments[:literal])
    info = _info(text, filesystem_, root)
    if info.type != fs.FileType.Directory:
        raise _missing(text, filesystem_, root + "/")
    base, query = _split(text)
    scheme_root = base[: len(base) - len(pattern)] if base.endswith(pattern) else ""
    rest = segments[literal:]
    parts = []
    for child, relative in _below(text, filesystem_, root):
        if _matched(rest, relative.split("/")) and is_trace_file(relative):
            parts.append(Part(scheme_root + child + query, filesystem_, child, {}))
    if not parts:
        raise InputError(f"{text}: the pattern matches no trace object")
    return parts


def _matched(pattern: list[str], segments: list[str]) -> bool:
    """Segment by segment, as a local glob (``sources/paths``): a wildcard stays within
    one segment and skips a leading dot; ``**`` is any number of segments, hidden ones
    excepted."""
    if not pattern:
        return not segments
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        for skip in range(len(segments) + 1):
            if skip and segments[skip - 1].startswith("."):
                return False
            if _matched(rest, segments[skip:]):
                return True
        return False
    return bool(segments) and segment_matches(head, segments[0]) and _matched(rest, segments[1:])


def _format(part: Part) -> str:
    suffix = "." + part.path.rsplit(".", 1)[-1].lower() if "." in part.path else ""
    if suffix in READABLE:
        return READABLE[suffix]

    def head() -> bytes:
        with part.filesystem.open_input_stream(part.path) as stream:
            return bytes(stream.read(8))

    fmt = binary_format(guarded(part.uri, head))
    if fmt is not None:
        return fmt
    raise UsageError(
        f"{part.uri}: object stores are read as Parquet or Arrow IPC; this object is neither",
        hint="copy a text trace to this machine, or convert it: servetrace import … -o "
        "trace.parquet",
    )


def dataset(part: Part) -> Any:
    import pyarrow.dataset as ds

    fmt = _format(part)
    return guarded(part.uri, lambda: ds.dataset(part.path, filesystem=part.filesystem, format=fmt))


def scan(part: Part) -> tuple[pl.LazyFrame, int]:
    """One object, lazily, through pyarrow (read in record batches through the object's
    filesystem), and its rows from the footer or IPC metadata (no scan of the data)."""
    found = dataset(part)
    rows = int(guarded(part.uri, found.count_rows))
    return with_partition_columns(pl.scan_pyarrow_dataset(found), part.hive), rows


def resolve_all(texts: Sequence[str], is_trace_file: Callable[[str], bool]) -> list[Part]:
    """Every object of every URI, once, in the order first named."""
    seen: set[str] = set()
    out: list[Part] = []
    for text in texts:
        for part in resolve_parts(text, is_trace_file):
            if part.uri not in seen:
                seen.add(part.uri)
                out.append(part)
    return out
