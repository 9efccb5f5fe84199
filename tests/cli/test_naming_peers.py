"""``--naming TOOL`` puts each figure under the name the tool gives the same quantity:
checked against each tool's own summary of the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
PEERS = Path(__file__).resolve().parents[2] / "tests" / "data" / "peers"


@pytest.mark.parametrize(
    ("folder", "naming", "summary"),
    [
        ("aiperf_s1_conc8", "aiperf", "profile_export_aiperf.json"),
        ("genai_perf_s1_conc8", "genai-perf", "profile_export_genai_perf.json"),
    ],
)
def test_request_latency_is_the_tools_own(folder: str, naming: str, summary: str) -> None:
    done = runner.invoke(app, ["analyze", str(PEERS / folder), "--naming", naming, "-f", "json"])
    assert done.exit_code == 0, done.output
    ours = json.loads(done.stdout)["metrics"]["request_latency"]
    theirs = json.loads((PEERS / folder / summary).read_text(encoding="utf-8"))["request_latency"]
    scale = 1e-6 if theirs.get("unit") == "ns" else 1.0  # ours in ms
    for stat in ("p50", "p90", "p99"):
        assert ours[stat] == pytest.approx(theirs[stat] * scale, rel=1e-9), stat
