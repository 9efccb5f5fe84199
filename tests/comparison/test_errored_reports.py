"""Errors are not cancellations in every report: LLMPerf's Lepton run
(130 × HTTP 429 of 150 requests) through analyze, compare, check and report via the CLI,
and the errored metric in the compare/check catalog."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from servetrace.rules.evaluate import evaluate

LLMPERF = Path(__file__).resolve().parent.parent / "data" / "real" / "llmperf-leaderboard"
LEPTON = str(LLMPERF / "individual" / "lepton_7b.json")
TOGETHER = str(LLMPERF / "individual" / "together_13b.json")  # 149 completed, 1 × code -1

runner = CliRunner()


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def _raw_429s() -> int:
    rows = json.loads(Path(LEPTON).read_text())
    return sum(1 for row in rows if row.get("error_code") == 429)


def test_analyze_counts_429s_as_errored_not_cancelled() -> None:
    assert _raw_429s() == 130  # LLMPerf's own rows
    code, out, _ = _run("analyze", LEPTON)
    assert code == 0
    assert "20 completed, 130 errored (130 × HTTP 429), 0 cancelled" in out
    assert "errored: 130 × HTTP 429 (failed, not cancelled" in out
    code, out, _ = _run("analyze", LEPTON, "-f", "json")
    doc = json.loads(out)
    assert doc["outcomes"] == {"completed": 20, "cancelled": 0, "in_flight": 0, "errored": 130}
    assert doc["errors"] == {"429": 130}
    assert doc["cancelled"]["count"] == 0


def test_compare_shows_errored_by_code_and_as_a_metric() -> None:
    code, out, _ = _run("compare", TOGETHER, LEPTON)
    assert code == 0
    assert "Errored (failed, not cancelled): baseline 1 × code -1; candidate 130 × HTTP 429" in out
    row = next(line for line in out.splitlines() if line.startswith("errored   count"))
    assert re.search(r"\b1\s+130\b", row) and "worse" in row
    assert "cancelled.count" in out  # no change in cancellations: none on either side
    code, out, _ = _run("compare", TOGETHER, LEPTON, "-f", "json")
    doc = json.loads(out)
    (label,) = doc["candidates"]
    assert doc["errors"][label] == {"baseline": {"-1": 1}, "candidate": {"429": 130}}
    rows = {(r["metric"], r["stat"]): r for r in doc["rows"]}
    assert rows[("errored", "count")]["baseline"] == 1
    assert rows[("errored", "count")]["candidate_value"] == 130
    assert rows[("errored", "fraction")]["candidate_value"] == pytest.approx(130 / 150)
    assert rows[("errored", "fraction")]["significant"]
    assert rows[("cancelled", "count")]["candidate_value"] == 0
    code, out, _ = _run("compare", TOGETHER, LEPTON, "-f", "markdown")
    assert "candidate 130 × HTTP 429" in out


def test_check_gates_on_errored_fraction() -> None:
    code, out, _ = _run("check", LEPTON, "--slo", "errored.fraction<=1%")
    assert code == 1 and "FAIL" in out and "errored.fraction" in out
    code, _, _ = _run("check", TOGETHER, "--slo", "errored.fraction<=1%")
    assert code == 0  # 1 of 150 = 0.67 %
    analysis = servetrace.analyze(LEPTON)
    result = evaluate(analysis, "errors.count<=0")  # alias of errored
    assert not result.passed and result.results[0].value == 130
    # a JSON baseline counts errored requests in the fraction's denominator
    document = {
        "metrics": {},
        "outcomes": {"completed": 20, "cancelled": 0, "in_flight": 0, "errored": 130},
    }
    budget = evaluate(analysis, "errored.fraction:+0, cancelled.fraction:+0", document)
    errored, cancelled = budget.results
    assert errored.baseline == pytest.approx(130 / 150) and errored.passed
    assert cancelled.baseline == 0 and cancelled.passed


def test_report_says_errored_in_summary_and_comparison(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code, _, err = _run("report", TOGETHER, LEPTON, "-o", str(out))
    assert code == 0, err
    page = unescape(out.read_text())
    assert "20 completed, 130 errored (130 × HTTP 429), 0 cancelled" in page
    assert "Errored (failed, not cancelled): baseline 1 × code -1; candidate 130 × HTTP 429" in page
