"""A Typer group that imports a command's module only when that command runs.

``servetrace --help`` must not pay for Polars, SciPy, the importers or the renderers, so
the root help lists commands from summaries declared in ``servetrace.cli`` (a test checks
each summary equals its command's docstring), and ``get_command`` imports the command's
module — which registers it on ``app`` with ``@app.command`` — the first time it is asked
for by name.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import NamedTuple

import typer
import typer.main
from typer import _click
from typer.core import TyperCommand, TyperGroup


class LazyCommand(NamedTuple):
    """Where a command lives and the one line ``--help`` shows for it."""

    module: str
    summary: str


# Filled by servetrace.cli before the group is built (that module declares the commands).
LAZY_COMMANDS: dict[str, LazyCommand] = {}


class _Listed(TyperCommand):
    """A stand-in shown in the root help: the declared name and summary, nothing to run."""


class LazyGroup(TyperGroup):
    """The root ``servetrace`` group: commands from ``LAZY_COMMANDS``, loaded on demand."""

    _listing = False

    def list_commands(self, ctx: _click.Context) -> list[str]:
        names = list(LAZY_COMMANDS)
        return names + [name for name in super().list_commands(ctx) if name not in names]

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        # While the root help is written, commands not loaded yet are listed by summary.
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except _click.exceptions.UsageError as error:
            # Typer suggests from the loaded commands only; suggest from every declared one.
            close = difflib.get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if close and "Did you mean" not in error.message:
                error.message = (
                    error.message.rstrip(".")
                    + ". Did you mean "
                    + (", ".join(repr(name) for name in close) + "?")
                )
            raise

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        loaded = self.commands.get(cmd_name)
        if loaded is not None:
            return loaded
        lazy = LAZY_COMMANDS.get(cmd_name)
        if lazy is None:
            return None
        if self._listing:
            return _Listed(cmd_name, help=lazy.summary, short_help=lazy.summary)
        command = load_command(cmd_name)
        self.commands[cmd_name] = command
        return command


def load_command(name: str) -> _click.Command:
    """Import the module declared for ``name`` and build its Click command from ``app``."""
    from servetrace.cli._app import app

    importlib.import_module(LAZY_COMMANDS[name].module)
    for info in app.registered_commands:
        if info.callback is None:
            continue
        if (info.name or typer.main.get_command_name(info.callback.__name__)) == name:
            return typer.main.get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    raise LookupError(f"{LAZY_COMMANDS[name].module} registers no command {name!r}")


def declare(commands: Mapping[str, tuple[str, str]]) -> None:
    LAZY_COMMANDS.update({name: LazyCommand(*spec) for name, spec in commands.items()})


__all__ = ["LAZY_COMMANDS", "LazyCommand", "LazyGroup", "declare", "load_command"]
