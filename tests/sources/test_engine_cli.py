"""The engine formats through the command line: no --from, folders, databases, exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

from .engine_writers import sample_requests, vllm_span, write_otlp

ENGINES = Path(__file__).resolve().parent.parent / "data" / "engines"
runner = CliRunner()

INPUTS = {
    "otlp-vllm": (ENGINES / "otlp" / "spans.jsonl", "otlp", "server"),
    "otlp-genai": (ENGINES / "otlp" / "genai_client.jsonl", "otlp", "client"),
    "otlp-folder": (ENGINES / "otlp" / "rotated", "otlp", "server"),
    "sglang-folder": (ENGINES / "sglang", "sglang", "server"),
    "sglang-file": (
        ENGINES / "sglang-newer" / "sglang-request-metrics-20260302_10.log",
        "sglang",
        "server",
    ),
    "trtllm": (ENGINES / "trtllm" / "perf_metrics.json", "trtllm", "server"),
    "mlcommons": (ENGINES / "mlcommons" / "events.db", "mlcommons", "client"),
    "mlcommons-removed": (
        ENGINES / "mlcommons" / "events_removed_schema.db",
        "mlcommons",
        "client",
    ),
}


@pytest.mark.parametrize("key", list(INPUTS))
def test_analyze_without_from(key: str) -> None:
    path, _, source = INPUTS[key]
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["source"] == source
    assert report["accounting"]["requests_invalid"] == 0
    assert report["outcomes"]["completed"] == 6


@pytest.mark.parametrize("key", list(INPUTS))
def test_analyze_with_from(key: str) -> None:
    path, fmt, _ = INPUTS[key]
    result = runner.invoke(app, ["analyze", str(path), "--from", fmt, "--format", "json"])
    assert result.exit_code == 0, result.stderr


def test_vllm_spans_table_shows_the_breakdown_and_why_itl_is_missing() -> None:
    result = runner.invoke(app, ["analyze", str(INPUTS["otlp-vllm"][0])])
    assert result.exit_code == 0, result.stderr
    rows = {line.split("│")[1].strip() for line in result.stdout.splitlines() if "│" in line}
    assert {"queue_wait", "prefill", "ttft", "decode", "tpot", "e2e"} <= rows
    assert "itl" not in rows
    assert "no per-token times in this trace, so no itl" in result.stdout
    assert "the ITL distribution is unavailable (not zero)" in result.stderr
    assert "no per-token times" in result.stderr


def test_vllm_spans_json_has_no_itl_and_says_so() -> None:
    result = runner.invoke(app, ["analyze", str(INPUTS["otlp-vllm"][0]), "--format", "json"])
    report = json.loads(result.stdout)
    assert report["ticks_available"] is False
    assert report["metrics"]["queue_wait"]["count"] == 6
    assert report["metrics"]["tpot"]["count"] == 6
    assert "itl" not in report["metrics"] or report["metrics"]["itl"]["count"] == 0


def test_import_command_converts_a_folder(tmp_path: Path) -> None:
    out = tmp_path / "trace.parquet"
    result = runner.invoke(app, ["import", "auto", str(ENGINES / "sglang"), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    assert out.exists()
    again = runner.invoke(app, ["analyze", str(out), "--format", "json"])
    assert json.loads(again.stdout)["outcomes"]["completed"] == 6


def test_broken_span_exits_3_with_one_line(tmp_path: Path) -> None:
    span = vllm_span(sample_requests()[0], 0)
    del span["startTimeUnixNano"]
    path = write_otlp(tmp_path / "spans.jsonl", [span])
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 3
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {path}: line 1: resourceSpans[0].scopeSpans[0].spans[0]")
    assert "missing field 'startTimeUnixNano'" in first
    assert "Traceback" not in result.stderr


def test_unrelated_sqlite_exits_3(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE users (name TEXT)")
    connection.commit()
    connection.close()
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 3
    assert "not an MLCommons endpoints event database" in result.stderr


@pytest.mark.parametrize("key", list(INPUTS))
def test_every_engine_import_keeps_the_common_schema_and_order(key: str) -> None:
    import polars as pl

    from servetrace.sources.registry import import_file

    from .test_registry import COMMON

    path, fmt, source = INPUTS[key]
    events = import_file(path).events
    assert list(events.columns[: len(COMMON)]) == list(COMMON)
    assert all(events.schema[name] == dtype for name, dtype in COMMON.items())
    assert events["tool"].unique().to_list() == [fmt]
    assert events["source"].unique().to_list() == [source]
    per = events.group_by("request_id").agg(
        ordered=pl.col("ts").diff().fill_null(0).min() >= 0,
        arrivals=(pl.col("event") == "arrival").sum(),
        admissions=(pl.col("event") == "admission").sum(),
        first_is_arrival=pl.col("event").first() == "arrival",
    )
    assert per["ordered"].all() and (per["arrivals"] == 1).all()
    assert per["first_is_arrival"].all()
    assert (per["admissions"] == (1 if source == "server" else 0)).all()
    varying = (
        events.group_by("request_id")
        .agg(pl.col(c).n_unique() for c in events.columns[6:])
        .select(pl.all().exclude("request_id").max())
    )
    assert all(value == 1 for value in varying.row(0))
