"""analysis.concurrency by hand: levels held between changes, over each group's own span."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.analysis.concurrency import concurrency, concurrency_by, no_concurrency


def _transitions(rows: list[tuple[str, int, int, int, int]]) -> pl.DataFrame:
    """(group, ts, d_queued, d_running, d_in_system) rows."""
    return pl.DataFrame(
        rows, schema=["g", "ts", "d_queued", "d_running", "d_in_system"], orient="row"
    )


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
    spans = {"a": {"start": 0, "end": 40}, "b": {"start": 100, "end": 130}}
    out = concurrency_by(_transitions(ROWS), "g", spans, {"a": True, "b": True})
    # a: queued 1 for 10 of 40, running 1 for 30 of 40, in system 1 for 40 of 40
    assert out["a"] == {
        "queued_mean": 10 / 40,
        "queued_peak": 1,
        "running_mean": 30 / 40,
        "running_peak": 1,
        "in_system_mean": 1.0,
        "in_system_peak": 1,
    }
    # b: 2 running for 10, 1 for 20, over 30: (20 + 20) / 30; never queued
    assert out["b"]["running_mean"] == pytest.approx(40 / 30)
    assert out["b"]["running_peak"] == 2
    assert out["b"]["queued_mean"] == 0.0
    assert out["b"]["in_system_mean"] == pytest.approx(40 / 30)


def test_a_group_without_admissions_has_only_in_system() -> None:
    spans = {"a": {"start": 0, "end": 40}}
    out = concurrency_by(_transitions(ROWS[:3]), "g", spans, {"a": False})["a"]
    assert out["queued_mean"] is None and out["running_peak"] is None
    assert out["in_system_mean"] == 1.0 and out["in_system_peak"] == 1


def test_changes_before_the_window_count_in_its_first_level_and_after_it_not() -> None:
    # The window 5-20 cuts group a: queued (level 1) 5-10, running 10-20.
    spans = {"a": {"start": 5, "end": 20}}
    out = concurrency_by(_transitions(ROWS[:3]), "g", spans, {"a": True})["a"]
    assert out["queued_mean"] == pytest.approx(5 / 15)
    assert out["running_mean"] == pytest.approx(10 / 15)
    assert out["in_system_mean"] == 1.0


def test_the_whole_trace_is_one_group() -> None:
    frame = _transitions(ROWS).drop("g")
    whole = concurrency(frame, 0, 130, True)
    # in system: 1 over 0-40, 0 over 40-100, 2 over 100-110, 1 over 110-130
    assert whole["in_system_mean"] == pytest.approx((40 + 20 + 20) / 130)
    assert whole["in_system_peak"] == 2
    assert whole["queued_mean"] == pytest.approx(10 / 130)


def test_no_window_or_no_transitions_is_no_concurrency() -> None:
    frame = _transitions(ROWS).drop("g")
    assert concurrency(frame, None, None, True) == no_concurrency()
    assert concurrency(frame, 50, 50, True) == no_concurrency()
    assert concurrency(frame.clear(), 0, 130, True) == no_concurrency()
    assert all(v is None for v in no_concurrency().values())
