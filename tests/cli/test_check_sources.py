"""``check`` says where its rules and baseline came from when a configuration file gave
any of them: rules of servetrace.toml and of --slo are merged, never silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
CANDIDATE = str(SAMPLES / "policy_chunked.parquet")


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "servetrace.toml"
    config.write_text(
        "[check]\n"
        f'baseline = "{(SAMPLES / "policy_fcfs.parquet").as_posix()}"\n'
        'slo = ["ttft.p99<=2s && tpot.p99<=200ms"]\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    return config


def test_rules_of_the_file_and_the_command_line_are_counted(configured: Path) -> None:
    done = runner.invoke(
        app, ["check", CANDIDATE, "--slo", "e2e.p50<=30s", "--max-regression", "ttft.p99:+10%"]
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == (
        f"rules: 2 from {configured}, 2 from the command line; baseline from {configured}"
    )
    report = json.loads(runner.invoke(app, ["check", CANDIDATE, "-f", "json"]).stdout)
    assert report["rule_sources"] == [{"from": str(configured), "rules": 2}]
    assert report["baseline_from"] == str(configured)


def test_rules_only_from_the_command_line_need_no_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["check", CANDIDATE, "--slo", "e2e.p50<=30s"])
    assert done.exit_code == 0, done.output
    assert "rules:" not in done.stdout
    report = json.loads(
        runner.invoke(app, ["check", CANDIDATE, "--slo", "e2e.p50<=30s", "-f", "json"]).stdout
    )
    assert report["rule_sources"] == [{"from": "the command line", "rules": 1}]
    assert report["baseline_from"] is None
