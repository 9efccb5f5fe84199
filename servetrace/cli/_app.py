"""The Typer application object, consoles and the error guard shared by every command."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from servetrace.cli._lazy import LazyGroup
from servetrace.errors import FULL_DEVICE, ExitCode, ServetraceError, unwritable

app = typer.Typer(
    name="servetrace",
    cls=LazyGroup,
    help="Analyze LLM inference-serving traces: queue wait, prefill, decode, TTFT, ITL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        from servetrace.version import SCHEMA_VERSION, __version__

        print(f"servetrace {__version__} (event schema {SCHEMA_VERSION})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Analyze LLM inference-serving traces: queue wait, prefill, decode, TTFT, ITL."""


# Reports go to stdout, diagnostics to stderr, so `--format json > out.json` stays clean.
out_console = Console(soft_wrap=True, highlight=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False)


def emit(text: str, end: str = "\n") -> None:
    """Write a machine-readable report (JSON, CSV, Markdown, plain text) to stdout as is.

    Not through rich: its console splits and scans every line of the text (6 of 7 s for
    the 8 MB JSON of a 300-group ``--by``), and drops carriage returns that a CSV field may
    hold.
    """
    sys.stdout.write(text + end)


F = TypeVar("F", bound=Callable[..., Any])


def report_error(error: ServetraceError) -> None:
    # User text (paths, rules) may contain [brackets]: never let Rich read it as markup.
    err_console.print(f"[bold red]error:[/] {escape(error.message)}")
    if error.hint:
        err_console.print(f"[bold]hint:[/] {escape(error.hint)}")


def warn(message: str) -> None:
    err_console.print(f"[bold yellow]warning:[/] {escape(message)}")


def guarded(command: F) -> F:
    """Turn every failure of a command into a one-line message and its exit code.

    A ServetraceError is the user's to fix: message, hint, its exit code. Anything else is
    a bug in servetrace: a short traceback, a request to report it, exit 4.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except ServetraceError as error:
            report_error(error)
            raise typer.Exit(int(error.exit_code)) from None
        except BrokenPipeError:
            raise typer.Exit(int(ExitCode.OK)) from None
        except OSError as error:
            if error.errno not in FULL_DEVICE:
                _internal()
            # Every file output is written by ``outputs``, which names its path: what is
            # left is the report on stdout (``> /dev/full``). Point stdout at /dev/null so
            # the interpreter's last flush does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            report_error(unwritable("stdout", error))
            raise typer.Exit(int(ExitCode.USAGE)) from None
        except Exception:
            _internal()

    return wrapper  # type: ignore[return-value]


def _internal() -> NoReturn:
    """A bug in servetrace: a short traceback, a request to report it, exit 4."""
    err_console.print(traceback.format_exc(limit=4), markup=False)
    err_console.print(
        "[bold red]error:[/] internal error in servetrace; please report it with "
        "the command line and the traceback above."
    )
    raise typer.Exit(int(ExitCode.INTERNAL)) from None
