"""The ``servetrace`` command line: a thin Typer layer over the library.

Each command lives in its own module of this package, registers itself on ``app`` with
``@app.command`` and the ``guarded`` decorator (which turns exceptions into ``error:`` /
``hint:`` lines and exit codes, DESIGN §7: no traceback for a user mistake), parses its
options and calls the library. Command modules import Polars and the engine inside their
functions, so ``servetrace --help`` loads neither.
"""

from __future__ import annotations

import os
import sys

# Before Polars loads: let its allocator return freed pages after 100 ms instead of ~10 s.
# The analysis frees large intermediates (sorted ticks) as it goes, so peak memory falls
# by about a fifth at 1e7 events (docs/scale.md).
os.environ.setdefault(
    "_RJEM_MALLOC_CONF", "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"
)

# Importing a command module registers its commands, in the order the help lists them.
from servetrace.cli import (  # noqa: F401
    analyze,
    capacity,
    check,
    compare,
    imports,
    merge,
    record_steps,
    report,
    simulate,
    timeline,
    whatif,
)
from servetrace.cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        # `servetrace analyze … | head`: the reader left early; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
