"""``timeline --steps``: a lane of step slices and counters per replica, on the trace's
time axis, each value the step file's; a counter the file cannot give is unavailable."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.render.step_timeline import STEP_PID
from tests.analysis.stall_fixtures import injected_workload
from tests.analysis.test_server_views import hand_trace
from tests.render.timeline_format import ns, validate

runner = CliRunner()
MS = 1_000_000
DATA = Path(__file__).resolve().parents[1] / "data" / "engines" / "steps"
EPOCH = 1_700_000_000 * 10**9  # a wall-clock start: the lanes must not depend on it


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A chunked-prefill simulation of the stall tests' workload, its steps as CSV."""
    folder = tmp_path_factory.mktemp("step_timeline")
    workload, trace, steps = folder / "w.parquet", folder / "t.parquet", folder / "s.csv"
    injected_workload(40).write_parquet(workload)
    done = runner.invoke(
        app,
        [
            "simulate", "--workload", str(workload), "--policy", "chunked",
            "--max-batch-tokens", "512", "--kv-blocks", "8192", "--seed", "1",
            "-o", str(trace), "--steps-out", str(steps),
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return trace, steps


def _timeline(tmp: Path, trace: Path, steps: Path, *more: str) -> tuple[dict[str, Any], str]:
    out = tmp / "tl.json"
    done = runner.invoke(
        app, ["timeline", str(trace), "--steps", str(steps), *more, "-o", str(out)]
    )
    assert done.exit_code == 0, done.output
    return json.loads(out.read_text()), done.stderr


def _step_events(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    events = [e for e in validate(doc) if e["pid"] == STEP_PID]
    counters: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for e in events:
        if e["ph"] == "C":
            counters.setdefault(e["name"], []).append((ns(e["ts"]), e["args"]))
    return [e for e in events if e["ph"] == "X"], counters


def test_a_slice_per_step_and_three_counters(run: tuple[Path, Path], tmp_path: Path) -> None:
    trace, steps = run
    doc, stderr = _timeline(tmp_path, trace, steps)
    table = pl.read_csv(steps)
    slices, counters = _step_events(doc)
    assert len(slices) == table.height
    assert {e["tid"] for e in slices} == {1}
    assert set(counters) == {"batch size · engine", "prefill tokens · engine", "KV usage · engine"}
    names = {
        e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["pid"] == STEP_PID and e["name"] == "thread_name"
    }
    assert names == {"steps · engine"}
    info = doc["otherData"]["steps"]
    assert info["format"] == "canonical" and info["counters_unavailable"] == {}
    assert info["slices"] == table.height and info["counter_events"] == 3 * table.height
    assert f"{table.height} steps on 1 replica" in stderr
    # The first step, by hand: r000 (prompt 64) arrives at 0 and is prefilled alone.
    first = min(slices, key=lambda e: e["ts"])
    assert (first["name"], ns(first["ts"])) == ("prefill", 0)
    assert first["args"]["prefill_tokens"] == 64 and first["args"]["kv_tokens"] == 64
    assert counters["batch size · engine"][0] == (0, {"requests": 1})
    # Every step: its slice spans ts_start → ts_end; each counter at ts_start is its value.
    by_start = {ns(e["ts"]): e for e in slices}
    at = {name: dict(points) for name, points in counters.items()}
    for row in table.iter_rows(named=True):
        e = by_start[row["ts_start"]]
        assert ns(e["dur"]) == row["ts_end"] - row["ts_start"]
        assert e["args"]["step"] == row["step"]
        batch = row["prefill_requests"] + row["decode_requests"]
        assert at["batch size · engine"][row["ts_start"]] == {"requests": batch}
        assert at["prefill tokens · engine"][row["ts_start"]] == {"tokens": row["prefill_tokens"]}
        assert at["KV usage · engine"][row["ts_start"]] == {"tokens": row["kv_tokens"]}
    # The long prompt arriving at 2 s is chunked beside the decoders: a mixed step.
    long_step = table.filter(pl.col("ts_start") >= 2000 * MS).row(0, named=True)
    e = by_start[long_step["ts_start"]]
    assert e["name"] == "prefill + decode" and e["args"]["prefill_tokens"] > 64


def test_steps_sit_on_the_trace_axis(run: tuple[Path, Path], tmp_path: Path) -> None:
    # Trace and steps on a wall clock: both lanes are drawn from the trace start alike.
    trace, steps = run
    late_trace, late_steps = tmp_path / "late.parquet", tmp_path / "late_steps.csv"
    pl.read_parquet(trace).with_columns(pl.col("ts") + EPOCH).write_parquet(late_trace)
    pl.read_csv(steps).with_columns(pl.col("ts_start", "ts_end") + EPOCH).write_csv(late_steps)
    plain, _ = _timeline(tmp_path, trace, steps)
    late, _ = _timeline(tmp_path, late_trace, late_steps)
    assert late["otherData"]["trace_start_ns"] == EPOCH
    assert _step_events(late) == _step_events(plain)
    requests = [e for e in late["traceEvents"] if e.get("cat") == "request"]
    first_request = min(ns(e["ts"]) for e in requests)
    first_step = min(ns(e["ts"]) for e in _step_events(late)[0])
    assert first_request == first_step == 0  # r000 arrives and is admitted at once


def test_a_missing_column_is_unavailable(run: tuple[Path, Path], tmp_path: Path) -> None:
    trace, steps = run
    no_kv = tmp_path / "no_kv.csv"
    pl.read_csv(steps).drop("kv_tokens").write_csv(no_kv)
    doc, stderr = _timeline(tmp_path, trace, no_kv)
    slices, counters = _step_events(doc)
    assert set(counters) == {"batch size · engine", "prefill tokens · engine"}
    assert "kv_tokens" not in slices[0]["args"]  # not a null, not a zero: absent
    info = doc["otherData"]["steps"]
    assert info["counters_unavailable"] == {
        "KV usage": "the canonical step file has neither kv_usage nor kv_tokens"
    }
    assert info["counters"] == ["batch size", "prefill tokens"]
    title = next(
        e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["pid"] == STEP_PID and e["name"] == "process_name"
    )
    assert title == "engine steps: no_kv.csv (canonical); unavailable: KV usage"
    assert "(KV usage unavailable)" in stderr


def test_a_lane_and_counters_per_replica(run: tuple[Path, Path], tmp_path: Path) -> None:
    trace, steps = run
    two = tmp_path / "two.csv"
    table = pl.read_csv(steps).with_columns(replica=(pl.col("step") % 2).cast(pl.String))
    table.write_csv(two)
    doc, _ = _timeline(tmp_path, trace, two)
    slices, counters = _step_events(doc)
    assert {e["tid"] for e in slices} == {1, 2}
    assert sum(e["tid"] == 2 for e in slices) == table.filter(pl.col("replica") == "1").height
    assert {name.split(" · ")[1] for name in counters} == {"replica 0", "replica 1"}
    assert doc["otherData"]["steps"]["replicas"] == ["replica 0", "replica 1"]


def test_window_keeps_the_steps_inside_it(run: tuple[Path, Path], tmp_path: Path) -> None:
    trace, steps = run
    doc, _ = _timeline(tmp_path, trace, steps, "--window", "1s:1.5s")
    slices, counters = _step_events(doc)
    table = pl.read_csv(steps)
    overlapping = table.filter((pl.col("ts_end") >= 1000 * MS) & (pl.col("ts_start") <= 1500 * MS))
    assert len(slices) == overlapping.height
    for e in slices:
        assert ns(e["ts"]) >= 1000 * MS and ns(e["ts"]) + ns(e["dur"]) <= 1500 * MS
    assert all(1000 * MS <= t <= 1500 * MS for points in counters.values() for t, _ in points)


def test_steps_from_needs_steps(run: tuple[Path, Path], tmp_path: Path) -> None:
    trace, _ = run
    out = tmp_path / "x.json"
    done = runner.invoke(app, ["timeline", str(trace), "--steps-from", "vidur", "-o", str(out)])
    assert done.exit_code == 2 and "--steps-from needs --steps" in done.stderr
    plain = runner.invoke(app, ["timeline", str(trace), "-o", str(out)])
    assert plain.exit_code == 0
    doc = json.loads(out.read_text())
    assert "steps" not in doc["otherData"]
    assert all(e["pid"] != STEP_PID for e in doc["traceEvents"])


def test_a_step_with_one_end_is_an_instant(tmp_path: Path) -> None:
    # SGLang dates a prefill batch when it is formed (no end) and a decode line when it is
    # logged (no start): the hand trace runs 13:00:04 → 13:00:06.7 UTC, so the prefill
    # lines of 13:00:05 (DP0) and 13:00:06 (DP1) are in it, the decode lines after it not.
    start = int(dt.datetime(2025, 10, 8, 13, 0, 4, tzinfo=dt.UTC).timestamp()) * 10**9
    trace = tmp_path / "h.parquet"
    hand_trace().with_columns(pl.col("ts") + start).write_parquet(trace)
    doc, stderr = _timeline(tmp_path, trace, DATA / "sglang.log")
    events = [e for e in validate(doc) if e["pid"] == STEP_PID and e["ph"] == "i"]
    assert [(e["name"], ns(e["ts"]), e["tid"]) for e in events] == [
        ("prefill (end unknown)", 1000 * MS, 1),
        ("prefill (end unknown)", 2000 * MS, 2),
    ]
    assert events[0]["args"]["prefill_tokens"] == 1024 and events[0]["args"]["kv_usage"] == 0.01
    assert "decode_tokens" not in events[0]["args"]  # the log never tells it
    _, counters = _step_events(doc)
    assert counters["KV usage · replica 1"] == [(2000 * MS, {"fraction": 0.02})]
    info = doc["otherData"]["steps"]
    # A prefill line does not tell the requests decoding beside it: no batch-size point.
    assert info["steps_without_value"] == {"batch size": 2}
    assert "batch size · replica 0" not in counters
    assert info["steps_outside"] == 2 and info["format"] == "sglang-log"
    assert "sglang-log: times are the log prefix read as UTC" in stderr
