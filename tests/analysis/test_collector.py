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


@paused
def _build(n: int) -> list[list[float]]:
    return [[float(i)] for i in range(n)]  # lists: always tracked by the collector


def test_what_the_call_built_is_not_left_young() -> None:
    """20,000 new containers, none left in the youngest generation (its next collection
    would walk them all); they are still tracked (collected in a full collection)."""
    gc.collect()
    built = _build(20_000)
    assert gc.get_count()[0] < 700  # below the first threshold: no collection pending
    assert gc.is_tracked(built) and gc.is_tracked(built[-1])
    assert gc.get_freeze_count() == 0


def test_objects_the_process_froze_stay_frozen() -> None:
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        _build(1000)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
