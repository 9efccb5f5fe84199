"""A log sorted by request, or unsorted, is partitioned by request_id and gives the
in-memory answers: every per-request value exactly, pooled ITL within its bound."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servetrace.analysis import dispatch, partitioned
from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.partitioned import analyze_partitioned, partition_count
from servetrace.analysis.result import Analysis
from servetrace.analysis.streaming import NotTimeOrdered, analyze_streaming
from servetrace.sources.canonical import read_events
from tests.analysis.test_lifecycle import CASES
from tests.analysis.test_properties import traces
from tests.analysis.test_streaming import _assert_distribution
from tests.conftest import MS, events, make_request


def _requests(analysis: Analysis) -> pl.DataFrame:
    return analysis.requests.sort("request_id")


def _without_itl(analysis: Analysis) -> dict[str, Any]:
    """The whole summary but the pooled ITL (and the warning that it was binned)."""
    summary = dataclasses.asdict(analysis.summary)
    summary["metrics"] = {k: v for k, v in summary["metrics"].items() if k != "itl"}
    # A batched engine keeps no ITL gaps to pick order statistics from: its interval is null.
    summary["intervals"] = {k: v for k, v in summary["intervals"].items() if k != "itl"}
    summary["warnings"] = tuple(w for w in summary["warnings"] if "log histogram" not in w)
    return summary


def _assert_same(got: Analysis, whole: Analysis, *, exact: bool = True) -> None:
    assert _requests(got).equals(_requests(whole))
    assert _without_itl(got) == _without_itl(whole)
    _assert_distribution(got.summary.metrics["itl"], whole.summary.metrics["itl"], exact=exact)
    if exact:
        assert got.summary.warnings == whole.summary.warnings
    rows = got.quarantine.columns
    assert got.quarantine.sort(rows).equals(whole.quarantine.select(rows).sort(rows))


def _orders(frame: pl.DataFrame, seed: int) -> dict[str, pl.DataFrame]:
    order = list(range(frame.height))
    random.Random(seed).shuffle(order)
    return {
        "by request": frame.sort("request_id", maintain_order=True),
        "shuffled": frame[order],
        "reversed": frame.reverse(),
    }


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@pytest.mark.slow  # several seconds: run by `pytest -m slow`
@given(frame=traces(), seed=st.integers(0, 2**32), parts=st.integers(1, 6), rows=st.integers(1, 9))
def test_any_row_order_gives_the_in_memory_answers(
    frame: pl.DataFrame, seed: int, parts: int, rows: int, tmp_path: Path
) -> None:
    for name, ordered in _orders(frame, seed).items():
        path = tmp_path / f"{name}.parquet"
        ordered.write_parquet(path)
        whole = analyze_paths([str(path)])
        trace = read_events([str(path)])
        _assert_same(analyze_partitioned(trace, batch_rows=rows, partitions=parts), whole)
        binned = analyze_partitioned(trace, batch_rows=rows, partitions=parts, exact_gaps=0)
        _assert_same(binned, whole, exact=False)


def _unsorted_trace(tmp_path: Path, n: int = 60) -> tuple[Path, pl.DataFrame]:
    """Overlapping requests (some cancelled, one invalid, one leaked), rows shuffled."""
    requests = []
    for i in range(n):
        start = 3 * i
        if i % 7 == 3:
            requests.append(make_request(f"c{i}", admission=start + 1, cancel=start + 2))
        else:
            ticks = [start + 5 + k * (1 + i % 4) for k in range(1 + i % 5)]
            requests.append(
                make_request(
                    f"r{i}",
                    arrival=start,
                    admission=start + 1,
                    first=start + 4,
                    ticks=ticks,
                    complete=ticks[-1] + 1,
                    release=ticks[-1] + 2,
                    policy="a" if i % 2 else "b",
                )
            )
    frame = events(*requests, CASES["duplicate_first_token"])
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=7)
    path = tmp_path / "unsorted.parquet"
    shuffled.write_parquet(path)
    return path, shuffled


def test_an_unsorted_log_is_spilled_and_equals_memory(tmp_path: Path) -> None:
    path, frame = _unsorted_trace(tmp_path)
    whole = analyze_paths([str(path)])
    assert whole.summary.accounting.requests_invalid == 1
    spill = tmp_path / "spill"
    spill.mkdir()
    seen: list[list[Path]] = []
    real = partitioned._spill

    def spy(*args: Any) -> list[Path]:
        files = real(*args)
        seen.append(files)
        # each file holds every row of its requests, and no request is in two files
        ids = [set(pl.read_parquet(f)["request_id"].drop_nulls().to_list()) for f in files]
        assert sum(map(len, ids)) == len(set().union(*ids))
        assert sum(pl.read_parquet(f).height for f in files) == frame.height
        return files

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partitioned, "_spill", spy)
        got = analyze_partitioned(read_events([str(path)]), batch_rows=50, spill_dir=spill)
    assert len(seen) == 1 and len(seen[0]) == partition_count(frame.height, 50) > 1
    assert list(spill.iterdir()) == []  # the spill is removed afterwards
    _assert_same(got, whole)


def test_streaming_a_log_out_of_time_order_partitions_it(tmp_path: Path) -> None:
    path, _ = _unsorted_trace(tmp_path)
    with pytest.raises(NotTimeOrdered):
        analyze_streaming(read_events([str(path)]), batch_rows=50)
    whole = analyze_paths([str(path)])
    _assert_same(analyze_paths([str(path)], streaming=True, batch_rows=50), whole)


def test_auto_mode_partitions_instead_of_loading_into_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = _unsorted_trace(tmp_path)
    whole = analyze_paths([str(path)], streaming=False)
    monkeypatch.setattr(dispatch, "AUTO_STREAMING_EVENTS", 1)
    monkeypatch.setattr(
        dispatch, "analyze_trace", lambda *a, **k: pytest.fail("fell back to memory")
    )
    calls: list[int] = []
    real = dispatch.analyze_partitioned

    def counted(*args: Any, **kwargs: Any) -> Analysis:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dispatch, "analyze_partitioned", counted)
    got = analyze_paths([str(path)], streaming=None, batch_rows=40)
    assert calls == [1]
    _assert_same(got, whole)
    assert not any("in memory instead" in w for w in got.summary.warnings)


def test_a_row_after_its_request_finished_is_one_request(tmp_path: Path) -> None:
    """The streamed path refused this log; partitioned it matches memory,
    with the late token counted in its own request (an invalid one, as in memory)."""
    frame = events(
        make_request("x", admission=1, first=2, complete=3),
        *[
            make_request(f"f{i}", admission=10 + i, first=11 + i, complete=12 + i)
            for i in range(40)
        ],
        [{"request_id": "x", "event": "token", "ts": 999 * MS}],
    )
    path = tmp_path / "late.parquet"
    frame.write_parquet(path)
    whole = analyze_paths([str(path)])
    _assert_same(analyze_paths([str(path)], streaming=True, batch_rows=10), whole)


def test_partitioned_by_group_matches_memory(tmp_path: Path) -> None:
    path, _ = _unsorted_trace(tmp_path)
    whole = analyze_paths([str(path)])
    got = analyze_partitioned(read_events([str(path)]), batch_rows=30, by="policy")
    assert got.itl_by is not None and got.itl_by[0] == "policy"
    gaps = whole.gaps.join(whole.per_request.select("_key", "policy"), on="_key")
    from servetrace.stats.describe import describe

    for policy in ("a", "b"):
        expected = describe(gaps.filter(pl.col("policy") == policy)["itl_ns"])
        _assert_distribution(got.itl_by[1][policy], expected, exact=True)


def test_hash_partitions_are_balanced_and_stable() -> None:
    ids = pl.DataFrame({"request_id": [f"req-{i}" for i in range(20_000)]})
    parts = ids.select(partitioned.partition_of(8))[partitioned.PART]
    counts = parts.value_counts()["count"]
    assert parts.min() == 0 and parts.max() == 7
    assert counts.max() < 1.1 * 20_000 / 8  # no partition far above its share
    again = ids.reverse().select(partitioned.partition_of(8))[partitioned.PART].reverse()
    assert again.equals(parts)
    assert partition_count(0, 10) == 1 and partition_count(10, 10) == 1
    assert partition_count(11, 10) == 2


def test_partitioned_keeps_the_fluidity_columns(tmp_path: Path) -> None:
    """--fluidity on a log out of time order: the partitioned engine shares the batched
    one's kernel (``pieces``), so its per-request fluidity equals memory's."""
    from servetrace.analysis.fluidity import FluidityTargets
    from servetrace.analysis.result import AnalysisOptions

    path, _ = _unsorted_trace(tmp_path)
    options = AnalysisOptions(fluidity=FluidityTargets(ttft_ns=30 * MS, tbt_ns=20 * MS))
    whole = analyze_paths([str(path)], options=options)
    got = analyze_partitioned(read_events([str(path)]), options, batch_rows=50)
    assert "fluidity_missed" in got.requests.columns
    _assert_same(got, whole)


def test_an_unadmitted_request_queues_when_another_partition_admits(tmp_path: Path) -> None:
    """Whether a request with neither admission nor output waited in a queue depends on
    the whole trace: admitted requests in one partition, such requests alone in another,
    and each cancelled one is cancelled while queued, as in memory."""
    ids = pl.DataFrame({"request_id": list(range(200))}).with_columns(partitioned.partition_of(2))
    admitted, bare = (
        ids.filter(pl.col(partitioned.PART) == part)["request_id"].to_list()[:4] for part in (0, 1)
    )
    frame = events(
        *[
            make_request(r, arrival=i, admission=i + 1, first=i + 2, complete=i + 3)
            for i, r in enumerate(admitted)
        ],
        *[make_request(r, arrival=50 + i, cancel=60 + i) for i, r in enumerate(bare)],
    )
    path = tmp_path / "split.parquet"
    frame.write_parquet(path)
    whole = analyze_paths([str(path)])
    got = analyze_partitioned(read_events([str(path)]), batch_rows=5, partitions=2)
    cancelled = got.requests.filter(pl.col("request_id").is_in(bare))
    assert cancelled["cancelled_in"].to_list() == ["queued"] * 4
    assert cancelled["queue_wait_ns"].to_list() == [10 * MS] * 4
    _assert_same(got, whole)
