"""Invariants over generated valid lifecycles (hypothesis)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servetrace.analysis.memory import analyze_events
from tests.analysis.test_lifecycle import CASES
from tests.conftest import events, make_request

DURATION_COLUMNS = (
    "queue_wait_ns",
    "prefill_ns",
    "ttft_ns",
    "decode_ns",
    "response_ns",
    "e2e_ns",
    "delivery_tail_ns",
    "itl_max_ns",
    "requeued_ns",
)
MEAN_COLUMNS = ("itl_mean_ns", "tpot_ns", "formula_residual_ns")


@st.composite
def lifecycle(draw: st.DrawFn, rid: str) -> list[dict]:
    """One valid request: times are whole ms so scaling stays exact."""
    ms = st.integers(min_value=0, max_value=50)
    arrival = draw(st.integers(0, 1_000))
    admit = arrival + draw(ms)
    n_ticks = draw(st.integers(0, 6))
    outcome = draw(st.sampled_from(["complete", "cancel", "in_flight"]))
    if outcome == "complete":
        n_ticks = max(n_ticks, 1)
    t = admit + draw(ms)
    ticks = []
    for _ in range(n_ticks):
        ticks.append(t)
        t += draw(ms)
    preempt: list[int] = []
    admissions = [admit]
    if ticks and draw(st.booleans()):
        # Preempt after the first tick, re-admit later, then shift the later ticks. Both
        # are strictly later: at equal timestamps lifecycle order would put the
        # re-admission before the preemption.
        at = ticks[0] + 1 + draw(ms)
        back = at + 1 + draw(ms)
        preempt, admissions = [at], [admit, back]
        ticks = [ticks[0]] + [back + 1 + (x - ticks[0]) for x in ticks[1:]]
    tokens = draw(st.lists(st.integers(1, 3), min_size=len(ticks), max_size=len(ticks)))
    end = max([admissions[-1], *ticks, *preempt]) + draw(ms)
    return make_request(
        rid,
        arrival=arrival,
        admission=admissions,
        preempt=preempt,
        first=ticks[0] if ticks else None,
        ticks=ticks[1:],
        tokens=tokens,
        complete=end if outcome == "complete" else None,
        cancel=end if outcome == "cancel" else None,
        prompt_tokens=draw(st.integers(1, 100)),
    )


@st.composite
def traces(draw: st.DrawFn) -> pl.DataFrame:
    n = draw(st.integers(1, 8))
    return events(*[draw(lifecycle(f"r{i}")) for i in range(n)])


def by_id(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop("_key", strict=False).sort("request_id")


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(traces())
def test_valid_lifecycles_are_all_analysed(frame: pl.DataFrame) -> None:
    analysis = analyze_events(frame)
    a = analysis.summary.accounting
    assert a.rows == frame.height == a.rows_analyzed
    assert a.rows_quarantined == 0 and a.requests_invalid == 0
    assert analysis.requests.height == frame["request_id"].n_unique()


@pytest.mark.slow
@SETTINGS
@given(traces(), st.randoms(use_true_random=False))
def test_shuffling_rows_changes_nothing(frame: pl.DataFrame, rng) -> None:
    order = list(range(frame.height))
    rng.shuffle(order)
    shuffled = frame[order]
    assert by_id(analyze_events(shuffled).requests).equals(by_id(analyze_events(frame).requests))


@pytest.mark.slow
@SETTINGS
@given(traces(), st.integers(2, 1000))
def test_scaling_timestamps_scales_every_latency(frame: pl.DataFrame, k: int) -> None:
    base = by_id(analyze_events(frame).requests)
    scaled = by_id(analyze_events(frame.with_columns(pl.col("ts") * k)).requests)
    for column in DURATION_COLUMNS:
        assert scaled[column].to_list() == (base[column] * k).to_list(), column
    for column in MEAN_COLUMNS:
        expected, got = (base[column] * k).to_list(), scaled[column].to_list()
        for x, y in zip(expected, got, strict=True):
            assert (x is None and y is None) or abs(x - y) <= 1e-6 * max(1.0, abs(x))


@pytest.mark.slow
@SETTINGS
@given(traces())
def test_ttft_is_queue_wait_plus_prefill(frame: pl.DataFrame) -> None:
    r = analyze_events(frame).requests.filter(pl.col("ttft_ns").is_not_null())
    assert (r["ttft_ns"] == r["queue_wait_ns"] + r["prefill_ns"]).all()
    assert (r["ttft_ns"] >= r["queue_wait_ns"]).all()
    assert (r["response_ns"] >= r["ttft_ns"]).all()


@pytest.mark.slow
@SETTINGS
@given(traces(), st.sampled_from(sorted(CASES)))
def test_injected_violation_is_reported_under_exactly_its_rule(
    frame: pl.DataFrame, rule: str
) -> None:
    bad = events(CASES[rule])
    combined = pl.concat([frame, bad], how="diagonal_relaxed")
    analysis = analyze_events(combined)
    assert list(analysis.summary.violations) == [rule]
    assert analysis.summary.violations[rule]["examples"] == ["bad"]
    a = analysis.summary.accounting
    assert a.rows == combined.height == a.rows_analyzed + a.rows_quarantined
    assert a.rows_quarantined == bad.height
