"""Every command's ``--help`` reads at 80 columns: option names whole, no text eaten as
markup, and examples to copy at the end."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.cli.test_startup import COMMANDS

runner = CliRunner()


def _help(*args: str) -> str:
    done = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert done.exit_code == 0, done.output
    return done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_80_columns_with_whole_option_names_and_examples(command: str) -> None:
    text = _help(command)
    options = re.findall(r"^  (?:-\w, )?(--[a-z][a-z-]*)", text, flags=re.M)
    assert options, text
    for option in options:
        assert re.search(rf"{option}\b", text)
    examples = text.split("Examples:", 1)[1]
    assert f"servetrace {command} " in examples
    # Option texts wrap at the width; only the example command lines may run past it.
    long = [line for line in text.splitlines() if len(line) > 80]
    assert all(line.strip().startswith("servetrace ") for line in long), long


def test_bracketed_text_is_shown_as_written() -> None:
    assert "[tool.servetrace] in pyproject.toml" in " ".join(_help("check").split())


def test_analyze_help_is_a_page_not_a_book() -> None:
    assert len(_help("analyze").splitlines()) < 150


def test_validate_offers_only_the_formats_it_writes() -> None:
    done = runner.invoke(app, ["validate", "sample_traces/worked_example.csv", "-f", "markdown"])
    assert done.exit_code == 2 and "'markdown' is not one of 'table', 'json'" in done.output
