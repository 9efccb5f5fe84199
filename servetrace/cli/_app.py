"""The Typer application object, consoles and the error guard shared by every command."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperOption

from servetrace.errors import FULL_DEVICE, ExitCode, ServetraceError, unwritable

app = typer.Typer(
    name="servetrace",
    help="Analyze LLM inference-serving traces: queue wait, prefill, decode, TTFT, ITL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
)


def examples(*commands: str, before: str = "") -> str:
    """A command's help epilog: ``before`` as a paragraph, then the example command lines
    kept as written (click's ``\b`` stops it from re-flowing them)."""
    lines = "\n".join(f"  {command}" for command in commands)
    return (f"{before}\n\n" if before else "") + f"Examples:\n\n\b\n{lines}"


def help_built_when_shown(**helps: Callable[[], str]) -> type[TyperCommand]:
    """A command class whose options named in ``helps`` get their help text only when the
    help is shown: text listed by a heavy module (the metric catalog imports Polars)
    without loading it for every start-up."""

    class Command(TyperCommand):
        def format_help(self, ctx: Any, formatter: Any) -> None:
            for param in self.params:
                if param.name in helps and isinstance(param, TyperOption):
                    param.help = helps[param.name]()
            super().format_help(ctx, formatter)

    return Command


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


def with_parameters(
    command: F,
    added: Sequence[inspect.Parameter],
    receive: Callable[[dict[str, Any]], dict[str, Any]],
    replaces: Sequence[str] = (),
) -> F:
    """``command`` with more options, declared once for several commands.

    Typer reads the wrapper's signature, so the ``added`` options appear in the command's
    help after its own; on a call they are taken out of the arguments and ``receive``
    turns them into what the command gets instead: keyword arguments, for the command's
    own parameters named in ``replaces`` (which the options stand in for).
    """
    own = inspect.signature(command, eval_str=True)
    names = {p.name for p in added} | set(replaces)
    kept = [p for p in own.parameters.values() if p.name not in names]
    signature = own.replace(parameters=[*kept, *added])

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {p.name: kwargs.pop(p.name, p.default) for p in added}
        return command(*args, **receive(given), **kwargs)

    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return wrapper  # type: ignore[return-value]


QUIET_PARAMETER = inspect.Parameter(
    "quiet",
    inspect.Parameter.KEYWORD_ONLY,
    default=False,
    annotation=Annotated[
        bool, typer.Option("--quiet", "-q", help="Print no warnings (errors still show).")
    ],
)
# Set by a command's -q for the length of that command (and the commands it calls).
_quiet = False
_depth = 0


def report_error(error: ServetraceError) -> None:
    # User text (paths, rules) may contain [brackets]: never let Rich read it as markup.
    err_console.print(f"[bold red]error:[/] {escape(error.message)}")
    if error.hint:
        err_console.print(f"[bold]hint:[/] {escape(error.hint)}")


def warn(message: str) -> None:
    if _quiet:
        return
    err_console.print(f"[bold yellow]warning:[/] {escape(message)}")


def guarded(command: F) -> F:
    """Turn every failure of a command into a one-line message and its exit code.

    A ServetraceError is the user's to fix: message, hint, its exit code. Anything else is
    a bug in servetrace: a short traceback, a request to report it, exit 4.
    """

    def quieted(given: dict[str, Any]) -> dict[str, Any]:
        global _quiet
        _quiet = _quiet or bool(given["quiet"])
        return {}

    quietable = with_parameters(command, [QUIET_PARAMETER], quieted)

    @functools.wraps(quietable)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _depth, _quiet
        _depth += 1
        try:
            return quietable(*args, **kwargs)
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
        finally:
            _depth -= 1
            if _depth == 0:
                _quiet = False

    return wrapper  # type: ignore[return-value]


def _internal() -> NoReturn:
    """A bug in servetrace: a short traceback, a request to report it, exit 4."""
    err_console.print(traceback.format_exc(limit=4), markup=False)
    err_console.print(
        "[bold red]error:[/] internal error in servetrace; please report it with "
        "the command line and the traceback above."
    )
    raise typer.Exit(int(ExitCode.INTERNAL)) from None
