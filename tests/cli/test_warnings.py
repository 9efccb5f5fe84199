"""Warnings are said once: a fact about many runs is one line naming how many, and
``-q/--quiet`` silences warnings (never errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.render.warnings import grouped_warnings
from tests.cli.test_startup import COMMANDS

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "tests" / "data" / "real" / "vllm-bench-llama33-70b-a100"


@pytest.mark.slow
def test_a_sweep_says_each_fact_once() -> None:
    done = runner.invoke(app, ["analyze", str(SWEEP)])
    assert done.exit_code == 0, done.output
    lines = done.stderr.splitlines()
    send_times = [line for line in lines if "send times" in line]
    # Five runs without start_times: one line, naming how many and which.
    assert len(send_times) == 1, send_times
    assert send_times[0].startswith("warning: 5 runs (tp8_pp1_sharegpt_qps_01, ")
    assert "throughput uses the run's declared duration" in send_times[0]
    assert len(lines) == len(set(lines))


@pytest.mark.slow
def test_quiet_prints_no_warning_and_the_same_report() -> None:
    loud = runner.invoke(app, ["analyze", str(SWEEP)])
    quiet = runner.invoke(app, ["analyze", str(SWEEP), "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert quiet.stdout == loud.stdout
    # The next command is not quiet: -q lasts one command.
    assert "warning:" in runner.invoke(app, ["analyze", str(SWEEP)]).stderr


def test_quiet_keeps_errors(tmp_path: Path) -> None:
    done = runner.invoke(app, ["analyze", str(tmp_path / "missing.parquet"), "--quiet"])
    assert done.exit_code == 3 and done.stderr.startswith("error:")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_quiet(command: str) -> None:
    assert "--quiet" in runner.invoke(app, [command, "--help"]).stdout


def test_grouping_names_a_few_runs_and_drops_the_file_prefix() -> None:
    notes = [
        (f"run{i}", f"data/run{i}.json: no send times", [f"data/run{i}.json"]) for i in range(5)
    ]
    notes.append(("run2", "25 requests carried several tokens a chunk", ["data/run2.json"]))
    notes.append(("", "summary.json: a summary, not a per-request file", []))
    assert grouped_warnings(notes) == [
        "5 runs (run0, run1, run2, …): no send times",
        "run2: 25 requests carried several tokens a chunk",
        "summary.json: a summary, not a per-request file",
    ]
