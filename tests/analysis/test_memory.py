"""The in-memory engine's own checks: implausible time spans."""

from __future__ import annotations

from servetrace.analysis.memory import analyze_events
from tests.conftest import events, make_request

DAY_MS = 86_400_000


def _spanning(days: float) -> list[str]:
    end = days * DAY_MS
    trace = events(make_request("a", admission=1, first=2, ticks=[3], complete=end))
    return [w for w in analyze_events(trace).summary.warnings if "--time-unit" in w]


def test_a_trace_of_more_than_30_days_is_flagged() -> None:
    assert _spanning(31) == [
        "the trace spans 31 days: are the timestamps in the unit you think? "
        "Set it with --time-unit ns|us|ms|s"
    ]
    assert len(_spanning(30.5)) == 1


def test_a_trace_of_30_days_or_less_is_plausible() -> None:
    assert _spanning(30) == []  # exactly 30 days: the limit itself is plausible
    assert _spanning(2) == []


def test_epoch_milliseconds_read_as_nanoseconds_are_flagged() -> None:
    start_ns = 1_700_000_000_000  # 2023 in epoch ms, read as ns
    trace = events(make_request("a", arrival=start_ns / 1e6, first=start_ns / 1e6 + 0.5))
    (warning,) = [w for w in analyze_events(trace).summary.warnings if "epoch" in w]
    assert warning.startswith("the timestamps look like epoch ms read as ns")
