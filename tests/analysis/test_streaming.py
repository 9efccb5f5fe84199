"""The batched (larger-than-memory) path gives the in-memory answers."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.histogram import (
    RELATIVE_BOUND,
    RESOLUTION,
    GapBudget,
    LogHistogram,
    PooledGaps,
)
from servetrace.analysis.streaming import NotTimeOrdered, analyze_streaming
from servetrace.sources.canonical import read_events
from servetrace.stats.describe import describe
from tests.analysis.test_lifecycle import CASES
from tests.analysis.test_properties import traces
from tests.conftest import MS, events, make_request


def _as_log(frame: pl.DataFrame, path: Path) -> str:
    """Write rows in time order, as an engine's log would be."""
    frame.sort("ts", maintain_order=True).write_parquet(path)
    return str(path)


def _same_requests(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return (
        a.drop("_key", strict=False)
        .sort("request_id")
        .equals(b.drop("_key", strict=False).sort("request_id"))
    )


PERCENTILES = ("p50", "p90", "p95", "p99", "p99_9")
EXACT_STATS = ("count", "min", "max")


def _assert_distribution(got: dict, expected: dict, *, exact: bool) -> None:
    """Every statistic of the streamed ITL against the in-memory one.

    count/min/max are always exact, mean and std exact up to float summation order; the
    percentiles are identical while the gaps are kept exactly and within
    ``RELATIVE_BOUND`` of the in-memory linear-interpolation percentile beyond.
    """
    if expected["count"] == 0:
        assert got == expected
        return
    for stat in EXACT_STATS:
        assert got[stat] == expected[stat], stat
    scale = max(abs(expected["max"]), 1.0)
    for stat in ("mean", "std"):
        assert got[stat] == pytest.approx(expected[stat], rel=1e-9, abs=1e-9 * scale), stat
    for stat in PERCENTILES:
        if exact:
            assert got[stat] == expected[stat], stat
        else:
            # 1e-12 relative: float rounding of the interpolation itself
            bound = (RELATIVE_BOUND + 1e-12) * abs(expected[stat])
            assert abs(got[stat] - expected[stat]) <= bound, (stat, got[stat], expected[stat])


def _stream_both_ways(path: str, batch_rows: int) -> tuple[dict, dict, dict]:
    whole = analyze_paths([path]).summary.metrics["itl"]
    exact = analyze_streaming(read_events([path]), batch_rows=batch_rows)
    binned = analyze_streaming(read_events([path]), batch_rows=batch_rows, exact_gaps=0)
    return whole, exact.summary.metrics["itl"], binned.summary.metrics["itl"]


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(frame=traces(), batch_rows=st.integers(1, 7))
def test_streaming_matches_in_memory(frame: pl.DataFrame, batch_rows: int, tmp_path: Path) -> None:
    path = _as_log(frame, tmp_path / "t.parquet")
    whole = analyze_paths([path])
    streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
    assert _same_requests(whole.requests, streamed.requests)
    assert streamed.summary.accounting == whole.summary.accounting
    assert streamed.summary.concurrency == whole.summary.concurrency
    assert streamed.summary.outcomes == whole.summary.outcomes
    _assert_distribution(streamed.summary.metrics["itl"], whole.summary.metrics["itl"], exact=True)
    binned = analyze_streaming(read_events([path]), batch_rows=batch_rows, exact_gaps=0)
    _assert_distribution(binned.summary.metrics["itl"], whole.summary.metrics["itl"], exact=False)


# ----------------------------------------------------------- adversarial gap distributions
def _gaps(draw: st.DrawFn, kind: str, size: int) -> list[int]:
    ns = st.integers(0, 10**12)
    if kind == "two_point":
        a, b = draw(ns), draw(ns)
        return [a if draw(st.booleans()) else b for _ in range(size)]
    if kind == "all_equal":
        return [draw(ns)] * size
    if kind == "one_huge":
        small = draw(st.integers(0, 10**7))
        huge = [draw(st.integers(10**11, 10**13))]
        return [small + i % 3 for i in range(size - 1)] + huge
    if kind == "heavy_tail":  # Pareto(α = 0.7): most gaps small, a few enormous
        u = draw(st.lists(st.floats(1e-9, 1.0), min_size=size, max_size=size))
        return [min(int(10**5 * x ** (-1 / 0.7)), 10**13) for x in u]
    if kind == "near_bucket_edges":  # many distinct values packed into few buckets
        base = draw(st.integers(10**6, 10**9))
        return [base + draw(st.integers(0, base // 2000)) for _ in range(size)]
    return draw(st.lists(ns, min_size=size, max_size=size))  # anything


@st.composite
def gap_traces(draw: st.DrawFn) -> pl.DataFrame:
    """Completed requests whose gaps follow one adversarial shape, interleaved in time."""
    kind = draw(
        st.sampled_from(
            ["two_point", "all_equal", "one_huge", "heavy_tail", "near_bucket_edges", "any"]
        )
    )
    n_requests = draw(st.integers(1, 5))
    rows = []
    for r in range(n_requests):
        size = draw(st.integers(0, 25)) if kind != "one_huge" else draw(st.integers(2, 25))
        gaps = _gaps(draw, kind, size)
        start = draw(st.integers(0, 10**6))  # requests overlap: batches split them
        t = start + 2
        rows += [
            {"request_id": f"r{r}", "event": "arrival", "ts": start},
            {"request_id": f"r{r}", "event": "admission", "ts": start + 1},
            {"request_id": f"r{r}", "event": "first_token", "ts": t},
        ]
        for gap in gaps:
            t += gap
            rows.append({"request_id": f"r{r}", "event": "token", "ts": t})
        rows.append({"request_id": f"r{r}", "event": "completion", "ts": t})
    return pl.DataFrame(rows, schema={"request_id": pl.String, "event": pl.String, "ts": pl.Int64})


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@pytest.mark.slow  # several seconds: run by `pytest -m slow`
@given(frame=gap_traces(), batch_rows=st.integers(1, 9))
def test_every_streamed_statistic_meets_its_bound(
    frame: pl.DataFrame, batch_rows: int, tmp_path: Path
) -> None:
    path = _as_log(frame, tmp_path / "t.parquet")
    whole, exact, binned = _stream_both_ways(path, batch_rows)
    _assert_distribution(exact, whole, exact=True)
    _assert_distribution(binned, whole, exact=False)


def test_two_gaps_give_the_interpolated_median(tmp_path: Path) -> None:
    """Gaps of 10 and 100 ms gave p50 100 ms streamed against 55 ms in memory."""
    frame = events(make_request("a", admission=0, first=1, ticks=[11, 111], complete=111))
    path = _as_log(frame, tmp_path / "t.parquet")
    whole, exact, binned = _stream_both_ways(path, batch_rows=2)
    assert whole["p50"] == exact["p50"] == 55 * MS
    # p90 = 10 + 0.9·90 = 91 ms: both order statistics are bucket edges, read exactly
    assert binned["p50"] == 55 * MS and binned["p90"] == 91 * MS


def test_histogram_is_exact_for_few_distinct_values() -> None:
    """A bucket's first and last values are kept, so a skewed two-value trace is exact."""
    gaps = pl.Series([750_000] * 95 + [15_000_000] * 5, dtype=pl.Int64)  # 0.75 / 15 ms
    histogram = LogHistogram()
    histogram.add(gaps[:60])
    histogram.add(gaps[60:])  # merging two batches keeps the bucket bounds
    got, expected = histogram.describe(), describe(gaps)
    # p95: h = 0.95·99 = 94.05, between the last 0.75 ms and the first 15 ms gap
    assert expected["p95"] == pytest.approx(750_000 + 0.05 * 14_250_000)
    assert {k: got[k] for k in PERCENTILES} == {k: expected[k] for k in PERCENTILES}
    assert got["mean"] == 1_462_500 and got["std"] == pytest.approx(expected["std"], rel=1e-12)


def test_histogram_midpoint_error_is_within_the_bound() -> None:
    """Many distinct values in one bucket: the interior ranks are estimated at the
    log-midpoint of the bucket, the worst case of the bound."""
    key = math.floor(math.log1p(10**9) * RESOLUTION)
    lo = math.ceil(math.expm1(key / RESOLUTION)) + 1  # just inside one bucket
    hi = math.floor(math.expm1((key + 1) / RESOLUTION)) - 1
    step = (hi - lo) // 50
    gaps = pl.Series([lo, *range(lo + step, hi, step), hi], dtype=pl.Int64)
    histogram = LogHistogram()
    histogram.add(gaps)
    assert histogram.buckets.height == 1
    got, expected = histogram.describe(), describe(gaps)
    for stat in PERCENTILES:
        assert abs(got[stat] - expected[stat]) <= RELATIVE_BOUND * expected[stat], stat
    assert got["p50"] != expected["p50"]  # really estimated, not looked up
    assert 1.2e-4 < RELATIVE_BOUND < 1.25e-4  # the README's ±0.0125 % holds


def test_histogram_order_statistic_index() -> None:
    """Hand-computed: gaps 1, 2, 3, 4 ns (each its own bucket). p50: h = 1.5 → 2.5;
    p90: h = 2.7 → 3.7; p99_9: h = 2.997 → 3.997 (quantile index off by one breaks it)."""
    histogram = LogHistogram()
    histogram.add(pl.Series([4, 1, 3, 2], dtype=pl.Int64))
    got = histogram.describe()
    assert got["p50"] == pytest.approx(2.5)
    assert got["p90"] == pytest.approx(3.7)
    assert got["p95"] == pytest.approx(3.85)
    assert got["p99_9"] == pytest.approx(3.997)
    assert (got["count"], got["min"], got["max"], got["mean"]) == (4, 1, 4, 2.5)
    assert got["std"] == pytest.approx(math.sqrt(1.25))


def test_gap_budget_is_shared_and_falls_back_to_the_histogram() -> None:
    budget = GapBudget(limit=5)
    a, b = PooledGaps(budget), PooledGaps(budget)
    a.add(pl.Series([1, 2], dtype=pl.Int64))
    a.add(pl.Series([3], dtype=pl.Int64))
    b.add(pl.Series([10, 20], dtype=pl.Int64))
    assert a.exact and b.exact and budget.held == 5
    a.add(pl.Series([4], dtype=pl.Int64))  # over the shared limit: a spills, frees 3
    assert not a.exact and b.exact and budget.held == 2
    assert a.describe()["p50"] == 2.5 and a.describe()["count"] == 4
    assert b.describe() == describe(pl.Series([10, 20], dtype=pl.Int64))
    assert PooledGaps().describe()["count"] == 0
    alone = PooledGaps()  # its own default budget
    alone.add(pl.Series([7, None], dtype=pl.Int64))
    assert alone.exact and alone.describe()["count"] == 1 and alone.budget.held == 1


def test_streamed_warning_only_when_the_histogram_was_used(tmp_path: Path) -> None:
    frame = events(make_request("a", admission=0, first=1, ticks=[2, 4], complete=4))
    path = _as_log(frame, tmp_path / "t.parquet")
    exact = analyze_streaming(read_events([path]), batch_rows=2)
    binned = analyze_streaming(read_events([path]), batch_rows=2, exact_gaps=1)
    assert not any("histogram" in w for w in exact.summary.warnings)
    assert any("log histogram (within ±0.0122%)" in w for w in binned.summary.warnings)


def test_streaming_keeps_quarantine_and_release(tmp_path: Path) -> None:
    frame = events(
        make_request("a", admission=1, first=2, ticks=[3], complete=3, release=9),
        make_request("leak", admission=1, first=2, complete=4),
        CASES["duplicate_first_token"],
    )
    path = _as_log(frame, tmp_path / "t.parquet")
    streamed = analyze_streaming(read_events([path]), batch_rows=2)
    whole = analyze_paths([path])
    assert streamed.summary.violations == whole.summary.violations
    assert streamed.summary.leaked_state == whole.summary.leaked_state
    assert (
        streamed.quarantine.height == whole.quarantine.height == len(CASES["duplicate_first_token"])
    )


def test_histogram_is_exact_below_resolution_ns() -> None:
    """Integers below ~RESOLUTION ns each get their own bucket: zero and one-ns gaps (a
    coarse clock) are read exactly, not as a midpoint between them."""
    gaps = pl.Series([0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4000, 4001], dtype=pl.Int64)
    histogram = LogHistogram()
    histogram.add(gaps)
    got, expected = histogram.describe(), describe(gaps)
    assert got == expected | {"std": got["std"]}
    assert got["std"] == pytest.approx(expected["std"], rel=1e-12)
    assert got["p50"] == 1  # h = 6.5: between the seventh and eighth gap, both 1 ns


def test_histogram_reads_a_buckets_first_and_last_value_exactly() -> None:
    """Two different gaps in one bucket: p50 interpolates between the bucket's first and
    last value, both known exactly, so every percentile is exact (not a midpoint)."""
    key = math.floor(math.log1p(10**9) * RESOLUTION)
    lo = math.ceil(math.expm1(key / RESOLUTION)) + 1
    gaps = pl.Series([lo + 1000, lo], dtype=pl.Int64)
    histogram = LogHistogram()
    histogram.add(gaps)
    assert histogram.buckets.height == 1
    got = histogram.describe()
    assert got["p50"] == lo + 500 and got["p90"] == lo + 900
    assert {k: got[k] for k in PERCENTILES} == {k: describe(gaps)[k] for k in PERCENTILES}


def test_streamed_groups_match_each_group_in_memory(tmp_path: Path) -> None:
    """--by streamed: each group's ITL is exact within the shared budget, within the
    bound beyond it (budget 3 < the 6 gaps of both groups together)."""
    frame = events(
        make_request("a1", admission=0, first=1, ticks=[11, 111], complete=111, policy="a"),
        make_request("a2", admission=5, first=6, ticks=[8, 9], complete=9, policy="a"),
        make_request("b1", admission=2, first=3, ticks=[4, 1004], complete=1004, policy="b"),
    )
    path = _as_log(frame, tmp_path / "t.parquet")
    whole = analyze_paths([path])
    gaps = whole.gaps.join(whole.per_request.select("_key", "policy"), on="_key")
    expected = {p: describe(gaps.filter(pl.col("policy") == p)["itl_ns"]) for p in ("a", "b")}
    for budget, exact in ((10, True), (3, False)):
        streamed = analyze_streaming(
            read_events([path]), batch_rows=2, by="policy", exact_gaps=budget
        )
        assert streamed.itl_by is not None and streamed.itl_by[0] == "policy"
        groups = streamed.itl_by[1]
        assert set(groups) == {"a", "b"}
        for policy in ("a", "b"):
            _assert_distribution(groups[policy], expected[policy], exact=exact)
    assert expected["a"]["p50"] == 6 * MS  # gaps 10, 100, 2, 1 ms → (2 + 10) / 2


def _equal_time_log() -> pl.DataFrame:
    """A log sorted by ts where rows sharing a timestamp are written against lifecycle
    order: completion before the last token, release before completion, the admission
    before the arrival, a preemption before the token at its time."""
    rows = []
    for rid, t0 in (("a", 0), ("b", 1), ("c", 2)):
        rows += [
            {"request_id": rid, "event": "admission", "ts": t0 * MS},
            {"request_id": rid, "event": "arrival", "ts": t0 * MS},
            {"request_id": rid, "event": "first_token", "ts": (t0 + 3) * MS, "tokens": 1},
            {"request_id": rid, "event": "preemption", "ts": (t0 + 4) * MS},
            {"request_id": rid, "event": "token", "ts": (t0 + 4) * MS, "tokens": 1},
            {"request_id": rid, "event": "admission", "ts": (t0 + 5) * MS},
            {"request_id": rid, "event": "release", "ts": (t0 + 6) * MS},
            {"request_id": rid, "event": "completion", "ts": (t0 + 6) * MS},
            {"request_id": rid, "event": "token", "ts": (t0 + 6) * MS, "tokens": 2},
        ]
    return events(rows).sort("ts", maintain_order=True)


@pytest.mark.slow
def test_equal_timestamps_never_look_out_of_order_at_any_batch_size(tmp_path: Path) -> None:
    frame = _equal_time_log()
    path = tmp_path / "ties.parquet"
    frame.write_parquet(path)
    whole = analyze_paths([str(path)])
    assert whole.summary.violations == {} and whole.summary.outcomes["completed"] == 3
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([str(path)]), batch_rows=batch_rows)
        assert _same_requests(whole.requests, streamed.requests), batch_rows
        assert streamed.summary.accounting == whole.summary.accounting, batch_rows
        assert streamed.summary.leaked_state == whole.summary.leaked_state, batch_rows


def test_unsorted_log_is_told_to_sort_and_a_sorted_one_is_not(tmp_path: Path) -> None:
    good = make_request("a", admission=1, first=2, complete=3)
    late = [{"request_id": "a", "event": "token", "ts": 9 * MS, "tokens": 1}]
    fill = [make_request(f"f{i}", arrival=4 + i, admission=4 + i, first=4 + i) for i in range(4)]
    sorted_log = tmp_path / "sorted.parquet"
    events(good, *fill, late).write_parquet(sorted_log)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(sorted_log)]), batch_rows=4)
    assert "comes after the request finished" in caught.value.message
    assert "sort" not in caught.value.hint and "--no-streaming" in caught.value.hint
    unsorted_log = tmp_path / "unsorted.parquet"
    events(good, *fill, late).reverse().write_parquet(unsorted_log)
    with pytest.raises(NotTimeOrdered) as caught:
        analyze_streaming(read_events([str(unsorted_log)]), batch_rows=4)
    assert "sort it by ts" in caught.value.hint


@pytest.mark.parametrize("stray", [False, True])
def test_unadmitted_cancellation_is_placed_as_in_memory_at_any_batch_size(
    tmp_path: Path, stray: bool
) -> None:
    # "early" has neither admission nor output: queued when a valid request was admitted
    # (the server request "s", in another batch), client-side when only a stray one was.
    frame = events(
        make_request("early", arrival=0, cancel=1),
        make_request("c", arrival=2, first=3, ticks=[4], complete=4),
        make_request("s", arrival=5, admission=6, first=7, complete=7)
        if not stray
        else [{"request_id": "stray", "event": "admission", "ts": 6 * MS}],
    )
    path = _as_log(frame, tmp_path / "t.parquet")
    whole = analyze_paths([path])
    expected = "before_first_token" if stray else "queued"
    assert whole.requests.filter(pl.col("request_id") == "early")["cancelled_in"][0] == expected
    for batch_rows in range(1, frame.height + 1):
        streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
        assert _same_requests(whole.requests, streamed.requests), batch_rows
        assert streamed.summary.cancelled_in == whole.summary.cancelled_in, batch_rows
        assert streamed.summary.concurrency == whole.summary.concurrency, batch_rows
