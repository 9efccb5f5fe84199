"""``--by`` with goodput targets: every group's goodput is that of the group alone."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.analysis.memory import analyze_events, summarize_by
from servetrace.analysis.result import AnalysisOptions
from servetrace.analysis.summary import GoodputTarget
from servetrace.errors import UsageError
from tests.conftest import MS, events, make_request

TTFT_20 = GoodputTarget("ttft", "<=", 20 * MS)
TPOT_5 = GoodputTarget("tpot", "<=", 5 * MS)


def _frame(b_ticks: tuple[float, ...] = (19,)) -> pl.DataFrame:
    """a: TTFT 10, 30 ms, TPOT 4, 6 ms; b: TTFT 15 ms, TPOT 4 ms (without ``b_ticks``, one
    token: no TPOT); c: only a cancelled request. Every row carries its request's policy."""
    b_end = b_ticks[-1] if b_ticks else 15
    return events(
        make_request("a1", admission=1, first=10, ticks=[14, 18], complete=18, policy="a"),
        make_request("a2", admission=1, first=30, ticks=[36, 42], complete=42, policy="a"),
        make_request("b1", admission=1, first=15, ticks=b_ticks, complete=b_end, policy="b"),
        make_request("c1", admission=1, cancel=5, policy="c"),
    ).with_columns(pl.col("policy").forward_fill().over("request_id"))


def test_goodput_per_group_hand_computed_and_alone() -> None:
    frame = _frame()
    options = AnalysisOptions(goodput=(TTFT_20, TPOT_5))
    groups = summarize_by(analyze_events(frame, options), "policy", options)
    a, b, c = (groups[v].goodput for v in ("a", "b", "c"))
    assert a is not None and b is not None and c is not None
    assert (a["requests_met"], a["requests_completed"], a["fraction"]) == (1, 2, 0.5)
    assert a["attainment_by_target"] == {"ttft<=20ms": 0.5, "tpot<=5ms": 0.5}
    assert (b["requests_met"], b["fraction"]) == (1, 1.0)
    assert c == {
        "targets": ["ttft<=20ms", "tpot<=5ms"],
        "requests_met": 0,
        "requests_completed": 0,
        "fraction": None,
        "attainment_by_target": {"ttft<=20ms": None, "tpot<=5ms": None},
    }
    assert groups["a"].throughput["goodput_requests_per_s"] == pytest.approx(1 / 0.042)
    for value in ("a", "b", "c"):
        alone = analyze_events(frame.filter(pl.col("policy") == value), options).summary
        assert groups[value].goodput == alone.goodput, value


def test_a_group_no_request_can_be_judged_on_is_a_usage_error() -> None:
    """Group b's only completed request has no TPOT: as for the group analysed alone."""
    frame = _frame(b_ticks=()).filter(pl.col("policy") == "b")
    options = AnalysisOptions(goodput=(TPOT_5,))
    with pytest.raises(UsageError, match="goodput target tpot<=5ms: no completed request"):
        analyze_events(frame, options)
    both = _frame(b_ticks=()).filter(pl.col("policy") != "c")
    analysis = analyze_events(both, options)  # a has TPOTs: the trace passes
    with pytest.raises(UsageError, match="goodput target tpot<=5ms: no completed request"):
        summarize_by(analysis, "policy", options)
