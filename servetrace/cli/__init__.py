"""The ``servetrace`` command line: a thin Typer layer over the core.

Each command lives in its own module of this package and registers itself on ``app``
with the ``guarded`` decorator, which turns exceptions into ``error:``/``hint:`` lines and
exit codes (DESIGN §7), so no command prints a traceback for a user mistake.
"""

from __future__ import annotations

import os
import sys

# Before Polars loads: let its allocator return freed pages after 100 ms instead of ~10 s.
# The analysis frees large intermediates (sorted ticks) as it goes; measured at 1e7
# events this cuts peak memory from 1.78 to 1.40 GB for 0.1 s (benchmarks/README.md).
os.environ.setdefault(
    "_RJEM_MALLOC_CONF", "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"
)

from servetrace.cli import analyze as _analyze  # noqa: F401  (registers commands)
from servetrace.cli import capacity as _capacity  # noqa: F401
from servetrace.cli import check as _check  # noqa: F401
from servetrace.cli import compare as _compare  # noqa: F401
from servetrace.cli import imports as _imports  # noqa: F401
from servetrace.cli import report as _report  # noqa: F401
from servetrace.cli import simulate as _simulate  # noqa: F401
from servetrace.cli import timeline as _timeline  # noqa: F401
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
