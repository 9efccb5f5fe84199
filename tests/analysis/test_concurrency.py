"""analysis.concurrency by hand: levels held between changes, over each group's own span."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.analysis.concurrency import concurrency_by_group, levels, no_concurrency
from servetrace.analysis.groups import CODE, Groups
from servetrace.analysis.lifecycle import KEY


def _groups(rows: list[tuple[str, int, int, int, int]]) -> tuple[pl.DataFrame, Groups]:
    """(group, ts, d_queued, d_running, d_in_system) rows, one request per group."""
    frame = pl.DataFrame(
        rows, schema=["g", "ts", "d_queued", "d_running", "d_in_system"], orient="row"
    ).with_columns(pl.col("g").rank("dense").cast(pl.Int64).alias(KEY))
    groups = Groups.by(frame.unique(KEY, maintain_order=True).select(KEY, "g"), "g")
    return groups.coded(frame), groups


# Group a: one request queued at 0, running at 10, done at 40 (span 0-40).
# Group b: two requests, both in the system 100-110, one of them until 130 (span 100-130).
ROWS = [
    ("a", 0, 1, 0, 1),
    ("a", 10, -1, 1, 0),
    ("a", 40, 0, -1, -1),
    ("b", 100, 0, 1, 1),
    ("b", 100, 0, 1, 1),
    ("b", 110, 0, -1, -1),
    ("b", 130, 0, -1, -1),
]


def test_each_group_over_its_own_span() -> None:
    frame, groups = _groups(ROWS)
    a, b = concurrency_by_group(frame, groups, [0, 100], [40, 130], [True, True])
    # a: queued 1 for 10 of 40, running 1 for 30 of 40, in system 1 for 40 of 40
    assert a == {
        "queued_mean": 10 / 40,
        "queued_peak": 1,
        "running_mean": 30 / 40,
        "running_peak": 1,
        "in_system_mean": 1.0,
        "in_system_peak": 1,
    }
    # b: 2 running for 10, 1 for 20, over 30: (20 + 20) / 30; never queued
    assert b["running_mean"] == pytest.approx(40 / 30)
    assert b["running_peak"] == 2
    assert b["queued_mean"] == 0.0
    assert b["in_system_mean"] == pytest.approx(40 / 30)


def test_a_group_without_admissions_has_only_in_system() -> None:
    frame, groups = _groups(ROWS[:3])
    (out,) = concurrency_by_group(frame, groups, [0], [40], [False])
    assert out["queued_mean"] is None and out["running_peak"] is None
    assert out["in_system_mean"] == 1.0 and out["in_system_peak"] == 1


def test_changes_before_the_window_count_in_its_first_level_and_after_it_not() -> None:
    # The window 5-20 cuts group a: queued (level 1) 5-10, running 10-20.
    frame, groups = _groups(ROWS[:3])
    (out,) = concurrency_by_group(frame, groups, [5], [20], [True])
    assert out["queued_mean"] == pytest.approx(5 / 15)
    assert out["running_mean"] == pytest.approx(10 / 15)
    assert out["in_system_mean"] == 1.0


def test_the_whole_trace_is_one_group() -> None:
    frame, _ = _groups(ROWS)
    whole = Groups.whole(frame.select(KEY).unique())
    (out,) = concurrency_by_group(whole.coded(frame.drop(CODE)), whole, [0], [130], [True])
    # in system: 1 over 0-40, 0 over 40-100, 2 over 100-110, 1 over 110-130
    assert out["in_system_mean"] == pytest.approx((40 + 20 + 20) / 130)
    assert out["in_system_peak"] == 2
    assert out["queued_mean"] == pytest.approx(10 / 130)


def test_no_window_or_no_transitions_is_no_concurrency() -> None:
    frame, groups = _groups(ROWS[:3])
    assert concurrency_by_group(frame, groups, [None], [None], [True]) == [no_concurrency()]
    assert concurrency_by_group(frame, groups, [50], [50], [True]) == [no_concurrency()]
    assert concurrency_by_group(frame.clear(), groups, [0], [130], [True]) == [no_concurrency()]
    assert all(v is None for v in no_concurrency().values())


def _arrays(ts: list[int], deltas: list[tuple[int, int, int]]) -> tuple[np.ndarray, dict]:
    columns = np.array(deltas, dtype=np.int64).T
    names = ("queued", "running", "in_system")
    return np.array(ts, dtype=np.int64), dict(zip(names, columns, strict=True))


def test_hand_computed_levels() -> None:
    # in system: +1 at 0, +1 at 10, -1 at 20, -1 at 40; window [5, 30]
    ts, deltas = _arrays([0, 10, 20, 40], [(0, 0, 1), (0, 0, 1), (0, 0, -1), (0, 0, -1)])
    got = levels(ts, deltas, 5, 30)
    assert got is not None
    # level 1 on [5,10), 2 on [10,20), 1 on [20,30]: (5 + 20 + 10) / 25
    assert got["in_system"] == (pytest.approx(35 / 25), 2)
    assert levels(ts, deltas, 50, 50) is None
    assert levels(ts[:0], {k: v[:0] for k, v in deltas.items()}, 0, 10) is None


def test_the_same_bits_in_any_row_order_on_sums_beyond_float_precision() -> None:
    # 200 k transitions over 2e14 ns: Σ level · held passes 2^53, so the order of the
    # float additions shows in the last bits: they are added in time order, whatever
    # order the rows come in.
    rng = np.random.default_rng(7)
    n = 200_000
    ts = np.sort(rng.integers(0, 2 * 10**14, n))
    deltas = np.where(rng.random(n) < 0.55, 1, -1)
    shuffled = rng.permutation(n)
    ordered = levels(
        ts, {"queued": deltas, "running": -deltas, "in_system": deltas}, 10**9, 2 * 10**14 - 5
    )
    mixed = levels(
        ts[shuffled],
        {"queued": deltas[shuffled], "running": -deltas[shuffled], "in_system": deltas[shuffled]},
        10**9,
        2 * 10**14 - 5,
    )
    assert ordered == mixed
    assert ordered is not None and ordered["in_system"][0] > 2**53 / 2e14
