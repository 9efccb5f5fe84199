"""Hand-computed pieces of the run model: labels, load order, the load verdict, the
declared-duration window, and what stays one trace (canonical parts, a run column)."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

import servetrace
from servetrace.comparison.load import compare_load
from servetrace.render.workload import load_message
from servetrace.runs import Run, Runs, empty_declared
from servetrace.runs.labels import make_labels
from servetrace.runs.throughput import declared_throughput, with_declared_summary
from servetrace.sources.inputs import RunSource, discover
from tests.conftest import events, make_request


def test_labels_are_the_parts_that_differ() -> None:
    sweep = [
        Path(f"/r/{c}/serving_m_{t}_sharegpt_qps_{q}.json")
        for c, t in (("01_a", "tp8_pp1"), ("02_b", "tp4_pp2"))
        for q in ("01", "16")
    ]
    # the file names alone tell the runs apart: the folders add nothing
    assert make_labels(sweep) == [
        "tp8_pp1_sharegpt_qps_01",
        "tp8_pp1_sharegpt_qps_16",
        "tp4_pp2_sharegpt_qps_01",
        "tp4_pp2_sharegpt_qps_16",
    ]
    # names shared across folders (vLLM's 02/03/04 all tp4_pp2): folder + trimmed name
    shared = [
        Path(f"/r/{c}/serving_m_tp4_pp2_qps_{q}.json")
        for c in ("02_a", "03_b")
        for q in ("01", "16")
    ]
    assert make_labels(shared) == ["02_a/qps_01", "02_a/qps_16", "03_b/qps_01", "03_b/qps_16"]
    folders = [Path(f"/x/{name}/profile_export.jsonl.gz") for name in ("conc8", "conc16")]
    assert make_labels(folders) == ["conc8", "conc16"]
    assert make_labels([Path("/a/run.json")]) == ["run"]
    assert make_labels([Path("/a/b.json"), Path("/c/b.json")]) == ["a", "c"]
    assert make_labels([Path("/a/b.json"), Path("/a/b.json")], ["0", "1"]) == ["b#0", "b#1"]


def _run(label: str, rate: float | None, conc: int | None) -> Run:
    declared = empty_declared()
    declared["request_rate_per_s"], declared["max_concurrency"] = rate, conc
    return Run(label=label, source=RunSource(paths=(), fmt=None), declared=declared, analysis=None)


def test_runs_sort_by_rate_then_unlimited_then_unknown_then_concurrency() -> None:
    runs = [
        _run("u", None, 4),
        _run("inf", math.inf, None),
        _run("r16", 16.0, None),
        _run("r1", 1.0, None),
        _run("c2", None, 2),
    ]
    ordered = sorted(runs, key=lambda r: r.load_key)
    assert [r.label for r in ordered] == ["r1", "r16", "inf", "c2", "u"]
    assert Runs(runs=tuple(ordered)).by_label("inf").declared["request_rate_per_s"] == math.inf


def test_load_verdict() -> None:
    a, b = empty_declared(), empty_declared()
    assert compare_load(a, b).verdict == "unknown"
    a["request_rate_per_s"], b["request_rate_per_s"] = 1.0, 16.0
    load = compare_load(a, b)
    assert load.verdict == "differs" and load.differences[0].factor == 16.0
    assert load_message(load).startswith("declared load differs 16×: request rate 1 req/s vs 16")
    b["request_rate_per_s"] = math.inf
    assert math.isinf(compare_load(a, b).differences[0].factor)
    assert "unlimited" in load_message(compare_load(a, b))
    b["request_rate_per_s"] = 1.0
    a["max_concurrency"], b["max_concurrency"] = 8, 8
    same = compare_load(a, b)
    assert same.verdict == "same" and same.compared == ("request_rate_per_s", "max_concurrency")
    assert compare_load(a, None).verdict == "unknown"


def test_declared_throughput_by_hand() -> None:
    """Three requests, two completed (10 + 30 output tokens, prompts 5 + 7), 4 s declared:
    0.5 req/s, 10 output tok/s, 13 total tok/s; goodput 1 met → 0.25 req/s."""
    requests = pl.DataFrame(
        {
            "outcome": ["completed", "completed", "cancelled"],
            "output_tokens": [10, 30, 3],
            "prompt_tokens": [5, 7, 100],
        }
    )
    got = declared_throughput(requests, 4.0, 1)
    assert got == {
        "window_s": 4.0,
        "requests_per_s": 0.5,
        "output_tokens_per_s": 10.0,
        "total_tokens_per_s": 13.0,
        "goodput_requests_per_s": 0.25,
    }


def test_a_measured_window_beats_a_declared_one() -> None:
    trace = events(make_request("a", arrival=0, first=10, ticks=[20], complete=2000))
    from servetrace.analysis import memory

    engine = memory.analyze_events(trace)
    declared = {**empty_declared(), "duration_s": 100.0}
    kept = with_declared_summary(engine.summary, engine.requests, declared)
    assert kept is engine.summary and kept.window_source == "trace"
    assert kept.throughput["window_s"] == pytest.approx(2.0)


def test_canonical_parts_stay_one_trace_and_a_run_column_still_splits(tmp_path: Path) -> None:
    parts = tmp_path / "trace"
    parts.mkdir()
    for index, run in enumerate(("x", "y")):
        frame = events(
            make_request(f"r{index}", arrival=0, first=5, ticks=[9], complete=9, run=run),
            make_request(f"s{index}", arrival=1, first=6, ticks=[8], complete=8, run=run),
        )
        frame.write_parquet(parts / f"part-{index}.parquet")
    sources = discover([str(parts)])
    assert len(sources) == 1 and sources[0].fmt is None
    analysis = servetrace.analyze(parts, by="run")
    assert isinstance(analysis, servetrace.Analysis)
    assert analysis.summary.accounting.requests == 4
    assert analysis.groups is not None and set(analysis.groups) == {"x", "y"}
    assert "declared" not in servetrace.to_dict(analysis)  # a canonical trace declares nothing
