"""capacity on a real vLLM sweep: never above what a run achieved, and a table that fits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
TP8 = Path(__file__).resolve().parents[2] / "tests/data/real/vllm-bench-llama33-70b-a100/01_tp8_pp1"


@pytest.mark.slow
def test_capacity_is_never_above_the_rate_served() -> None:
    # Every finite run meets ttft<=200ms; qps_16 was offered 16 req/s but served 6.33.
    args = ["capacity", str(TP8), "--goodput", "ttft<=200ms", "-q"]
    done = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.output
    assert (
        "capacity at 90% SLO attainment (ttft<=200ms): at most 6.33 req/s, what qps_16 "
        "achieved: its offered 16.00 req/s was not reached" in done.stdout
    )
    assert "at least 16" not in done.stdout
    table = [line for line in done.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80
    assert "left out to fit 80 columns: errored" in done.stdout
    report = json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)
    assert report["capacity"]["bound"] == "achieved"
    assert report["capacity"]["limited_by"] == "qps_16"
    assert round(report["capacity"]["requests_per_s"], 2) == 6.33
