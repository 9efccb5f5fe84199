"""``timeline --server-metrics``: one Perfetto counter track per series, at the scrape
instants on the trace's clock (the offset analyze uses), carrying the scraped values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.render.server_timeline import SERVER_PID, series_name
from tests.analysis.test_server_views import write_hand
from tests.render.timeline_format import ns, validate

runner = CliRunner()
MS = 1_000_000


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    trace, _, prom = write_hand(tmp_path_factory.mktemp("hand"))
    return trace, prom


def _timeline(files: tuple[Path, Path], tmp: Path, *more: str) -> dict[str, Any]:
    out = tmp / "tl.json"
    done = runner.invoke(
        app, ["timeline", str(files[0]), "--server-metrics", str(files[1]), *more, "-o", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert "server metric points" in done.stderr
    return json.loads(out.read_text())


def _tracks(doc: dict[str, Any]) -> dict[str, list[tuple[int, dict[str, float]]]]:
    tracks: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for e in validate(doc):
        if e["ph"] == "C" and e["pid"] == SERVER_PID:
            tracks.setdefault(e["name"], []).append((ns(e["ts"]), e["args"]))
    return tracks


def test_a_counter_track_per_series_at_the_scrapes(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    doc = _timeline(files, tmp_path, "--clock-offset-ms", "0")
    tracks = _tracks(doc)
    assert set(tracks) == {
        'vllm:num_requests_waiting{engine="0"}',
        'vllm:num_requests_running{engine="0"}',
        'vllm:request_success_total{engine="0",finished_reason="stop"}',
        'vllm:prompt_tokens_total{engine="0"}',
        'vllm:time_to_first_token_seconds_count{engine="0"}',
        'vllm:time_to_first_token_seconds_sum{engine="0"}',
    }  # buckets are not drawn; their _count and _sum are
    # The trace runs 0 → 2.7 s: the scrapes at 0, 1 and 2 s are in it, the one at 3 s not.
    assert tracks['vllm:num_requests_running{engine="0"}'] == [
        (0, {"value": 0}),
        (1000 * MS, {"value": 1}),
        (2000 * MS, {"value": 2}),
    ]
    # A counter: its total as scraped, and its rate over the interval to the next scrape.
    assert tracks['vllm:prompt_tokens_total{engine="0"}'] == [
        (0, {"total": 0, "per_s": 0}),
        (1000 * MS, {"total": 0, "per_s": 10}),
        (2000 * MS, {"total": 10, "per_s": 30}),
    ]
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["pid"] == SERVER_PID]
    assert meta[0]["args"]["name"].startswith("server metrics: ")
    assert "clock offset 0 ms" in meta[0]["args"]["name"]
    assert doc["otherData"]["server_counter_events"] == 3 * 6


def test_the_clock_offset_moves_every_scrape(files: tuple[Path, Path], tmp_path: Path) -> None:
    # The server's clock 500 ms ahead: its scrape at 1 s is the trace's 0.5 s; the one at
    # 0 s falls before the trace and the one at 3 s (2.5 s) inside it.
    tracks = _tracks(_timeline(files, tmp_path, "--clock-offset-ms", "500"))
    running = tracks['vllm:num_requests_running{engine="0"}']
    assert running == [
        (500 * MS, {"value": 1}),
        (1500 * MS, {"value": 2}),
        (2500 * MS, {"value": 0}),
    ]
    # After a series' last scrape the rate is unknown: left out, never a zero.
    assert tracks['vllm:prompt_tokens_total{engine="0"}'][-1] == (2500 * MS, {"total": 40})


def test_without_the_flag_there_is_no_server_process(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "plain.json"
    assert runner.invoke(app, ["timeline", str(files[0]), "-o", str(out)]).exit_code == 0
    doc = json.loads(out.read_text())
    assert all(e["pid"] != SERVER_PID for e in doc["traceEvents"])
    assert "server_counter_events" not in doc["otherData"]


def test_series_names_are_prometheus_notation() -> None:
    assert series_name("up", "{}") == "up"
    assert series_name("f", '{"a":"x","b":"y"}') == 'f{a="x",b="y"}'
