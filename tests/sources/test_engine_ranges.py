"""The server importers hold every time to the canonical range once converted to ns, and
refuse malformed values with one line naming file, record and field: exit 3, never a
wrapped Int64 (a negative decode, a request quarantined under the wrong rule) and never a
traceback (exit 4)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

from .engine_writers import (
    sample_requests,
    sglang_record,
    trtllm_item,
    vllm_span,
    write_mlcommons,
    write_otlp,
    write_sglang,
    write_trtllm,
)

runner = CliRunner()


def refused(path: Path, *needles: str) -> str:
    """``servetrace analyze path`` exits 3 with one ``error:`` line holding ``needles``."""
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in (str(path), *needles):
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _vllm_spans(tmp_path: Path, **attributes: Any) -> Path:
    spans = [vllm_span(r, i) for i, r in enumerate(sample_requests())]
    for item in spans[1]["attributes"]:
        if item["key"] in attributes:
            item["value"] = attributes[item["key"]]
    return write_otlp(tmp_path / "spans.jsonl", spans)


@pytest.mark.parametrize(
    "name",
    [
        "gen_ai.latency.time_in_model_decode",
        "gen_ai.latency.time_in_model_prefill",
        "gen_ai.latency.time_in_queue",
        "gen_ai.latency.e2e",
    ],
)
def test_otlp_duration_beyond_range_once_in_ns(tmp_path: Path, name: str) -> None:
    # 1e10 s is 1e19 ns: past Int64, it used to wrap into a negative decode and TPOT.
    path = _vllm_spans(tmp_path, **{name: {"doubleValue": 1e10}})
    refused(path, "spans[1]", name, "beyond")


def test_otlp_start_time_beyond_int64(tmp_path: Path) -> None:
    spans = [vllm_span(r, i) for i, r in enumerate(sample_requests())]
    spans[2]["startTimeUnixNano"] = "100000000000000000000"  # 1e20
    path = write_otlp(tmp_path / "spans.jsonl", spans, per_line=10)
    refused(path, "spans[2]", "startTimeUnixNano")


@pytest.mark.parametrize("kind", ["arrayValue", "kvlistValue"])
def test_otlp_array_value_that_is_not_an_object(tmp_path: Path, kind: str) -> None:
    path = _vllm_spans(tmp_path, **{"gen_ai.response.finish_reasons": {kind: "stop"}})
    refused(path, "spans[1]", "gen_ai.response.finish_reasons", kind)


@pytest.mark.parametrize(
    ("field", "value"),
    [("request_received_ts", 1e13), ("decode_finished_ts", 1.7e18), ("queue_time", 1e10)],
)
def test_sglang_seconds_beyond_range_once_in_ns(tmp_path: Path, field: str, value: float) -> None:
    # 1e13 s fits the old check (made in seconds) but is 1e22 ns: it wrapped, and the
    # request was quarantined as event_before_arrival instead of being refused.
    records = [sglang_record(r) for r in sample_requests()]
    records[3][field] = value
    path = tmp_path / "sglang-request-metrics-20260302_10.log"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    refused(path, "record 3", f"'{field}'", "beyond")


def test_trtllm_times_in_ns_where_seconds_are_expected(tmp_path: Path) -> None:
    items = [trtllm_item(r, i + 1) for i, r in enumerate(sample_requests()[:3])]
    items[1]["perf_metrics"]["timing_metrics"]["first_token_time"] = 1.765e18  # ns, not s
    path = write_trtllm(tmp_path / "perf_metrics.json", [items])
    refused(path, "item 1", "first_token_time", "beyond")


def test_mlcommons_timestamp_beyond_range(tmp_path: Path) -> None:
    path = write_mlcommons(tmp_path / "events.db", sample_requests())
    connection = sqlite3.connect(path)
    connection.execute("UPDATE events SET timestamp_ns = 9000000000000000000 WHERE id = 5")
    connection.commit()
    connection.close()
    refused(path, "row 5", "timestamp_ns")


def test_valid_exports_still_read(tmp_path: Path) -> None:
    # The guard refuses only what is out of range: these files, the writers' own, import.
    reqs = sample_requests()
    for path in (
        write_otlp(tmp_path / "spans.jsonl", [vllm_span(r, i) for i, r in enumerate(reqs)]),
        write_sglang(tmp_path / "sglang-request-metrics-20260302_10.log", reqs),
        write_mlcommons(tmp_path / "events.db", reqs),
    ):
        result = runner.invoke(app, ["analyze", str(path)])
        assert result.exit_code == 0, (path, result.output)


def _with_rows(path: Path, *statements: str) -> Path:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()
    return path


def test_mlcommons_unknown_event_type_of_a_sample_is_refused(tmp_path: Path) -> None:
    # The first chunk's row under a type the importer does not know: dropping it moved the
    # first token to the next chunk (TTFT 62.4 -> 68.4 ms) and counted it a session event.
    path = write_mlcommons(tmp_path / "events.db", sample_requests())
    row = _first_chunk_row(path)
    _with_rows(path, f"UPDATE events SET event_type = 'sample.recv_first_v2' WHERE id = {row}")
    refused(path, f"row {row}", "'sample.recv_first_v2'", "event_type")


def test_mlcommons_unknown_event_type_without_a_sample_is_named(tmp_path: Path) -> None:
    path = write_mlcommons(tmp_path / "events.db", sample_requests())
    _with_rows(
        path,
        "INSERT INTO events (sample_uuid, event_type, timestamp_ns, conversation_id, data) "
        "VALUES ('', 'loadgen.heartbeat', 5123456789013, '', x'6e756c6c')",
    )
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 0, result.output
    (note,) = [line for line in result.stderr.splitlines() if "not imported" in line]
    assert "1 of unknown type 'loadgen.heartbeat'" in note, note
    assert "2 session events" in note, note


def test_mlcommons_sample_uuid_as_blob(tmp_path: Path) -> None:
    path = write_mlcommons(tmp_path / "events.db", sample_requests())
    _with_rows(path, "UPDATE events SET sample_uuid = CAST(sample_uuid AS BLOB) WHERE id = 7")
    refused(path, "row 7", "sample_uuid")


def _first_chunk_row(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        (row,) = connection.execute(
            "SELECT id FROM events WHERE event_type = 'sample.recv_first' ORDER BY id LIMIT 1"
        ).fetchone()
    finally:
        connection.close()
    return int(row)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("deep.json", []),
        ("benchmark_results.json", []),  # a run folder's summary name: run discovery reads it
        ("wrapped.json", ["--from", "vllm-bench"]),
        ("table.json", ["--from", "requests"]),
    ],
)
def test_json_nested_100000_deep(tmp_path: Path, name: str, args: list[str]) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / name
    path.write_text(deep if name != "wrapped.json" else '{"ttfts": ' + deep + "}")
    target = folder if name == "benchmark_results.json" else path
    result = runner.invoke(app, ["analyze", str(target), *args])
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert str(path) in line and "nested deeper" in line, line
