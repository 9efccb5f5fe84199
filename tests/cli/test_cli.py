"""The command line through Typer's runner: exit codes, stdout and stderr apart."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.analysis.metrics import REQUEST_COLUMNS
from servetrace.cli import app
from servetrace.version import SCHEMA_VERSION, __version__
from tests.analysis.test_lifecycle import CASES
from tests.conftest import MS, events, make_request

EDGE = Path(__file__).parent.parent / "data" / "edge"
runner = CliRunner()


@pytest.fixture
def trace(tmp_path: Path, worked_example: pl.DataFrame) -> Path:
    path = tmp_path / "worked.parquet"
    worked_example.write_parquet(path)
    return path


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Completed, cancelled, in-flight and one invalid request, with a policy column."""
    frame = events(
        make_request("a", admission=10, first=50, ticks=[60, 70], complete=70, policy="x"),
        make_request("b", admission=20, first=90, ticks=[100], complete=100, policy="y"),
        make_request("c", admission=5, cancel=40, policy="x"),
        make_request("d", admission=5, first=30, policy="y"),
        CASES["token_before_admission"],
    )
    path = tmp_path / "mixed.parquet"
    frame.write_parquet(path)
    return path


def test_analyze_table_exit_0(trace: Path) -> None:
    result = runner.invoke(app, ["analyze", str(trace)])
    assert result.exit_code == 0, result.stderr
    assert "ttft" in result.stdout and "80.00" in result.stdout
    assert "queue_wait 30.0 ms" in result.stdout
    # one completed request: the only diagnostic is the small-sample warning
    assert result.stderr.startswith("warning: only 1 completed requests")


def test_analyze_json_contract(mixed: Path) -> None:
    result = runner.invoke(app, ["analyze", str(mixed), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["servetrace_version"] == __version__
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["inputs"] == [str(mixed)]
    assert report["accounting"] == {
        "rows": 21,
        "rows_analyzed": 17,
        "rows_quarantined": 4,
        "requests": 5,
        "requests_valid": 4,
        "requests_invalid": 1,
    }
    assert report["outcomes"] == {"completed": 2, "cancelled": 1, "in_flight": 1, "errored": 0}
    assert report["cancelled_in"]["prefill"] == 1
    assert report["violations"]["token_before_admission"]["examples"] == ["bad"]
    ttft = report["metrics"]["ttft"]
    assert ttft["unit"] == "ms"
    assert set(ttft) == {
        "unit",
        "count",
        "mean",
        "std",
        "min",
        "p50",
        "p90",
        "p95",
        "p99",
        "p99_9",
        "max",
        "ci95",  # the percentile intervals (the contract only grows)
    }
    assert set(report["survival"]) == {"ttft", "e2e", "queue_wait"}
    assert report["survival"]["ttft"]["estimator"] == "kaplan-meier"
    assert ttft["count"] == 2 and ttft["mean"] == pytest.approx(70.0)
    for name in ("queue_wait", "prefill", "ttft", "decode", "response", "e2e", "itl", "tpot"):
        assert report["metrics"][name]["unit"] == "ms"
    assert {"throughput", "concurrency", "formula"} <= set(report)
    assert report["throughput"]["unit"]["requests_per_s"] == "req/s"


def test_requests_out_and_quarantine_out(mixed: Path, tmp_path: Path) -> None:
    requests, quarantine = tmp_path / "r.parquet", tmp_path / "q.csv"
    result = runner.invoke(
        app,
        [
            "analyze",
            str(mixed),
            "--requests-out",
            str(requests),
            "--quarantine-out",
            str(quarantine),
            "-f",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    per_request = pl.read_parquet(requests)
    assert list(per_request.columns[: len(REQUEST_COLUMNS)]) == list(REQUEST_COLUMNS)
    assert "policy" in per_request.columns
    assert per_request.height == 4
    rows = pl.read_csv(quarantine)
    assert rows["rule"].unique().to_list() == ["token_before_admission"]
    assert rows.height == 4


def test_by_column_gives_one_summary_per_group(mixed: Path) -> None:
    result = runner.invoke(app, ["analyze", str(mixed), "--by", "policy", "-f", "json"])
    groups = json.loads(result.stdout)["by"]["groups"]
    assert [g["value"] for g in groups] == ["x", "y"]
    assert [g["outcomes"]["completed"] for g in groups] == [1, 1]


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "csv"])
def test_every_format_renders(mixed: Path, fmt: str) -> None:
    result = runner.invoke(app, ["analyze", str(mixed), "--format", fmt])
    assert result.exit_code == 0, result.stderr
    assert "ttft" in result.stdout


def test_strict_exits_1_on_violation(mixed: Path) -> None:
    result = runner.invoke(app, ["analyze", str(mixed), "--strict"])
    assert result.exit_code == 1
    assert "token_before_admission" in result.stdout


def test_validate_exit_codes(trace: Path, mixed: Path) -> None:
    ok = runner.invoke(app, ["validate", str(trace)])
    assert ok.exit_code == 0 and "1 valid, 0 invalid" in ok.stdout
    bad = runner.invoke(app, ["validate", str(mixed)])
    assert bad.exit_code == 1 and "token_before_admission: 1 requests" in bad.stdout


def test_usage_error_exit_2(trace: Path) -> None:
    result = runner.invoke(app, ["analyze", str(trace), "--format", "yaml"])
    assert result.exit_code == 2
    assert result.stdout == ""
    bad_map = runner.invoke(app, ["analyze", str(trace), "--column", "ts"])
    assert bad_map.exit_code == 2
    assert "error: --column expects KEY=VALUE" in bad_map.stderr


@pytest.mark.parametrize(
    "case",
    [
        "empty.csv",
        "header_only.csv",
        "missing_columns.csv",
        "unknown_event.csv",
        "text_in_ts.csv",
        "corrupt.parquet",
        "broken_line.jsonl",
        "no_trace_dir",
        "duplicate_header.csv",
    ],
)
def test_unreadable_input_exit_3_one_error_line_no_traceback(case: str) -> None:
    result = runner.invoke(app, ["analyze", str(EDGE / case)])
    assert result.exit_code == 3
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and case in lines[0]
    assert all(line.startswith(("error: ", "hint: ")) for line in lines)
    assert "Traceback" not in result.stderr


def test_internal_error_exit_4(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import servetrace.runs.load as inputs  # canonical traces are read there (one run)

    def boom(*args, **kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(inputs, "analyze_paths", boom)
    result = runner.invoke(app, ["analyze", str(trace)])
    assert result.exit_code == 4
    assert "internal error" in result.stderr and "simulated bug" in result.stderr
    assert result.stdout == ""


def test_column_mapping_flags() -> None:
    result = runner.invoke(
        app,
        [
            "analyze",
            str(EDGE / "aliases_and_units.csv"),
            "--column",
            "request_id=req",
            "--column",
            "event=kind",
            "--column",
            "ts=time_ms",
            "--time-unit",
            "ms",
            "-f",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["metrics"]["ttft"]["mean"] == pytest.approx(80.0)


def test_warnings_go_to_stderr_and_json_stays_clean(tmp_path: Path) -> None:
    frame = events(
        make_request("a", admission=0.00001, first=0.00002, complete=0.00003),
        make_request("b", admission=0.00001, first=0.00002, complete=0.00003),
    )
    path = tmp_path / "tiny.parquet"
    frame.write_parquet(path)
    result = runner.invoke(app, ["analyze", str(path), "-f", "json"])
    assert result.exit_code == 0
    json.loads(result.stdout)
    assert "warning:" in result.stderr and "--time-unit" in result.stderr


def test_goodput_flag(trace: Path) -> None:
    result = runner.invoke(
        app,
        ["analyze", str(trace), "--goodput", "ttft<=100ms", "--goodput", "tpot<=4ms", "-f", "json"],
    )
    assert result.exit_code == 0, result.stderr
    good = json.loads(result.stdout)["goodput"]
    assert good["requests_met"] == 0  # tpot is 5 ms
    assert good["attainment_by_target"]["ttft<=100ms"] == 1.0


def test_every_command_has_help() -> None:
    for command in ("analyze", "validate"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0 and "Usage" in result.stdout
    assert MS == 1_000_000
