"""The README is a contract too: its commands run, its output is real, nothing is missing."""

from __future__ import annotations

import re
import shlex
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.analysis.lifecycle_rules import RULES
from servetrace.analysis.metrics import LATENCY_METRICS, REQUEST_COLUMNS
from servetrace.cli import app
from servetrace.cli._lazy import LAZY_COMMANDS
from servetrace.errors import ExitCode
from servetrace.render.naming import Naming

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
# Every command the CLI declares (a new command without a README section fails here).
COMMANDS = tuple(LAZY_COMMANDS)
runner = CliRunner()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_quick_start_is_two_commands_and_ci_runs_the_test_command() -> None:
    setup, tests = blocks("bash")[:2]
    assert "pip install -e '.[test]'" in setup and "servetrace analyze sample_traces/" in setup
    assert tests.strip().endswith("python -m pytest")
    assert "ruff check" in tests and "ruff format --check" in tests and "mypy servetrace" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.strip().splitlines()[-1] == tests.strip()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_a_readme_section(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.stdout
    assert f"servetrace {command}" in README


def test_every_rule_metric_column_naming_and_exit_code_is_documented() -> None:
    for rule in RULES:
        assert f"`{rule}`" in README, rule
    for metric in LATENCY_METRICS:
        assert f"`{metric.name}`" in README and f"`{metric.column}`" in README, metric.name
    for column in REQUEST_COLUMNS:
        assert f"`{column}`" in README, column
    for naming in Naming:
        assert naming.value in README
    for code in ExitCode:
        assert f"| {int(code)} |" in README


def _text_block_after(command: str) -> list[str]:
    for block in blocks("text"):
        if block.startswith(f"$ {command}\n"):
            return block.splitlines()[1:]
    raise AssertionError(f"no README output block for {command!r}")


def test_readme_analyze_output_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    command = "servetrace analyze sample_traces/realistic.parquet"
    result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    assert result.stdout.splitlines() == _text_block_after(command)


def test_readme_compare_output_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    command = (
        "servetrace compare sample_traces/policy_fcfs.parquet "
        "sample_traces/policy_chunked.parquet --metric ttft --metric itl --metric e2e"
    )
    result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    assert result.stdout.splitlines() == _text_block_after(command)


def test_use_in_ci_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (config,) = blocks("toml")
    (tmp_path / "servetrace.toml").write_text(config)
    shutil.copytree(ROOT / "sample_traces", tmp_path / "sample_traces")
    command = next(b for b in blocks("bash") if "--format junit" in b).strip()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, result.stdout + result.stderr
    suite = ET.parse(tmp_path / "servetrace-junit.xml").getroot()
    cases = suite.findall(".//testcase")
    assert len(cases) == 5  # two SLOs in one line, one more SLO, two budgets
    assert not suite.findall(".//failure")


def test_library_api_example_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python block: its asserts pin the numbers it shows."""
    (example,) = [b for b in blocks("python") if "import servetrace" in b]
    monkeypatch.chdir(ROOT)
    exec(compile(example, "README.md", "exec"), {})


def _check_blocks() -> list[tuple[str, list[str]]]:
    """Every README output block of ``servetrace check``: its command and its lines."""
    found = []
    for block in blocks("text"):
        if not block.startswith("$ servetrace check"):
            continue
        lines = block.splitlines()
        command = lines[0][2:]
        while command.endswith("\\"):
            lines.pop(0)
            command = command[:-1] + lines[0].strip()
        found.append((command, lines[1:]))
    return found


@pytest.mark.parametrize(("command", "expected"), _check_blocks(), ids=lambda v: str(v)[:60])
def test_readme_check_outputs_are_real(
    command: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A passing or failing check shows its stdout; a usage error its stderr."""
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    shown = result.stdout if result.exit_code in (0, 1) else result.stderr
    assert shown.splitlines() == expected


def test_readme_check_blocks_are_found() -> None:
    assert len(_check_blocks()) >= 4  # rules, bad rule, skip, unbounded number
