"""The batched (larger-than-memory) path gives the in-memory answers."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.streaming import analyze_streaming
from servetrace.sources.canonical import read_events
from tests.analysis.test_lifecycle import CASES
from tests.analysis.test_properties import traces
from tests.conftest import events, make_request


def _as_log(frame: pl.DataFrame, path: Path) -> str:
    """Write rows in time order, as an engine's log would be."""
    frame.sort("ts", maintain_order=True).write_parquet(path)
    return str(path)


def _same_requests(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.drop("_key").sort("request_id").equals(b.drop("_key").sort("request_id"))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(frame=traces())
def test_streaming_matches_in_memory(frame: pl.DataFrame, tmp_path: Path) -> None:
    path = _as_log(frame, tmp_path / "t.parquet")
    whole = analyze_paths([path])
    streamed = analyze_streaming(read_events([path]), batch_rows=3)
    assert _same_requests(whole.requests, streamed.requests)
    assert streamed.summary.accounting == whole.summary.accounting
    assert streamed.summary.concurrency == whole.summary.concurrency
    assert streamed.summary.outcomes == whole.summary.outcomes
    for stat in ("count", "mean", "min", "max"):
        expected = whole.summary.metrics["itl"][stat]
        got = streamed.summary.metrics["itl"][stat]
        assert got == pytest.approx(expected) if expected is not None else got is None


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
        streamed.quarantine().height
        == whole.quarantine().height
        == len(CASES["duplicate_first_token"])
    )
