"""Capacity from a sweep, against a hand-computed sweep.

Four runs of 10 requests at 1, 2, 4 and 8 req/s offered. Each request's TTFT is chosen
so that, for ``ttft<=100ms``, the runs meet it for 10, 10, 8 and 4 of their requests
(at 4 req/s one of the two misses is an HTTP 503 error, which counts against the SLO).
Attainment: 100 %, 100 %, 80 %, 40 %. At 90 % the highest passing rate is 2 req/s and
the next run (4 req/s) misses, so capacity = 2 + (1.0 − 0.9)/(1.0 − 0.8) · (4 − 2) = 3.0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.analysis.capacity import CurvePoint, RunPoint, capacity, pareto_frontier, sweep
from servetrace.api._capacity import parse_attainment
from servetrace.cli import app
from servetrace.errors import UsageError
from servetrace.runs.labels import make_labels
from tests.conftest import events, make_request

runner = CliRunner()
RATES = (1.0, 2.0, 4.0, 8.0)
# per run: TTFTs (ms) of its 10 requests; None = the request errored (HTTP 503)
TTFTS = {
    1.0: [50] * 10,
    2.0: [60] * 10,
    4.0: [70] * 8 + [300, None],
    8.0: [80] * 4 + [400] * 6,
}


def _run(rate: float) -> pl.DataFrame:
    rows = []
    for i, ttft in enumerate(TTFTS[rate]):
        start = i * 1000 / rate
        if ttft is None:
            request = make_request(f"r{i}", arrival=start, cancel=start + 20, error_code=503)
            for row in request:
                if row["event"] == "cancellation":
                    row["event"] = "error"
        else:
            # 11 tokens 20 ms apart after the first: TPOT 20 ms
            first = start + ttft
            ticks = [first + 20 * k for k in range(1, 11)]
            request = make_request(
                f"r{i}", arrival=start, first=first, ticks=ticks, complete=ticks[-1]
            )
        rows.append(request)
    frame = events(*rows)
    if "error_code" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.Int64).alias("error_code"))
    return frame.with_columns(pl.col("error_code").cast(pl.Int64))


@pytest.fixture
def sweep_files(tmp_path: Path) -> list[Path]:
    paths = []
    for rate in RATES:
        path = tmp_path / f"run_qps_{rate:g}.parquet"
        _run(rate).write_parquet(path)
        paths.append(path)
    return paths


def test_attainment_curve_and_interpolated_capacity(sweep_files: list[Path]) -> None:
    runs = [
        RunPoint(f"qps_{r:g}", r, servetrace.analyze(p, goodput="ttft<=100ms"))
        for r, p in zip(RATES, sweep_files, strict=True)
    ]
    report = sweep(runs, attainment=0.9)
    assert [p.attainment for p in report.curve] == [1.0, 1.0, 0.8, 0.4]
    assert [p.answered for p in report.curve] == [10, 10, 10, 10]
    assert [p.errored for p in report.curve] == [0, 0, 1, 0]
    cap = report.capacity
    assert cap is not None
    assert cap.rate == pytest.approx(3.0, abs=1e-12)
    assert cap.bound == "interpolated" and cap.bracket == ("qps_2", "qps_4")
    # TTFT p50 per run, hand-read: 50, 60, 70 (9 completed), 400 (5th and 6th of 10)
    assert [p.latency_ns["ttft_p50"] for p in report.curve] == [50e6, 60e6, 70e6, 400e6]
    # 10 requests over 9/rate s + the last one's 70..480 ms: completed req/s of run 1
    assert report.curve[0].requests_per_s == pytest.approx(10 / (9 + 0.25))


def test_capacity_at_other_thresholds(sweep_files: list[Path]) -> None:
    runs = [
        RunPoint(f"qps_{r:g}", r, servetrace.analyze(p, goodput="ttft<=100ms"))
        for r, p in zip(RATES, sweep_files, strict=True)
    ]
    # 80 %: the 4 req/s run sits exactly at it
    exact = sweep(runs, attainment=0.8).capacity
    assert exact is not None and (exact.rate, exact.bound) == (4.0, "exact")
    # 50 %: between 4 (80 %) and 8 (40 %): 4 + 0.3/0.4 · 4 = 7
    half = sweep(runs, attainment=0.5).capacity
    assert half is not None and half.rate == pytest.approx(7.0)
    # 30 %: every run meets it, but the 8 req/s run served only 10 requests in 1.725 s
    # (last arrival 1125 ms + TTFT 400 ms + 10 ticks of 20 ms): capacity is never above
    # what was achieved, 10 / 1.725 = 5.797 req/s, not "at least 8"
    low = sweep(runs, attainment=0.3).capacity
    assert low is not None and (low.bound, low.limited_by) == ("achieved", "qps_8")
    assert low.rate == pytest.approx(10 / 1.725)
    # 100 % with a stricter SLO none meets: unavailable, with the reason
    strict = [
        RunPoint(r.label, r.offered_rate, servetrace.analyze(p, goodput="ttft<=10ms"))
        for r, p in zip(runs, sweep_files, strict=True)
    ]
    none = sweep(strict, attainment=0.9).capacity
    assert none is not None and none.rate is None
    assert none.reason is not None and "below the lowest offered rate (1 req/s" in none.reason


def _point(
    label: str,
    rate: float | None,
    share: float | None,
    gpu: float | None = None,
    user: float | None = None,
) -> CurvePoint:
    return CurvePoint(label, rate, None, None, {}, 10, 0, 10, None, share, {}, 1, gpu, user)


def test_non_monotone_unbounded_and_duplicate_rates() -> None:
    points = [
        _point("a", 1, 0.95),
        _point("b", 2, 0.85),
        _point("c", 4, 0.92),
        _point("d", 8, 0.5),
        _point("inf", math.inf, 0.1),
    ]
    cap = capacity(points, 0.9)
    # highest passing is c (4 req/s), bracketed by d: 4 + 0.02/0.42 · 4
    assert cap.rate == pytest.approx(4 + 0.02 / 0.42 * 4)
    assert any("not monotone" in n and "b" in n for n in cap.notes)
    assert any("inf" in n for n in cap.notes)
    with pytest.raises(UsageError, match="same offered rate"):
        capacity([_point("a", 1, 1.0), _point("b", 1, 0.5)], 0.9)


def test_pareto_frontier_hand_picked() -> None:
    points = [
        _point("low-load", 1, 1, gpu=100, user=50),
        _point("mid", 2, 1, gpu=300, user=40),
        _point("dominated", 3, 1, gpu=250, user=35),  # mid beats it on both
        _point("high", 4, 1, gpu=500, user=20),
        _point("tie", 5, 1, gpu=500, user=20),  # equal to high: neither dominates
    ]
    assert pareto_frontier(points) == ("high", "tie", "mid", "low-load")


def test_frontier_needs_gpus(sweep_files: list[Path]) -> None:
    runs = [
        RunPoint(f"qps_{r:g}", r, servetrace.analyze(p, goodput="ttft<=100ms"))
        for r, p in zip(RATES, sweep_files, strict=True)
    ]
    assert sweep(runs).frontier is None
    report = sweep(runs, gpus=2)
    assert report.frontier is not None
    first = report.curve[0]
    assert first.tokens_per_s_per_user == pytest.approx(50.0)  # 1 / 20 ms TPOT
    assert first.tokens_per_s_per_gpu == pytest.approx(first.output_tokens_per_s / 2)


def test_library_api_and_cli_agree(sweep_files: list[Path]) -> None:
    args = [str(p) for p in sweep_files]
    report = servetrace.capacity(
        args, rates=list(RATES), goodput=["ttft<=100ms"], attainment="90%", gpus=2
    )
    assert report.capacity is not None and report.capacity.rate == pytest.approx(3.0)
    rate_flags = [x for r in RATES for x in ("--rate", str(r))]
    result = runner.invoke(
        app,
        [
            "capacity",
            *args,
            *rate_flags,
            "--goodput",
            "ttft<=100ms",
            "--gpus",
            "2",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["capacity"]["requests_per_s"] == pytest.approx(3.0)
    assert doc["capacity"]["bound"] == "interpolated"
    assert [r["label"] for r in doc["runs"]] == ["qps_1", "qps_2", "qps_4", "qps_8"]
    assert [r["attainment"] for r in doc["runs"]] == [1.0, 1.0, 0.8, 0.4]
    assert doc["runs"][0]["latency_ms"]["ttft_p50"] == 50.0
    table = runner.invoke(
        app,
        ["capacity", *args, *rate_flags, "--goodput", "ttft<=100ms"],
        env={"COLUMNS": "200"},
    )
    assert table.exit_code == 0
    assert (
        "capacity at 90% SLO attainment (ttft<=100ms): 3.00 req/s, linearly interpolated "
        "between qps_2 (2.00 req/s, 100.0%) and qps_4 (4.00 req/s, 80.0%)" in table.stdout
    )
    md = runner.invoke(
        app, ["capacity", *args, *rate_flags, "--goodput", "ttft<=100ms", "--format", "markdown"]
    )
    assert "| qps_4 | 4.00 |" in md.stdout
    csv_out = runner.invoke(
        app, ["capacity", *args, *rate_flags, "--goodput", "ttft<=100ms", "--format", "csv"]
    )
    assert csv_out.stdout.splitlines()[3].startswith("qps_4,4.0,")


def test_usage_errors_exit_2(sweep_files: list[Path]) -> None:
    args = [str(p) for p in sweep_files]
    wrong = runner.invoke(app, ["capacity", *args, "--rate", "1", "--goodput", "ttft<=1s"])
    assert wrong.exit_code == 2 and "one per run" in wrong.stderr
    bad = runner.invoke(app, ["capacity", args[0], "--rate", "1", "--attainment", "120%"])
    assert bad.exit_code == 2 and "--attainment" in bad.stderr
    nan = runner.invoke(app, ["capacity", args[0], "--rate", "nan"])
    assert nan.exit_code == 2


def test_attainment_and_labels() -> None:
    assert parse_attainment("90%") == pytest.approx(0.9)
    assert parse_attainment("0.95") == 0.95
    with pytest.raises(UsageError):
        parse_attainment("0")
    # capacity labels its runs as analyze does (servetrace.runs.labels)
    assert make_labels([Path("d/serving_x_qps_01.json"), Path("d/serving_x_qps_16.json")]) == [
        "qps_01",
        "qps_16",
    ]
    assert make_labels([Path("a/run.json"), Path("b/run.json")]) == ["a", "b"]


def test_no_goodput_means_no_capacity(sweep_files: list[Path]) -> None:
    report = servetrace.capacity([str(p) for p in sweep_files], rates=list(RATES))
    assert report.capacity is None
    assert any("no --goodput target" in n for n in report.notes)
