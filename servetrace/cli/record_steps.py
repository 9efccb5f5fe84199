"""``servetrace record-steps``: an engine's ZMQ step publisher → a file ``forward-pass`` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from servetrace.cli._app import app, err_console, examples, guarded
from servetrace.errors import UsageError


@app.command(
    "record-steps",
    epilog=examples(
        "servetrace record-steps tcp://127.0.0.1:5600 -o steps.fpm --seconds 60",
        "servetrace record-steps tcp://gpu-node:5601 -o dp1.fpm --count 10000",
    ),
)
@guarded
def record_steps(
    address: Annotated[
        str,
        typer.Argument(
            metavar="ADDRESS",
            help="The engine's step publisher: tcp://HOST:PORT (vLLM: "
            "--forward-pass-metrics-port, plus the data-parallel rank) or ipc://PATH.",
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write the messages to.")],
    seconds: Annotated[
        float | None, typer.Option("--seconds", help="Stop after this many seconds.")
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", help="Stop after this many messages.")
    ] = None,
) -> None:
    """Record an engine's per-step messages (vLLM's ForwardPassMetrics) to a file.

    Stops at --seconds or --count, whichever comes first, or at Ctrl-C, keeping every
    message received. Read the file with --steps-from forward-pass."""
    from servetrace.sources.steps.record import record

    if seconds is None and count is None:
        raise UsageError("give --seconds or --count (or both): a recording needs a bound")
    if seconds is not None and not seconds > 0:
        raise UsageError(f"--seconds must be > 0, got {seconds:g}")
    if count is not None and count < 1:
        raise UsageError(f"--count must be ≥ 1, got {count}")
    done = record(address, output, seconds=seconds, count=count)
    why = {"time": "time is up", "count": "count reached", "interrupted": "interrupted"}
    err_console.print(
        f"wrote {output}: {done.messages:,} messages from {address} ({why[done.stopped]})",
        markup=False,
    )
