"""``collector.paused``: the cyclic collector is off during the call, as found after."""

from __future__ import annotations

import gc

import pytest

from servetrace.analysis.collector import paused


@paused
def _state(fail: bool = False) -> bool:
    if fail:
        raise ValueError("boom")
    return gc.isenabled()


def test_off_during_the_call_and_on_again_after() -> None:
    assert gc.isenabled()
    assert _state() is False
    assert gc.isenabled()


def test_restored_when_the_call_raises() -> None:
    with pytest.raises(ValueError, match="boom"):
        _state(fail=True)
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        assert _state() is False
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_grouped_summaries_run_with_the_collector_paused() -> None:
    from servetrace.analysis.groups import summarize_groups

    assert getattr(summarize_groups, "__wrapped__", None) is not None
