"""``compare`` and ``check`` end to end through the CLI, on the bundled sample traces."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

SAMPLES = Path(__file__).parents[2] / "sample_traces"
FCFS = str(SAMPLES / "policy_fcfs.parquet")
CHUNKED = str(SAMPLES / "policy_chunked.parquet")
OTHER = str(SAMPLES / "different_workload.parquet")
runner = CliRunner()
FAST = ["--resamples", "400"]


def test_compare_a_with_itself_finds_no_change() -> None:
    result = runner.invoke(app, ["compare", FCFS, FCFS, "-f", "json", *FAST])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["baseline"] == FCFS and report["candidates"] == [FCFS]
    assert report["workload"][FCFS]["verdict"] == "identical"
    assert report["workload"][FCFS]["paired"] is True
    assert report["seed"] == 0 and report["resamples"] == 400
    assert report["rows"], "rows must be reported"
    for row in report["rows"]:
        assert row["significant"] is False, row
        assert row["verdict"] == "no significant change"


def test_compare_policies_is_controlled_and_names_direction() -> None:
    result = runner.invoke(app, ["compare", FCFS, CHUNKED, "-f", "json", *FAST])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["workload"][CHUNKED]["verdict"] == "identical"
    rows = {(r["metric"], r["stat"]): r for r in report["rows"]}
    itl_p99 = rows[("itl", "p99")]
    assert itl_p99["verdict"] == "faster" and itl_p99["better"] == "lower"
    assert itl_p99["ratio"] == pytest.approx(59.1 / 214.2, rel=0.01)
    assert itl_p99["ci_low"] <= itl_p99["ratio"] <= itl_p99["ci_high"]
    assert itl_p99["unit"] == "ms"
    assert rows[("ttft", "p50")]["verdict"] == "slower"


def test_compare_different_workloads_warns_loudly() -> None:
    result = runner.invoke(app, ["compare", FCFS, OTHER, *FAST])
    assert result.exit_code == 0
    assert "warning:" in result.stderr and "different workloads" in result.stderr
    assert "may come from the load, not the policy" in result.stdout


def test_compare_markdown_for_pull_requests() -> None:
    result = runner.invoke(app, ["compare", FCFS, CHUNKED, "-f", "markdown", *FAST])
    assert result.exit_code == 0
    assert "|" in result.stdout and "faster" in result.stdout


def test_check_against_itself_passes() -> None:
    result = runner.invoke(
        app,
        [
            "check",
            FCFS,
            "--baseline",
            FCFS,
            "--max-regression",
            "ttft.p99:+10%",
            "--max-regression",
            "itl.p50:+2ms",
            *FAST,
        ],
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "check passed: 2 of 2 rules" in result.stdout


def test_check_mlperf_rule_in_one_line_and_json_contract() -> None:
    result = runner.invoke(
        app, ["check", CHUNKED, "--slo", "ttft.p99<=1s && tpot.p99<=200ms", "-f", "json"]
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["passed"] is False
    ttft, tpot = report["rules"]
    assert (ttft["rule"], ttft["kind"], ttft["passed"], ttft["unit"]) == (
        "ttft.p99<=1s",
        "slo",
        False,
        "ms",
    )
    assert ttft["value"] == pytest.approx(1348.9, abs=0.1) and ttft["limit"] == 1000
    assert ttft["baseline"] is None and ttft["significant"] is None
    assert tpot["passed"] is True
    assert result.stderr.strip().startswith("FAIL ttft.p99: 1349 ms > 1000 ms")


def test_check_regression_is_detected_against_a_trace_and_a_json_baseline(tmp_path) -> None:
    budget = ["--max-regression", "itl.p90:+10%"]
    against_trace = runner.invoke(app, ["check", CHUNKED, "--baseline", FCFS, *budget, *FAST])
    assert against_trace.exit_code == 1
    assert "FAIL itl.p90" in against_trace.stdout and "significant" in against_trace.stdout
    summary = tmp_path / "baseline.json"
    summary.write_text(runner.invoke(app, ["analyze", FCFS, "-f", "json"]).stdout)
    against_json = runner.invoke(
        app, ["check", CHUNKED, "--baseline", str(summary), *budget, "-f", "json"]
    )
    assert against_json.exit_code == 1
    rule = json.loads(against_json.stdout)["rules"][0]
    assert rule["baseline"] == pytest.approx(21.7, abs=0.1)
    assert rule["significant"] is None  # a summary has no samples to test


def test_check_junit_has_one_testcase_per_rule() -> None:
    result = runner.invoke(
        app, ["check", CHUNKED, "--slo", "ttft.p99<=1s, itl.p50<20ms", "-f", "junit"]
    )
    assert result.exit_code == 1
    root = ET.fromstring(result.stdout)
    cases = root.findall(".//testcase")
    assert len(cases) == 2
    assert len(root.findall(".//failure")) == 1


def test_check_bad_rule_exit_2_with_position() -> None:
    result = runner.invoke(app, ["check", FCFS, "--slo", "ttft.p99<=500xs"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "error:" in result.stderr and "^^" in result.stderr


def test_check_unreadable_input_exit_3(tmp_path) -> None:
    missing = runner.invoke(app, ["check", str(tmp_path / "nope.parquet"), "--slo", "ttft.p99<=1s"])
    assert missing.exit_code == 3
    bad_baseline = runner.invoke(
        app,
        [
            "check",
            FCFS,
            "--baseline",
            str(tmp_path / "x.parquet"),
            "--max-regression",
            "ttft.p99:+5%",
        ],
    )
    assert bad_baseline.exit_code == 3


def test_check_reads_rules_from_pyproject(tmp_path, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.servetrace.check]\nslo = ["ttft.p99<=3s", "cancelled.fraction<=0.01"]\n'
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["check", FCFS])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "check passed: 2 of 2 rules" in result.stdout


def test_check_without_rules_is_a_usage_error(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["check", FCFS])
    assert result.exit_code == 2 and "no rules to check" in result.stderr


@pytest.mark.slow  # several seconds: run by `pytest -m slow`
def test_same_seed_same_report_across_processes() -> None:
    """Seeded means reproducible: two fresh processes give the same comparison (string
    request ids get process-dependent internal keys, which must not leak into resamples).
    Descriptive means may differ in the last bits (parallel sums); the bootstrap may not."""
    import subprocess
    import sys

    command = [
        sys.executable,
        "-m",
        "servetrace",
        "compare",
        FCFS,
        CHUNKED,
        "-f",
        "json",
        "--metric",
        "itl",
        "--metric",
        "ttft",
        "--resamples",
        "300",
    ]
    first, second = (
        json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        for _ in range(2)
    )
    for row_a, row_b in zip(first["rows"], second["rows"], strict=True):
        for key in ("ci_low", "ci_high", "p_value", "significant", "verdict"):
            assert row_a[key] == row_b[key], (row_a["metric"], row_a["stat"], key)
        assert row_a["ratio"] == pytest.approx(row_b["ratio"], rel=1e-12)
    assert first["workload"] == second["workload"]


def test_shared_ids_of_another_workload_are_not_called_no_shared_requests() -> None:
    done = runner.invoke(
        app,
        [
            "compare",
            "sample_traces/policy_fcfs.parquet",
            "sample_traces/different_workload.parquet",
        ],
    )
    assert done.exit_code == 0, done.output
    assert "no shared requests" not in done.stdout
    assert "the 1500 shared request ids name other requests (1490 arrival offsets" in done.stdout
