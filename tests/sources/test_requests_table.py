"""One row per request, and workload files refused.

Hand-computed tables; the BurstGPT file is checked against numpy over its raw JSON.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from servetrace.errors import InputError, UsageError
from servetrace.sources import requests_table

runner = CliRunner()
DATA = Path(__file__).parent.parent / "data"
BURST = DATA / "real" / "burstgpt-replay" / "detail_log_scale100_prompt500.json"
AZURE = DATA / "workloads" / "azure_conv_2023_head300.csv"
MOONCAKE = DATA / "workloads" / "mooncake_conversation_head300.jsonl"
MAP = [
    "--column",
    "arrival=sent_ms",
    "--column",
    "ttft=ttft_ms",
    "--column",
    "e2e=latency_ms",
    "--column",
    "output_tokens=n_out",
    "--column",
    "error_code=status",
]


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """Five requests: sends at 0, 1, 2, 3, 4 s; TTFT 100..500 ms; e2e 1.1..1.5 s; 11 output
    tokens; #3 failed with HTTP 429 (no first token), #4 was closed by the client (499)."""
    path = tmp_path / "inhouse.csv"
    path.write_text(
        "id,sent_ms,ttft_ms,latency_ms,n_out,status\n"
        "a,0,100,1100,11,200\n"
        "b,1000,200,1200,11,200\n"
        "c,2000,300,1300,11,\n"
        "d,3000,,5,0,429\n"
        "e,4000,500,1500,3,499\n"
    )
    return path


def test_in_house_table_hand_computed(table: Path) -> None:
    analysis = servetrace.analyze(
        table,
        from_format="requests",
        time_unit="ms",
        columns={
            "request_id": "id",
            "arrival": "sent_ms",
            "ttft": "ttft_ms",
            "e2e": "latency_ms",
            "output_tokens": "n_out",
            "error_code": "status",
        },
    )
    s = analysis.summary
    assert s.outcomes == {"completed": 3, "cancelled": 1, "in_flight": 0, "errored": 1}
    assert s.errors == {"429": 1}
    assert s.metrics["ttft"]["count"] == 3
    assert s.metrics["ttft"]["mean"] == pytest.approx(200 * 1e6)
    assert s.metrics["e2e"]["max"] == pytest.approx(1300 * 1e6)
    # TPOT = (e2e - ttft) / (11 - 1) = 100 ms for a, b and c
    assert s.metrics["tpot"]["p50"] == pytest.approx(100 * 1e6)
    # 3 completed over 0 → 5.5 s (e's cancellation at 4 + 1.5 s is the last end)
    assert s.throughput["requests_per_s"] == pytest.approx(3 / 5.5)


def test_seconds_and_ms_columns_with_default_units(tmp_path: Path) -> None:
    """Floats are s, ints are ns by default: a table with float seconds needs no unit."""
    path = tmp_path / "s.jsonl"
    rows = [
        {"rid": 1, "t0": 10.0, "ttft": 0.25, "e2e": 1.25, "out": 5},
        {"rid": 2, "t0": 11.0, "ttft": 0.5, "e2e": 2.5, "out": 9},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    result = runner.invoke(
        app,
        [
            "analyze",
            str(path),
            "--from",
            "requests",
            "--column",
            "request_id=rid",
            "--column",
            "arrival=t0",
            "--column",
            "output_tokens=out",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["metrics"]["ttft"]["mean"] == pytest.approx(375.0)
    assert report["metrics"]["e2e"]["max"] == pytest.approx(2500.0)
    # TPOT: 1000 ms / 4 = 250 ms and 2000 ms / 8 = 250 ms
    assert report["metrics"]["tpot"]["p50"] == pytest.approx(250.0)
    # window 10.0 s → 13.5 s: 2 requests / 3.5 s
    assert report["throughput"]["requests_per_s"] == pytest.approx(2 / 3.5)
    assert report["ticks_available"] is False


def test_timestamp_and_end_columns(tmp_path: Path) -> None:
    """Datetime columns are exact; arrival = end − e2e when only the end is logged."""
    t0 = datetime(2025, 1, 1, 12, 0, 0)
    frame = pl.DataFrame(
        {
            "finished": [t0 + timedelta(seconds=2), t0 + timedelta(seconds=3, microseconds=5)],
            "first": [t0 + timedelta(milliseconds=1300), t0 + timedelta(milliseconds=2400)],
            "lat": [timedelta(seconds=1), timedelta(seconds=1)],
        }
    )
    path = tmp_path / "t.parquet"
    frame.write_parquet(path)
    analysis = servetrace.analyze(
        path,
        from_format="requests",
        columns={"end": "finished", "first_token": "first", "e2e": "lat"},
    )
    ttft = analysis.requests.sort("request_id")["ttft_ns"].to_list()
    assert ttft == [300_000_000, 399_995_000]


def test_burstgpt_matches_numpy() -> None:
    raw = json.loads(BURST.read_text())
    ttft = np.array([v["first_chunk_time"] for v in raw.values()]) * 1e9
    e2e = np.array([v["total_chunk_time"] for v in raw.values()]) * 1e9
    analysis = servetrace.analyze(
        BURST,
        from_format="requests",
        columns={
            "request_id": "event_id",
            "end": "record_time",
            "ttft": "first_chunk_time",
            "e2e": "total_chunk_time",
            "prompt_tokens": "sampled_in_num",
        },
    )
    m = analysis.summary.metrics
    assert m["ttft"]["count"] == 500
    for stat, fn in (
        ("mean", np.mean),
        ("p50", np.median),
        ("p99", lambda a: np.percentile(a, 99)),
    ):
        assert m["ttft"][stat] == pytest.approx(fn(ttft), rel=1e-6, abs=2)
        assert m["e2e"][stat] == pytest.approx(fn(e2e), rel=1e-6, abs=2)
    assert analysis.summary.arrival_known


def test_bad_mappings_name_the_field(table: Path) -> None:
    missing = runner.invoke(
        app, ["analyze", str(table), "--from", "requests", "--column", "arrival=nope"]
    )
    assert missing.exit_code == 3
    assert "--column arrival=nope: no such column" in missing.stderr
    unknown = runner.invoke(
        app, ["analyze", str(table), "--from", "requests", "--column", "latency=latency_ms"]
    )
    assert unknown.exit_code == 2 and "not a per-request field" in unknown.stderr
    too_few = runner.invoke(
        app, ["analyze", str(table), "--from", "requests", "--column", "arrival=sent_ms"]
    )
    assert too_few.exit_code == 3 and "needs a first-token time" in too_few.stderr
    with pytest.raises(UsageError):
        requests_table.read(table, {"arrival": "sent_ms"}, time_unit="hours")


def test_cli_table_through_the_runner(table: Path) -> None:
    result = runner.invoke(
        app,
        [
            "analyze",
            str(table),
            "--from",
            "requests",
            "--time-unit",
            "ms",
            "--column",
            "request_id=id",
            *MAP,
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "5 requests" in result.stdout and "1 errored (1 × HTTP 429)" in result.stdout
    assert "1 cancelled" in result.stdout


def test_canonical_reader_points_one_row_per_request_tables_to_from_requests(table: Path) -> None:
    result = runner.invoke(app, ["analyze", str(table)])
    assert result.exit_code == 3
    assert "--from requests --column arrival=NAME" in result.stderr


def test_dict_keyed_by_id_lists_few_columns() -> None:
    result = runner.invoke(app, ["analyze", str(BURST)])
    assert result.exit_code == 3
    assert "500 per-request records keyed by id" in result.stderr
    assert "--from requests" in result.stderr.splitlines()[0]
    assert len(result.stderr) < 600


@pytest.mark.parametrize("path", [AZURE, MOONCAKE], ids=["azure", "mooncake"])
@pytest.mark.parametrize("extra", [[], ["--from", "requests"]], ids=["canonical", "requests"])
def test_workload_files_point_to_simulate(path: Path, extra: list[str]) -> None:
    result = runner.invoke(app, ["analyze", str(path), *extra])
    assert result.exit_code == 3, result.stdout
    assert "a workload to replay" in result.stderr
    assert f"servetrace simulate --workload {path}" in result.stderr
    with pytest.raises(InputError, match="workload to replay"):
        servetrace.analyze(path, from_format="requests" if extra else None)


def test_a_table_is_read_as_the_canonical_reader_reads_it(tmp_path: Path) -> None:
    """Gzip and a blank last row are read; a broken cell is named by line and column."""
    import gzip

    text = b"request_id,arrival,ttft,e2e,output_tokens\n1,0,0.1,0.5,10\n2,1,0.2,0.6,20\n,,,,\n"
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(text))
    result = requests_table.read(path)
    assert result.records == 2
    # arrivals are integers, so ns; the durations floats, so s
    ends = result.events.filter(pl.col("event") == "completion")["ts"].to_list()
    assert ends == [500_000_000, 1 + 600_000_000]
    broken = tmp_path / "broken.csv"
    broken.write_bytes(b"request_id,ttft,e2e\n1,0.1,0.5\n2,\xff0.2,0.6\n")
    with pytest.raises(InputError, match=r"broken\.csv: line 3, column 'ttft': not UTF-8 text"):
        requests_table.read(broken)
