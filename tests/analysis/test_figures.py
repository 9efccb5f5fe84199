"""analysis.figures by hand: the rates, the failed-cancellation rule, the notes."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.analysis.figures import (
    THROUGHPUT_KEYS,
    failed,
    notes,
    rates,
    window_aggregates,
)
from servetrace.units import NS_PER_S


def _requests() -> pl.DataFrame:
    # Three requests over 0-4 s: two completed (10 and 30 output tokens), one cancelled.
    return pl.DataFrame(
        {
            "outcome": ["completed", "completed", "cancelled"],
            "arrival_ns": [0, 1 * NS_PER_S, 2 * NS_PER_S],
            "e2e_ns": [2 * NS_PER_S, 3 * NS_PER_S, 1 * NS_PER_S],
            "output_tokens": [10, 30, 7],
            "prompt_tokens": [100, 300, 50],
        }
    )


def test_rates_over_first_arrival_to_last_end() -> None:
    window = _requests().select(window_aggregates()).row(0, named=True)
    out = rates(window, goodput_met=1)
    assert out == {
        "window_s": 4.0,
        "requests_per_s": 2 / 4,
        "output_tokens_per_s": 40 / 4,
        "total_tokens_per_s": (40 + 400) / 4,
        "goodput_requests_per_s": 1 / 4,
    }


def test_no_prompt_length_no_total_rate_and_no_targets_no_goodput() -> None:
    frame = _requests().with_columns(pl.Series("prompt_tokens", [100, None, 50]))
    out = rates(frame.select(window_aggregates()).row(0, named=True), goodput_met=None)
    assert out["total_tokens_per_s"] is None and out["goodput_requests_per_s"] is None
    assert out["output_tokens_per_s"] == pytest.approx(10.0)


def test_a_window_without_length_has_no_rates() -> None:
    one = _requests().head(1).with_columns(pl.lit(0, pl.Int64).alias("e2e_ns"))
    assert rates(one.select(window_aggregates()).row(0, named=True), 0) == dict.fromkeys(
        THROUGHPUT_KEYS
    )


def test_a_cancellation_fails_with_an_error_code_other_than_499() -> None:
    codes = pl.DataFrame({"error_code": [None, 429, 499, 500]})
    assert codes.select(failed(codes.columns))["error_code"].to_list() == [
        False,  # no code: a client giving up
        True,
        False,
        True,
    ]
    assert pl.DataFrame({"x": [1]}).select(failed(["x"]).alias("f"))["f"].to_list() == [False]


def test_notes_for_few_completed_requests_and_unknown_send_times() -> None:
    assert notes(100, True) == []
    assert notes(0, True) == []
    assert notes(99, True) == ["only 99 completed requests: p99 and p99.9 are unreliable"]
    assert notes(1, False)[1].startswith("send times are unknown in this trace")
