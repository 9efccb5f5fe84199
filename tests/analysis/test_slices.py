"""Per-slice figures, hand-computed; the same figures streamed and in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.slices import parse_slice, slice_figures
from servetrace.analysis.summary import GoodputTarget
from servetrace.cli import app
from servetrace.errors import UsageError
from tests.conftest import MS, events, make_request
from tests.factories import synthetic_events

S = 1_000_000_000


def _trace():
    return events(
        make_request("r1", arrival=0, admission=0, first=100, ticks=[200], complete=200),
        make_request("r2", arrival=500, admission=600, first=700, ticks=[900], complete=900),
        make_request(
            "r3", arrival=1200, admission=1200, first=1300, ticks=[1400, 1500], complete=1500
        ),
    )


def test_hand_computed_slices() -> None:
    analysis = analyze_events(_trace())
    target = GoodputTarget("ttft", "<=", 150 * MS)
    frame = slice_figures(analysis, S, events=_trace(), targets=(target,))
    first, second = frame.to_dicts()
    assert (first["start_ns"], first["end_ns"]) == (0, S)
    assert (second["start_ns"], second["end_ns"]) == (S, 1500 * MS)  # cut by the trace end
    assert (first["arrivals"], first["completed"]) == (2, 2)
    assert first["requests_per_s"] == 2.0
    assert first["output_tokens_per_s"] == 4.0
    assert first["goodput_requests_per_s"] == 1.0
    assert first["ttft_p50_ns"] == 150 * MS and first["ttft_p99_ns"] == 199 * MS
    assert first["tpot_p50_ns"] == 150 * MS
    assert first["queued_mean"] == pytest.approx(0.1)  # r2 queued 100 ms of 1 s
    assert first["running_mean"] == pytest.approx(0.5)  # r1 200 ms + r2 300 ms
    assert first["in_system_mean"] == pytest.approx(0.6)
    assert (second["arrivals"], second["completed"]) == (1, 1)
    assert second["requests_per_s"] == 2.0  # one request in half a second
    assert second["output_tokens_per_s"] == 6.0
    assert second["goodput_requests_per_s"] == 2.0
    assert second["ttft_p50_ns"] == 100 * MS
    assert second["queued_mean"] == 0.0
    assert second["running_mean"] == pytest.approx(0.6)


def test_without_targets_or_ticks_those_columns_are_null() -> None:
    frame = slice_figures(analyze_events(_trace()), S)
    assert frame["goodput_requests_per_s"].null_count() == frame.height
    assert frame["output_tokens_per_s"].null_count() == frame.height


def test_streamed_slices_equal_in_memory(tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    synthetic_events(300, cancelled=10).sort("ts").write_parquet(trace)
    runner = CliRunner()

    def run(*extra: str) -> list[dict]:
        result = runner.invoke(app, ["analyze", str(trace), "--slice", "2s", "-f", "json", *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["slices"]

    memory = run("--no-streaming")
    assert memory == run("--streaming", "--batch-rows", "1000")
    assert sum(row["arrivals"] for row in memory) == 300
    assert memory[0]["start_s"] == 0.0 and memory[1]["start_s"] == 2.0


def test_slice_widths() -> None:
    assert parse_slice("10s") == 10 * S
    assert parse_slice("500ms") == 500 * MS
    assert parse_slice("2m") == 120 * S
    assert parse_slice("1min") == parse_slice("60s") == parse_slice("60000000000ns")
    assert parse_slice("1h") == 3600 * S
    assert parse_slice("1000us") == MS
    for bad, message in {
        "0s": "a slice must be positive",
        "-1s": "a slice must be positive",
        "abc": "give a duration such as",
        "0.1ms": "a slice is at least 1 ms",
        "1ns": "a slice is at least 1 ms",
        "1e30s": "longer than any trace",
    }.items():
        with pytest.raises(UsageError, match=message):
            parse_slice(bad)


def test_table_markdown_and_csv(tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    _trace().write_parquet(trace)
    runner = CliRunner()
    table = runner.invoke(app, ["analyze", str(trace), "--slice", "1s"])
    assert table.exit_code == 0, table.output
    assert "per slice" in table.stdout and "ttft p99" in table.stdout
    markdown = runner.invoke(app, ["analyze", str(trace), "--slice", "1s", "-f", "markdown"])
    assert "| start (s) |" in markdown.stdout
    csv = runner.invoke(app, ["analyze", str(trace), "--slice", "1s", "-f", "csv"])
    lines = csv.stdout.strip().splitlines()
    assert lines[0].startswith("start_s,end_s,arrivals") and len(lines) == 3
