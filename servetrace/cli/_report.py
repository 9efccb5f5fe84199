"""``-o/--output FILE``, the same in every command that prints a report: the report goes
to stdout and, as the same text, to the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from servetrace.cli._app import emit, out_console
from servetrace.render.formats import SummaryFormat

if TYPE_CHECKING:
    from rich.console import RenderableType

# -f/--format of every command that prints a report; the choices are the command's enum.
REPORT_FORMAT = typer.Option("--format", "-f", help="Report format.")
SummaryFormatOpt = Annotated[SummaryFormat, REPORT_FORMAT]
ReportOutOpt = Annotated[
    Path | None,
    typer.Option("--output", "-o", metavar="FILE", help="Also write the report to this file."),
]
# The width a table is drawn at in a file: what a terminal of 100 columns shows.
FILE_WIDTH = 100


def terminal_width() -> int:
    """The width a table must fit: the terminal's (``COLUMNS`` when set), else 100."""
    import shutil

    return shutil.get_terminal_size((FILE_WIDTH, 24)).columns


def check_report_output(output: Path | None, inputs: Sequence[str | Path]) -> None:
    """Refuse a report file that cannot be written, or that is an input, before any work."""
    if output is None:
        return
    from servetrace.outputs import check_directory, refuse_overwriting_inputs

    check_directory(output, "--output")
    refuse_overwriting_inputs([("--output", output)], inputs)


def deliver(report: str | Sequence[RenderableType], output: Path | None) -> None:
    """Print a report (text as is, a table through rich) and write it to ``output``."""
    if isinstance(report, str):
        emit(report, end="")
        text = report
    else:
        for part in report:
            out_console.print(part)
        text = plain_text(report) if output is not None else ""
    if output is not None:
        from servetrace.outputs import write_text

        write_text(text, output)


def plain_text(parts: Sequence[RenderableType]) -> str:
    """Rich renderables as the plain text a terminal of ``FILE_WIDTH`` columns shows."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=FILE_WIDTH, color_system=None, soft_wrap=True)
    for part in parts:
        console.print(part)
    return buffer.getvalue()
