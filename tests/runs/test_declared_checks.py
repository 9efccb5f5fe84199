"""Declared and reported figures are checked as measured ones are: a vLLM result's
duration of 1e30 s (2e-28 req/s), a concurrency of 2.5 or -3, a summary's negative P99 or
a request count of 1e30 refuse the run with one line naming the file and the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.sources.conftest import write_json

runner = CliRunner()
PEERS = Path(__file__).resolve().parent.parent / "data" / "peers"


def _refused(target: Path, path: Path, field: str) -> None:
    result = runner.invoke(app, ["analyze", str(target)])
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert str(path) in line and f"'{field}'" in line, line


def _vllm_result(**scalars: Any) -> dict[str, Any]:
    return {
        "backend": "vllm",
        "request_rate": "inf",
        "ttfts": [0.1, 0.2],
        "itls": [[0.01], [0.01, 0.02]],
        "output_lens": [2, 3],
        **scalars,
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("duration", 1e30),
        ("duration", -5.0),
        ("max_concurrency", 2.5),
        ("max_concurrency", -3),
        ("num_prompts", 1e30),
        ("completed", float("nan")),
        ("request_rate", -1.0),
    ],
)
def test_vllm_declared_facts(tmp_path: Path, field: str, value: float) -> None:
    path = write_json(tmp_path, "bench.json", _vllm_result(**{field: value}))
    _refused(path, path, field)


def test_vllm_declared_facts_in_range_are_kept(tmp_path: Path) -> None:
    doc = _vllm_result(duration=2.0, max_concurrency=8, num_prompts=2, completed=2)
    path = write_json(tmp_path, "bench.json", doc)
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["throughput"]["requests_per_s"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("metric", "stat", "value", "field"),
    [
        ("time_to_first_token", "p99", -12.5, "time_to_first_token.p99"),
        ("completed_request_count", "avg", 1e30, "completed_request_count.avg"),
        ("request_throughput", "avg", float("inf"), "request_throughput.avg"),
    ],
)
def test_summary_reported_figures(
    tmp_path: Path, metric: str, stat: str, value: float, field: str
) -> None:
    folder = tmp_path / "lonely"
    folder.mkdir()
    path = folder / "profile_export_aiperf.json"
    shutil.copy(PEERS / "aiperf_s1_conc8" / "profile_export_aiperf.json", path)
    doc = json.loads(path.read_text())
    records = doc.get("records", doc)
    records.setdefault(metric, {"unit": "requests"})[stat] = value
    path.write_text(json.dumps(doc))
    _refused(path, path, field)
