"""Errored requests: a terminal ``error`` event, counted by code.

Hand-built traces: the numbers below are read off the rows, not recomputed.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.analysis.errors import code_label, errors_phrase
from servetrace.cli import app
from tests.conftest import MS, events, make_request

runner = CliRunner()
LEPTON = Path(__file__).parent.parent / "data" / "real" / "llmperf-leaderboard" / "individual"


def _errored(rid: str, at: float, kind: str = "error", **attributes: object) -> list[dict]:
    """A request that fails at ``at`` ms (no admission: client-side)."""
    rows = make_request(rid, cancel=at, **attributes)
    for row in rows:
        if row["event"] == "cancellation":
            row["event"] = kind
    return rows


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """2 completed, 3 × 429, 1 × 503 (after one token), 1 cancelled, 1 typed error."""
    frame = events(
        make_request("a", first=50, ticks=[60, 70], complete=70),
        make_request("b", first=30, ticks=[40], complete=40),
        _errored("e1", 5, error_code=429),
        _errored("e2", 6, "errored", error_code=429),  # alias
        _errored("e3", 7, "failed", error_code=429),  # alias
        make_request("e4", first=20, cancel=90, error_code=503),
        make_request("c", first=15, cancel=25),
        _errored("t", 12, error_type="TimeoutError"),
    )
    # e4 got one token and then the server failed: an error event, not a cancellation.
    frame = frame.with_columns(
        pl.when((pl.col("request_id") == "e4") & (pl.col("event") == "cancellation"))
        .then(pl.lit("error"))
        .otherwise(pl.col("event"))
        .alias("event"),
        pl.col("error_code").cast(pl.Int64),
    )
    path = tmp_path / "errors.parquet"
    frame.write_parquet(path)
    return path


def test_error_is_terminal_from_any_state_and_not_a_cancellation(trace: Path) -> None:
    analysis = servetrace.analyze(trace)
    summary = analysis.summary
    assert summary.outcomes == {"completed": 2, "cancelled": 1, "in_flight": 0, "errored": 5}
    assert summary.accounting.requests_invalid == 0
    assert summary.errors == {"429": 3, "503": 1, "TimeoutError": 1}
    assert summary.cancelled["count"] == 1
    # e2e defined for errored requests: time to the error...
    rows = analysis.requests.filter(pl.col("outcome") == "errored").sort("request_id")
    assert rows["e2e_ns"].to_list() == [5 * MS, 6 * MS, 7 * MS, 90 * MS, 12 * MS]
    assert summary.errored["time_to_error_ns"]["max"] == 90 * MS
    assert summary.errored["output_tokens_delivered"] == 1
    # ...but they stay out of the latency statistics (completed a and b only).
    assert summary.metrics["e2e"]["count"] == 2
    assert summary.metrics["e2e"]["max"] == 70 * MS
    assert summary.metrics["ttft"]["count"] == 2
    # and out of completed throughput: 2 requests over 0..90 ms
    assert summary.throughput["requests_per_s"] == pytest.approx(2 / 0.090)


def test_error_after_completion_is_invalid(tmp_path: Path) -> None:
    rows = make_request("x", first=10, complete=20)
    rows.append({"request_id": "x", "event": "error", "ts": 30 * MS})
    path = tmp_path / "double.parquet"
    events(rows).write_parquet(path)
    summary = servetrace.analyze(path).summary
    assert summary.accounting.requests_invalid == 1
    assert "duplicate_terminal" in summary.violations


def test_json_counts_errors_by_code(trace: Path) -> None:
    result = runner.invoke(app, ["analyze", str(trace), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["outcomes"]["errored"] == 5
    assert report["errors"] == {"429": 3, "503": 1, "TimeoutError": 1}
    assert report["errored"]["count"] == 5
    assert report["errored"]["time_to_error"]["max"] == 90.0  # ms


def test_table_markdown_and_csv_say_errored_by_code(trace: Path) -> None:
    table = runner.invoke(app, ["analyze", str(trace)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.stderr
    want = "5 errored (3 × HTTP 429, 1 × HTTP 503, 1 × TimeoutError)"
    assert want in table.stdout
    assert "1 cancelled" in table.stdout
    md = runner.invoke(app, ["analyze", str(trace), "--format", "markdown"])
    assert want in md.stdout
    assert "- errored: 3 × HTTP 429, 1 × HTTP 503, 1 × TimeoutError" in md.stdout
    out = runner.invoke(app, ["analyze", str(trace), "--format", "csv"])
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(out.stdout))}
    assert rows["errors[HTTP 429]"]["count"] == "3"
    assert rows["errors[HTTP 429]"]["unit"] == "requests"
    assert rows["errors[TimeoutError]"]["count"] == "1"


def test_no_errors_changes_nothing_in_the_table(tmp_path: Path) -> None:
    path = tmp_path / "ok.parquet"
    events(make_request("a", first=5, complete=5)).write_parquet(path)
    result = runner.invoke(app, ["analyze", str(path)])
    assert "errored" not in result.stdout
    report = json.loads(runner.invoke(app, ["analyze", str(path), "--format", "json"]).stdout)
    assert report["outcomes"]["errored"] == 0 and report["errors"] == {}


def test_by_groups_count_their_own_errors(trace: Path, tmp_path: Path) -> None:
    frame = pl.read_parquet(trace).with_columns(
        pl.when(pl.col("request_id").is_in(["e1", "a"]))
        .then(pl.lit("x"))
        .otherwise(pl.lit("y"))
        .alias("policy")
    )
    path = tmp_path / "by.parquet"
    frame.write_parquet(path)
    groups = servetrace.analyze(path, by="policy").groups
    assert groups is not None
    assert groups["x"].errors == {"429": 1} and groups["x"].outcomes["errored"] == 1
    assert groups["y"].errors == {"429": 2, "503": 1, "TimeoutError": 1}
    assert groups["y"].errored["count"] == 4


def test_lepton_429s_are_errored_not_cancelled() -> None:
    """The public LLMPerf Lepton run: 130 of 150 requests were refused with HTTP 429."""
    analysis = servetrace.analyze(LEPTON / "lepton_7b.json")
    assert analysis.summary.outcomes["errored"] == 130
    assert analysis.summary.outcomes["cancelled"] == 0
    assert analysis.summary.errors == {"429": 130}
    result = runner.invoke(app, ["analyze", str(LEPTON / "lepton_7b.json")])
    assert "130 errored (130 × HTTP 429), 0 cancelled" in result.stdout


def test_code_labels() -> None:
    assert code_label("429") == "HTTP 429"
    assert code_label("-100") == "code -100"
    assert code_label("TimeoutError") == "TimeoutError"
    assert errors_phrase({"429": 130, "-1": 2}) == "130 × HTTP 429, 2 × code -1"
