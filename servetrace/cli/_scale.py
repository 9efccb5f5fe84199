"""What ``analyze --partial-out``, ``analyze --engine ray`` and ``merge`` add to the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from servetrace.errors import UsageError
from servetrace.settings import Engine

EngineOpt = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="local: this machine (in memory, or streamed); ray: a Ray cluster reads a "
        "Parquet dataset (local paths or object-store URIs), shuffles events by request_id "
        "and runs the same kernel per partition (needs servetrace[ray]).",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster for --engine ray (default: RAY_ADDRESS, else a local Ray).",
    ),
]
PartialOutOpt = Annotated[
    str | None,
    typer.Option(
        "--partial-out",
        metavar="PATH",
        help="Also write this shard's mergeable partial result to this directory "
        "(docs/partials.md); 'servetrace merge' combines partials of request-split shards.",
    ),
]
# Text, not a Path: a URI keeps its '//' (a Path would fold it): s3://bucket/….
QuarantineOutUriOpt = Annotated[
    str | None,
    typer.Option(
        "--quarantine-out",
        metavar="PATH",
        help="Write rows of invalid requests here, with a 'rule' column (a file here, or "
        "on an object store: s3://bucket/quarantine.parquet).",
    ),
]
RequestsOutUriOpt = Annotated[
    str | None,
    typer.Option(
        "--requests-out",
        metavar="PATH",
        help="Write per-request metrics here (.parquet or .csv), on this machine or an "
        "object store (s3://bucket/requests.parquet; with --engine ray a dataset prefix, "
        "s3://bucket/requests/).",
    ),
]


def output_path(text: str | Path | None) -> Path | str | None:
    """An output option's value: a local ``Path``, or a URI kept as text."""
    from servetrace.sources.objectstore import is_uri

    if text is None or isinstance(text, Path):
        return text
    return text if is_uri(text) else Path(text)


def refuse_uri(text: str | Path | None, why: str, flag: str = "") -> None:
    """An object-store URI where only a path on this machine will do: a usage error."""
    from servetrace.sources.objectstore import is_uri

    if isinstance(text, str) and is_uri(text):
        raise UsageError(f"{flag} {text}: {why}".lstrip(), hint=STORE_HINT)


STORE_HINT = (
    "write it here, then copy it to the store (aws s3 cp --recursive DIR s3://…), "
    "and copy partials here before 'servetrace merge'"
)


def check_outputs(
    traces: list[str],
    engine: Engine,
    requests_out: Path | str | None,
    quarantine_out: Path | str | None,
    partial_out: Path | str | None,
) -> None:
    """Refuse bad outputs before reading anything (a Ray --requests-out is a directory;
    a URI is checked on its store)."""
    from servetrace.outputs import check_frame_output, refuse_overwriting_inputs
    from servetrace.sources.objectstore import is_uri

    if engine is Engine.ray and partial_out is not None:
        raise UsageError("--partial-out is for one shard on this machine, not --engine ray")
    refuse_uri(partial_out, "partials are directories on this machine", "--partial-out")
    partial_out = None if partial_out is None else Path(partial_out)
    if isinstance(requests_out, str) and requests_out == quarantine_out and is_uri(requests_out):
        raise UsageError(f"--requests-out and --quarantine-out name the same object {requests_out}")
    requests_out = _checked_uri("--requests-out", requests_out, traces, engine)
    quarantine_out = _checked_uri("--quarantine-out", quarantine_out, traces, Engine.local)
    if engine is Engine.ray:
        if requests_out is not None and requests_out.suffix:
            raise UsageError(
                f"--requests-out {requests_out}: with --engine ray this is a directory for a "
                "Parquet dataset (no suffix)",
                hint="for example --requests-out requests/",
            )
        if requests_out is not None and requests_out.is_dir() and any(requests_out.iterdir()):
            raise UsageError(
                f"--requests-out {requests_out}: is not empty; the dataset would mix with "
                "what is there",
                hint="name a new or empty directory",
            )
    else:
        check_frame_output(requests_out, "--requests-out")
    check_frame_output(quarantine_out, "--quarantine-out")
    if partial_out is not None:
        from servetrace.analysis.partial_io import check_partial_output

        check_partial_output(partial_out, "--partial-out")
    refuse_overwriting_inputs(
        [
            ("--requests-out", requests_out),
            ("--quarantine-out", quarantine_out),
            ("--partial-out", partial_out),
        ],
        traces,
    )


def _checked_uri(
    flag: str, given: Path | str | None, traces: list[str], engine: Engine
) -> Path | None:
    """A URI output checked on its store (then None: nothing local to check), else the
    local path for the checks that follow."""
    wanted = output_path(given)
    if not isinstance(wanted, str):
        return wanted
    from servetrace.outputs_store import check_frame_uri, output_prefix, refuse_overwriting

    refuse_overwriting([(flag, wanted)], traces)
    if engine is Engine.ray:
        if Path(wanted.partition("?")[0]).suffix:
            raise UsageError(
                f"{flag} {wanted}: with --engine ray this is a prefix for a Parquet dataset "
                "(no suffix)",
                hint="for example --requests-out s3://bucket/requests/",
            )
        output_prefix(wanted, flag)
    else:
        check_frame_uri(wanted, flag)
    return None


def write_requests(
    frame: Any,
    path: Path | str,
    engine: Engine,
    ray_address: str | None,
    flag: str = "--requests-out",
) -> None:
    """A file by its suffix; with --engine ray a Parquet dataset written by the cluster;
    on an object store for a URI."""
    if isinstance(path, str) and engine is not Engine.ray:
        from servetrace.outputs_store import write_frame_uri

        write_frame_uri(frame, path, flag)
        return
    if engine is Engine.ray:
        from servetrace.analysis.ray_engine import write_dataset

        write_dataset(frame, str(path), ray_address)
        return
    from servetrace.outputs import write_table

    write_table(frame, Path(path))
