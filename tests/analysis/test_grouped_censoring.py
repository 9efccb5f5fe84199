"""``--by``: each group's Kaplan–Meier estimates and percentile intervals are those of
analysing the group alone (all groups are computed at once, in ``grouped_survival`` and
``grouped_intervals``), and the streamed engine's groups equal the in-memory ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from servetrace.analysis import intervals, survival
from servetrace.analysis.histogram import RELATIVE_BOUND
from servetrace.analysis.memory import Analysis, analyze_events, summarize_by
from servetrace.analysis.summary import Summary
from servetrace.render.summary import summary_dict
from tests.conftest import MS, events, make_request
from tests.factories import synthetic_events


def _hand_trace() -> pl.DataFrame:
    """ties: TTFT 10, 10, 20, 30 ms and one cancelled while queued at 15 ms; solo: one
    request; censored: two requests still in flight (one admitted, one queued)."""
    return events(
        make_request("t1", arrival=0, admission=1, first=10, complete=12, policy="ties"),
        make_request("t2", arrival=0, admission=2, first=10, complete=15, policy="ties"),
        make_request("t3", arrival=5, admission=6, first=25, complete=30, policy="ties"),
        make_request("t4", arrival=10, admission=12, first=40, complete=41, policy="ties"),
        make_request("t5", arrival=20, cancel=35, policy="ties"),
        make_request("s1", arrival=100, admission=101, first=105, complete=106, policy="solo"),
        make_request("c1", arrival=200, admission=205, policy="censored"),
        make_request("c2", arrival=202, policy="censored"),
    )


def _alone(frame: pl.DataFrame, column: str, value: object) -> Summary:
    return analyze_events(frame.filter(pl.col(column) == value)).summary


def test_hand_computed_groups() -> None:
    frame = _hand_trace().with_columns(pl.col("policy").forward_fill().over("request_id"))
    groups = summarize_by(analyze_events(frame), "policy")
    ties, solo, censored = groups["ties"], groups["solo"], groups["censored"]
    assert ties.survival is not None and solo.survival is not None
    assert censored.survival is not None
    # TTFT 10, 10 (events), 15 (censored), 20, 30: S = 0.6 at 10, 0.3 at 20, 0 at 30
    ttft = ties.survival["ttft"]
    assert (ttft["p50"], ttft["p90"], ttft["p99"]) == (20 * MS, 30 * MS, 30 * MS)
    assert (ttft["events"], ttft["censored_cancelled"], ttft["floor"]) == (4, 1, 0.0)
    # e2e 12, 15, 15 (censored), 25, 31: S = 0.8, 0.6, 0.3, 0 → p50 at 25 ms
    assert ties.survival["e2e"]["p50"] == 25 * MS
    assert solo.survival["ttft"]["p50"] == 5 * MS and solo.survival["ttft"]["floor"] == 0.0
    # all censored: in flight 5 and 3 ms at the group's end (205 ms), no quantile
    flying = censored.survival["ttft"]
    assert (flying["events"], flying["censored_in_flight"], flying["floor"]) == (0, 2, 1.0)
    assert flying["unreached"] == ["p50", "p90", "p99"] and flying["p50"] is None
    # queue wait: c1 admitted after 5 ms (event), c2 queued 3 ms (censored) → p50 5 ms
    assert censored.survival["queue_wait"]["p50"] == 5 * MS
    # intervals: 4 TTFTs cannot bound p50 at 95 % (it takes 6); one request, none
    assert ties.intervals["ttft"]["n"] == 4 and ties.intervals["ttft"]["intervals"]["p50"] is None
    assert ties.intervals["ttft"]["needed"]["p50"] == 6
    assert solo.intervals["ttft"]["n"] == 1 and solo.intervals["e2e"]["needed"]["p99"] == 368
    assert censored.intervals["ttft"] == {
        "confidence": 0.95,
        "n": 0,
        "intervals": dict.fromkeys(intervals.PERCENTILES),
        "needed": {},
    }
    for value in ("ties", "solo", "censored"):
        alone = _alone(frame, "policy", value)
        assert groups[value].survival == alone.survival, value
        assert groups[value].intervals == alone.intervals, value


def _generated(n: int = 600, seed: int = 0) -> pl.DataFrame:
    """Requests of many groups — sizes 1 to ~100, one group wholly in flight at its end,
    times on a 1 ms clock (ties) — cut at a time so some are in flight, others
    cancelled: every kind of censoring."""
    frame = synthetic_events(n, workload_seed=seed, latency_seed=seed + 1, cancelled=n // 10)
    frame = frame.with_columns(pl.col("ts") // MS * MS)  # a 1 ms clock: tied latencies
    ids = frame["request_id"].unique().sort()
    rng = np.random.default_rng(seed)
    group = pl.DataFrame(
        {"request_id": ids, "g": [f"g{int(k)}" for k in rng.zipf(1.6, ids.len()) % 23]}
    )
    frame = frame.join(group, on="request_id", how="left")
    cut = frame["ts"].quantile(0.9)
    # the last few arrivals form a group of their own, all still in flight at the cut
    late = frame.filter((pl.col("event") == "arrival") & (pl.col("ts") < cut)).sort("ts")
    tail = late["request_id"].tail(3)
    return frame.with_columns(
        pl.when(pl.col("request_id").is_in(tail.implode()))
        .then(pl.lit("late"))
        .otherwise(pl.col("g"))
        .alias("g")
    ).filter(pl.col("ts") < cut)


def test_every_group_gets_its_estimates_alone() -> None:
    frame = _generated()
    analysis = analyze_events(frame)
    groups = summarize_by(analysis, "g")
    sizes = {v: s.accounting.requests for v, s in groups.items()}
    assert min(sizes.values()) == 1 and len(groups) >= 10  # singletons, large groups
    late = groups["late"].survival
    assert late is not None and late["e2e"]["events"] == 0 and late["e2e"]["p50"] is None
    ties = 0
    for value, group in groups.items():
        alone = _alone(frame, "g", value)
        assert group.survival == alone.survival, value
        assert group.intervals == alone.intervals, value
        assert group.metrics == alone.metrics, value
        # and the single-trace functions on the group's own requests
        part = analysis.per_request.filter(pl.col("g") == value)
        completed = part.filter(pl.col("outcome") == "completed")
        gaps = analysis.gaps.join(part.select("_key"), on="_key")
        assert group.intervals == intervals.metric_intervals(completed, gaps), value
        end = groups[value].survival
        want = survival.estimate(
            part,
            group.metrics,
            _group_end(analysis, part),
            analysis.timeline.has_admissions,
            group.arrival_known,
        )
        assert end == want, value
        assert end is not None and want is not None
        for metric, entry in end.items():  # the report's key order too
            assert list(entry) == list(want[metric]), (value, metric)
        ties += completed["ttft_ns"].is_duplicated().any()
    assert ties  # some group has tied latencies


def _group_end(analysis: Analysis, part: pl.DataFrame) -> int:
    rows = analysis.timeline.requests.join(part.select("_key"), on="_key")
    times = [c for c in rows.columns if c.endswith("_ns") and rows.schema[c].is_integer()]
    return int(rows.select(pl.max_horizontal(pl.col(c).max() for c in times)).item())


def test_streamed_groups_equal_the_in_memory_groups(tmp_path: Path) -> None:
    """--by --streaming past the exact-gap budget (every gap in the log histogram):
    every per-request figure of every group is the in-memory one, bit for bit, and the
    ITL percentiles are within the histogram's bound."""
    from servetrace.analysis.streaming import analyze_streaming
    from servetrace.sources.canonical import read_events

    frame = _generated(seed=4)
    path = tmp_path / "trace.parquet"
    frame.sort("ts", maintain_order=True).write_parquet(path)
    memory = summarize_by(analyze_events(frame), "g")
    streamed_analysis = analyze_streaming(
        read_events([str(path)]), batch_rows=1_000, by="g", exact_gaps=0
    )
    streamed = summarize_by(streamed_analysis, "g")
    assert any("log histogram" in w for w in streamed_analysis.summary.warnings)
    assert list(streamed) == list(memory)
    estimated = 0
    for value in memory:
        got, want = summary_dict(streamed[value]), summary_dict(memory[value])
        got_itl, want_itl = got["metrics"].pop("itl"), want["metrics"].pop("itl")
        got_ci, _ = got_itl.pop("ci95", None), want_itl.pop("ci95", None)
        assert streamed[value].intervals["itl"]["unavailable"] == "streamed"
        assert got_ci is None or all(got_ci.get(p) is None for p in intervals.PERCENTILES)
        got["warnings"] = [w for w in got["warnings"] if "histogram" not in w]
        assert got == want, value
        if want_itl["count"] == 0:
            assert got_itl == want_itl, value
            continue
        for stat in ("count", "min", "max"):
            assert got_itl[stat] == want_itl[stat], (value, stat)
        for stat in ("mean", "std"):
            assert got_itl[stat] == pytest.approx(want_itl[stat], rel=1e-9), (value, stat)
        for stat in ("p50", "p90", "p95", "p99", "p99_9"):
            bound = RELATIVE_BOUND * abs(want_itl[stat])
            assert abs(got_itl[stat] - want_itl[stat]) <= bound, (value, stat)
            estimated += got_itl[stat] != want_itl[stat]
    assert estimated  # the histogram really estimated some percentile


def test_streamed_groups_past_a_shared_budget_are_the_same_on_every_run(tmp_path: Path) -> None:
    """Which group's gaps spill into the histogram once the shared budget is full must not
    depend on hash order: three runs, one answer."""
    from servetrace.analysis.streaming import analyze_streaming
    from servetrace.sources.canonical import read_events

    path = tmp_path / "trace.parquet"
    _generated(seed=5).sort("ts", maintain_order=True).write_parquet(path)
    runs = []
    for _ in range(3):
        analysis = analyze_streaming(
            read_events([str(path)]), batch_rows=1_000, by="g", exact_gaps=1_500
        )
        assert analysis.itl_by is not None
        runs.append(analysis.itl_by[1])
    held = [v for v, d in runs[0].items() if d["count"]]
    assert len(held) > 5
    assert runs[0] == runs[1] == runs[2]
