"""``-o/--output FILE`` is the same in every command that prints a report: the file holds
what stdout shows, and it may not be an input; ``--plots DIR`` may not be an input
directory either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.conftest import events, make_request

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "tests" / "data" / "real" / "vllm-bench-llama33-70b-a100" / "01_tp8_pp1"


@pytest.fixture
def parts(tmp_path: Path) -> Path:
    """A folder of two parts: one trace of three requests."""
    folder = tmp_path / "parts"
    folder.mkdir()
    events(make_request("a", admission=10, first=50, ticks=[60, 70], complete=70)).write_parquet(
        folder / "part-0.parquet"
    )
    events(
        make_request("b", admission=5, first=20, complete=20),
        make_request("c", admission=8, first=30, ticks=[41], complete=41),
    ).write_parquet(folder / "part-1.parquet")
    return folder


@pytest.mark.parametrize(
    "command",
    [
        ["analyze", "{trace}", "-f", "json"],
        ["analyze", "{trace}", "-f", "markdown"],
        ["validate", "{trace}"],
        ["validate", "{trace}", "-f", "json"],
        ["compare", "{trace}", "{trace}", "-f", "json"],
        ["compare", "{trace}", "{trace}", "-f", "markdown"],
    ],
)
def test_the_report_file_holds_what_stdout_shows(
    command: list[str], parts: Path, tmp_path: Path
) -> None:
    args = [part.format(trace=parts) for part in command]
    shown = runner.invoke(app, args)
    assert shown.exit_code == 0, shown.output
    written = tmp_path / "report.txt"
    again = runner.invoke(app, [*args, "-o", str(written)])
    assert again.exit_code == 0, again.output
    assert again.stdout == shown.stdout
    assert written.read_text(encoding="utf-8") == shown.stdout
    if "json" in args:
        json.loads(written.read_text(encoding="utf-8"))


def test_a_table_is_written_as_the_terminal_shows_it(parts: Path, tmp_path: Path) -> None:
    written = tmp_path / "report.txt"
    done = runner.invoke(app, ["analyze", str(parts), "--output", str(written)])
    assert done.exit_code == 0, done.output
    text = written.read_text(encoding="utf-8")
    assert "3 requests" in text and "ttft" in text
    assert "\x1b[" not in text  # plain text, no terminal colours
    # The table is drawn for a terminal of 100 columns (text lines stay whole, unwrapped).
    table = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 100


@pytest.mark.slow
def test_capacity_writes_its_report(tmp_path: Path) -> None:
    written = tmp_path / "capacity.json"
    args = ["capacity", str(SWEEP), "--goodput", "ttft<=60ms", "-f", "json"]
    done = runner.invoke(app, [*args, "-o", str(written)])
    assert done.exit_code == 0, done.output
    assert json.loads(written.read_text(encoding="utf-8")) == json.loads(done.stdout)


@pytest.mark.parametrize("command", ["analyze", "validate", "capacity"])
def test_the_report_file_may_not_be_inside_an_input_directory(command: str, parts: Path) -> None:
    before = sorted(p.name for p in parts.iterdir())
    done = runner.invoke(app, [command, str(parts), "-o", str(parts / "report.txt")])
    assert done.exit_code == 2, done.output
    assert "--output" in done.stderr and "refusing to overwrite" in done.stderr
    assert sorted(p.name for p in parts.iterdir()) == before


def test_the_report_file_may_not_be_a_compared_trace(parts: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.parquet"
    events(make_request("a", admission=10, first=50, complete=50)).write_parquet(other)
    before = other.read_bytes()
    done = runner.invoke(app, ["compare", str(parts), str(other), "-o", str(other)])
    assert done.exit_code == 2 and "refusing to overwrite" in done.stderr
    assert other.read_bytes() == before


@pytest.mark.parametrize("inside", [False, True])
def test_plots_may_not_go_into_an_input_directory(parts: Path, inside: bool) -> None:
    target = parts / "charts" if inside else parts
    before = sorted(p.name for p in parts.iterdir())
    for args in (["analyze", str(parts)], ["compare", str(parts), str(parts)]):
        done = runner.invoke(app, [*args, "--plots", str(target)])
        assert done.exit_code == 2, done.output
        assert "--plots" in done.stderr and "refusing to overwrite" in done.stderr
    assert sorted(p.name for p in parts.iterdir()) == before
