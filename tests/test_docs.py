"""The documentation is a contract too: its commands run, its output is real, nothing is missing.

README.md is the front door (quick start, one section per command, exit codes, real
outputs); docs/reference.md holds every rule, metric, column and naming.
"""

from __future__ import annotations

import re
import shlex
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from servetrace.analysis.lifecycle_rules import RULES
from servetrace.analysis.metric_names import LATENCY_METRICS
from servetrace.analysis.metrics import REQUEST_COLUMNS
from servetrace.cli import app
from servetrace.errors import ExitCode
from servetrace.render.naming import Naming

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
REFERENCE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
# The pages a user reads: they describe the tool as it is (measurement history is in
# benchmarks/HISTORY.md, which may name sessions, commits and loads).
USER_PAGES = (
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "benchmarks" / "README.md",
)
# Every command the CLI declares (a new command without a README section fails here).
COMMANDS = tuple(
    info.name or typer.main.get_command_name(info.callback.__name__)
    for info in app.registered_commands
    if info.callback is not None
)
runner = CliRunner()


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_quick_start_is_a_user_install_then_the_ci_test_command() -> None:
    """First block: install from the clone and analyse a sample; second: the CI's test command."""
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    setup, tests = blocks("bash", quick_start)
    install, run = setup.strip().splitlines()
    assert install == "python3 -m venv .venv && . .venv/bin/activate && pip install '.[report]'"
    assert run == "servetrace analyze sample_traces/realistic.parquet"
    assert (ROOT / run.split()[-1]).is_file()
    dev_install, command = tests.strip().splitlines()
    assert dev_install == "pip install -e '.[test]'"
    # The core, then what the default run deselects: together, every test.
    assert command.endswith("python -m pytest && python -m pytest -m slow -n 0")
    assert "ruff check" in command and "ruff format --check" in command
    assert "mypy servetrace" in command
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.strip().splitlines()[-1] == command
    assert "pip install --quiet -e '.[test]'" in ci  # CI installs as the README says


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_a_readme_section(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.stdout
    assert f"servetrace {command}" in README


def test_every_rule_metric_column_naming_and_exit_code_is_documented() -> None:
    for rule in RULES:
        assert f"| `{rule}` |" in REFERENCE, rule  # a row of the rules table
    for metric in LATENCY_METRICS:
        row = f"| `{metric.name}` | `{metric.column}` |"
        assert row in REFERENCE, metric.name  # a row of the metrics table
    for column in REQUEST_COLUMNS:
        assert f"`{column}`" in REFERENCE, column
    for naming in Naming:
        assert naming.value in REFERENCE
    for code in ExitCode:
        assert f"| {int(code)} |" in README and f"| {int(code)} |" in REFERENCE


def test_readme_has_two_screenshots_and_its_links_resolve() -> None:
    # The report's summary, and the server's series on the trace's time axis.
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert images == ["docs/img/report-server-running.png", "docs/img/report-summary.png"]
    for page in USER_PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.name}: {target}"


# Measurement history (sessions, commit ids, load averages, issue numbers) is kept in
# benchmarks/HISTORY.md; the pages a user reads describe the tool as it is (S3 is a store).
HISTORY_WORDS = re.compile(
    r"\bsessions?\b|\bs(?:[0-24-9]|\d\d)\b|\bissue \d|(?:^|\s)#\d+\b|\bload (?:average )?\d"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",
    flags=re.I,
)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.name)
def test_user_pages_carry_no_measurement_history(page: Path) -> None:
    found = [m.group(0) for m in HISTORY_WORDS.finditer(page.read_text(encoding="utf-8"))]
    assert not found, found


def _text_block_after(command: str) -> list[str]:
    for block in blocks("text"):
        if block.startswith(f"$ {command}\n"):
            return block.splitlines()[1:]
    raise AssertionError(f"no README output block for {command!r}")


def _shows_real_output(command: str) -> None:
    """The README's block for ``command`` is what it prints (up to a closing ``…``)."""
    result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    shown = _text_block_after(command)
    printed = result.stdout.splitlines()
    if shown[-1] == "…":
        shown, printed = shown[:-1], printed[: len(shown) - 1]
    assert printed == shown


def test_readme_analyze_output_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    command = "servetrace analyze sample_traces/realistic.parquet"
    _shows_real_output(command)


@pytest.mark.slow
def test_readme_whatif_output_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    command = (
        "servetrace whatif tests/data/vidur/synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet "
        "--policy sjf --trace-limit max-running=128"
    )
    _shows_real_output(command)


def test_readme_validate_output_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    command = "servetrace validate sample_traces/realistic.parquet"
    _shows_real_output(command)


def test_readme_compare_output_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    command = (
        "servetrace compare sample_traces/policy_fcfs.parquet "
        "sample_traces/policy_chunked.parquet --metric ttft --metric itl --metric e2e"
    )
    _shows_real_output(command)


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


@pytest.mark.slow
def test_library_api_example_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python block: its asserts pin the numbers it shows."""
    (example,) = [b for b in blocks("python") if "import servetrace" in b]
    monkeypatch.chdir(ROOT)
    exec(compile(example, "README.md", "exec"), {})


def _check_blocks(text: str = README) -> list[tuple[str, list[str]]]:
    """Every output block of ``servetrace check`` in ``text``: its command and its lines."""
    found = []
    for block in blocks("text", text):
        if not block.startswith("$ servetrace check"):
            continue
        lines = block.splitlines()
        command = lines[0][2:]
        while command.endswith("\\"):
            lines.pop(0)
            command = command[:-1] + lines[0].strip()
        found.append((command, lines[1:]))
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "expected"), _check_blocks() + _check_blocks(REFERENCE), ids=lambda v: str(v)[:60]
)
def test_documented_check_outputs_are_real(
    command: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A passing or failing check shows its stdout; a usage error its stderr."""
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    shown = result.stdout if result.exit_code in (0, 1) else result.stderr
    assert shown.splitlines() == expected


def test_check_blocks_are_found() -> None:
    assert len(_check_blocks()) >= 2  # rules, inconclusive
    assert len(_check_blocks(REFERENCE)) >= 3  # bad rule, skip, unbounded number


def test_readme_server_metrics_lines_are_real(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The README's half-client example, rebuilt: a simulated trace and its series, then every
    # other request kept; each line the README shows is printed, in that order.
    import polars as pl

    monkeypatch.chdir(tmp_path)
    made = runner.invoke(
        app,
        [
            "simulate",
            "--requests",
            "300",
            "--rate",
            "4",
            "-o",
            "t.parquet",
            "--metrics-out",
            "m.prom",
        ],
    )
    assert made.exit_code == 0, made.output
    trace = pl.read_parquet("t.parquet")
    kept = trace["request_id"].unique().sort().gather_every(2).implode()
    trace.filter(pl.col("request_id").is_in(kept)).write_parquet("client.parquet")
    command = "servetrace analyze client.parquet --server-metrics m.prom"
    result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    printed = result.stdout.splitlines()
    at = [printed.index(line) for line in _text_block_after(command)]
    assert at == sorted(at)
