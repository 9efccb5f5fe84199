"""``analyze --slice --server-metrics``: the server's per-slice figures beside the trace's in
the table, Markdown, JSON and CSV; without --slice (or without the flag) nothing changes."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.analysis.test_server_views import write_hand

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    trace, _, prom = write_hand(tmp_path_factory.mktemp("hand"))
    return str(trace), str(prom)


def _analyze(files: tuple[str, str], *more: str) -> str:
    done = runner.invoke(
        app,
        ["analyze", files[0], "--server-metrics", files[1], "--clock-offset-ms", "0", *more],
    )
    assert done.exit_code == 0, done.output
    return done.stdout


def test_json_has_the_server_slices(files: tuple[str, str]) -> None:
    report = json.loads(_analyze(files, "--slice", "1s", "-f", "json"))
    rows = report["server_slices"]["rows"]
    assert [r["start_s"] for r in rows] == [0, 1, 2] and rows[-1]["end_s"] == 2.7
    assert [r["server_running_mean"] for r in rows] == [0, 1, 2]
    assert [r["trace_running_mean"] for r in rows] == [0, 1, 1]
    assert [r["server_prompt_tokens"] for r in rows] == [0, 10, 30]
    assert [r["trace_prompt_tokens"] for r in rows] == [0, 10, 20]
    assert report["server_slices"]["unavailable"]["server_preemptions"] == (
        "no vllm:num_preemptions_total series"
    )
    assert len(report["slices"]) == len(rows)  # beside the trace's own slices
    plain = json.loads(_analyze(files, "-f", "json"))
    assert "server_slices" not in plain


def test_table_and_markdown_show_server_beside_trace(files: tuple[str, str]) -> None:
    table = _analyze(files, "--slice", "1s")
    assert "per slice, server (s) beside trace (t)" in table
    head = next(line for line in table.splitlines() if "waiting (s)" in line)
    assert "running (s)" in head and "running (t)" in head and "preempted (s)" not in head
    assert "unavailable: server_preemptions (no vllm:num_preemptions_total series)" in table
    markdown = _analyze(files, "--slice", "1s", "-f", "markdown")
    assert "#### server per slice" in markdown
    assert "| 2.00 | 2.70 | 1 | 0.00 | 0.00 | 2.00 | 1.00 | 1 | 1 | 0 | 30 | 20 | 2 |" in markdown


def test_csv_adds_the_server_columns(files: tuple[str, str]) -> None:
    rows = list(csv.DictReader(io.StringIO(_analyze(files, "--slice", "1s", "-f", "csv"))))
    assert len(rows) == 3
    assert "arrivals" in rows[0] and "server_waiting_mean" in rows[0]
    assert [r["server_successes"] for r in rows] == ["0.0", "1.0", "1.0"]
    assert [r["server_preemptions"] for r in rows] == ["", "", ""]
