"""--window equals analysing the filtered trace; --steady-state finds the plateau."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.slices import slice_figures
from servetrace.analysis.window import (
    longest_majority_span,
    parse_window,
    resolve,
    running_median,
)
from servetrace.cli import app
from servetrace.errors import UsageError
from servetrace.runs.time import steady_window
from servetrace.sim.simulate import simulate
from servetrace.sim.synthetic import synthetic_workload
from tests.factories import synthetic_events

S = 1_000_000_000
UP, FLAT = 30.0, 120.0  # warm-up ramp, then a flat arrival rate, then arrivals stop


def ramp_arrivals(n: int) -> np.ndarray:
    """Arrival times (ns) of a rate rising linearly for UP s, flat for FLAT s, then 0."""
    total = UP / 2 + FLAT
    x = (np.arange(n) + 0.5) / n * total
    t = np.where(x < UP / 2, np.sqrt(2 * x * UP), UP + (x - UP / 2))
    return (t * S).astype(np.int64)


@pytest.fixture(scope="module")
def ramp_events() -> pl.DataFrame:
    work = synthetic_workload(1200, 10.0, seed=3).with_columns(
        pl.Series("arrival_ns", ramp_arrivals(1200)),
        pl.lit(256).alias("prompt_tokens"),
        pl.lit(120).alias("output_tokens"),
    )
    return simulate(work)


def _run(*args: str) -> dict:
    result = CliRunner().invoke(app, ["analyze", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _without(report: dict, *keys: str) -> dict:
    return {k: v for k, v in report.items() if k not in (*keys, "inputs")}


def test_window_equals_the_filtered_trace(tmp_path: Path) -> None:
    events = synthetic_events(400, cancelled=20)
    trace = tmp_path / "trace.parquet"
    events.write_parquet(trace)
    origin = int(events["ts"].min())
    lo, hi = origin + 5 * S, origin + 12 * S
    arrivals = events.filter(pl.col("event") == "arrival")
    kept = arrivals.filter((pl.col("ts") >= lo) & (pl.col("ts") < hi))["request_id"]
    assert 0 < kept.len() < 400
    filtered = tmp_path / "filtered.parquet"
    events.filter(pl.col("request_id").is_in(kept.implode())).write_parquet(filtered)

    windowed = _run(str(trace), "--window", "5:12")
    alone = _run(str(filtered))
    assert _without(windowed, "window") == _without(alone)
    assert windowed["accounting"]["requests"] == kept.len()
    assert windowed["window"]["start_s"] == 5.0
    assert windowed["window"]["end_s"] == 12.0
    assert windowed["window"]["rule"] == "given: --window 5:12"


def test_streamed_window_equals_in_memory(tmp_path: Path) -> None:
    trace = tmp_path / "trace.parquet"
    synthetic_events(300, cancelled=10).sort("ts").write_parquet(trace)
    args = (str(trace), "--window", "3:9", "--slice", "1s")
    memory = _run(*args, "--no-streaming")
    streamed = _run(*args, "--streaming", "--batch-rows", "1000")
    # A batched engine keeps no ITL gaps to pick order statistics from: that interval alone
    # is null there (with its reason); every other figure is the same.
    for report in (memory, streamed):
        report["metrics"]["itl"].pop("ci95", None)
    assert memory == streamed
    assert memory["slices"][0]["start_s"] == 3.0


def test_window_bounds_open_units_and_timestamps() -> None:
    assert parse_window(":60").start is None
    assert parse_window("1m:").end is None
    spec = parse_window("1500ms:2m")
    window = resolve(spec, origin_ns=10 * S)
    assert (window.start_ns, window.end_ns) == (11.5 * S, 130 * S)
    stamp = parse_window("2025-01-01T00:00:10:2025-01-01T00:01:00+00:00")
    window = resolve(stamp, origin_ns=0)
    assert window.end_ns - window.start_ns == 50 * S
    for bad in ("60", "a:b", "30:10"):
        with pytest.raises(UsageError):
            resolve(parse_window(bad), 0)


def test_window_outside_the_trace_is_a_usage_error(tmp_path: Path) -> None:
    trace = tmp_path / "trace.parquet"
    synthetic_events(50).write_parquet(trace)
    result = CliRunner().invoke(app, ["analyze", str(trace), "--window", "9999:10000"])
    assert result.exit_code == 2
    assert "no request arrives" in result.output
    both = CliRunner().invoke(app, ["analyze", str(trace), "--window", "1:2", "--steady-state"])
    assert both.exit_code == 2


def test_majority_span_ignores_a_stray_bin_and_absorbs_a_short_excursion() -> None:
    inside = np.array([0, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 0, 0], dtype=bool)
    assert longest_majority_span(inside) == (5, 12)
    assert running_median(np.array([0.0, 1, 2, 3, 4, 5, 6]), 5).tolist() == [
        0,
        1,
        2,
        3,
        4,
        5,
        6,
    ]  # a ramp is not moved by the smoothing


@pytest.mark.slow
def test_steady_state_picks_a_window_inside_the_plateau(ramp_events: pl.DataFrame) -> None:
    analysis = analyze_events(ramp_events)
    window = steady_window(analysis)
    origin = analysis.timeline.trace_start_ns
    # Past 90 % of the warm-up ramp, before arrivals stop, covering most of the plateau.
    assert 0.9 * UP <= window.start_s <= UP + 5
    assert window.end_s is not None and UP + FLAT - 15 <= window.end_s <= UP + FLAT
    # Every 10 s slice within the window holds the plateau level (±10 %) ...
    slices = slice_figures(analysis, 10 * S, origin)
    inside = slices.filter(
        (pl.col("start_ns") >= window.start_ns) & (pl.col("end_ns") <= window.end_ns)
    )
    plateau = window.plateau_in_system
    assert plateau and inside.height >= 9
    assert ((inside["in_system_mean"] - plateau).abs() <= 0.1 * plateau).all()
    # ... while the table shows the phases: the first slice far below it, arrivals rising
    # through warm-up, and in the last (drain) more completing than arriving, the level
    # falling below the band.
    first, last = slices.row(0, named=True), slices.row(-1, named=True)
    assert first["in_system_mean"] < 0.5 * plateau
    assert slices["arrivals"][0] < slices["arrivals"][1] < slices["arrivals"][2]
    assert last["completed"] > last["arrivals"]
    assert last["in_system_mean"] < 0.95 * plateau


def test_steady_state_through_the_cli(tmp_path: Path, ramp_events: pl.DataFrame) -> None:
    trace = tmp_path / "ramp.parquet"
    ramp_events.write_parquet(trace)
    report = _run(str(trace), "--steady-state", "--slice", "10s")
    window = report["window"]
    assert window["rule"].startswith("steady state")
    assert window["start_s"] >= 0.9 * UP and window["end_s"] <= UP + FLAT
    # The windowed report equals --window over the window it reports.
    given = _run(str(trace), "--window", f"{window['start_s']!r}:{window['end_s']!r}")
    assert _without(given, "window") == _without(report, "window", "slices")
    starts = [row["start_s"] for row in report["slices"]]
    assert starts[0] == pytest.approx(window["start_s"])
    assert all(b - a == pytest.approx(10.0) for a, b in itertools.pairwise(starts))


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0ms:1ns", (0, 1)),
        ("1us:2µs", (1_000, 2_000)),
        ("1.5:2s", (1.5 * S, 2 * S)),
        ("1min:1h", (60 * S, 3600 * S)),
        ("1m:2m", (60 * S, 120 * S)),
    ],
)
def test_window_bounds_take_every_unit_of_the_rule_grammar(text: str, ns: tuple) -> None:
    window = resolve(parse_window(text), origin_ns=0)
    assert (window.start_ns, window.end_ns) == ns


def test_an_iso_start_starts_exactly_there() -> None:
    # A wrong seconds-per-day would move both bounds by hours and keep end - start.
    window = resolve(parse_window("2025-01-01T00:00:10Z:"), origin_ns=0)
    assert window.start_ns == 1_735_689_610 * S
    assert window.end_ns is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10:10", "the end must come after the start"),
        ("x:y:z", "'x' is neither"),
        ("0s:1e30s", "longer than any trace"),
        ("-1s:", "not before it"),
        ("9999-01-01T00:00:00:", "beyond the times a trace can hold"),
    ],
)
def test_a_window_that_means_nothing_is_one_usage_error(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        resolve(parse_window(text), origin_ns=0)


def test_a_window_far_beyond_the_trace_is_exit_2_in_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "trace.parquet"
    synthetic_events(20).write_parquet(trace)
    done = CliRunner().invoke(app, ["analyze", str(trace), "--window", "0s:1e30s"])
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output
    assert "longer than any trace" in done.stderr.splitlines()[0]
