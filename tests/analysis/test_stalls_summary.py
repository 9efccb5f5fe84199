"""The figures the default views read are summed a block of gaps at a time, and the frame
of every gap is made only when asked for: the sums equal those of the whole frame, with
blocks far smaller than the run (so that gaps, membership pairs and ticks all cross block
boundaries), and the JSON report never makes the whole frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import servetrace
from servetrace.analysis import stall_findings, stalls_gaps, stalls_join, stalls_summary
from servetrace.analysis.stalls import Stalls
from servetrace.analysis.stalls_attribution import share_sums, shares_of
from servetrace.analysis.stalls_summary import in_tail
from tests.analysis.stall_fixtures import write_injected


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_injected(tmp_path_factory.mktemp("injected"))


def _stalls(paths: tuple[Path, Path]) -> Stalls:
    stalls = servetrace.analyze(paths[0], steps=paths[1]).stalls
    assert stalls is not None
    return stalls


def _views(stalls: Stalls) -> dict[str, Any]:
    return {
        "gaps": (stalls.gap_count, stalls.joined_count, stalls.unjoined),
        "overall": stalls.shares(),
        "tail": stalls.tail_shares(),
        "worst": stalls.worst().to_dicts(),
        "per_request": stalls.per_request(),
        "findings": stalls.findings,
    }


def test_small_blocks_sum_to_the_same_figures(
    injected: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _views(_stalls(injected))
    for module in (stalls_join, stalls_summary, stall_findings, stalls_gaps):
        monkeypatch.setattr(module, "BLOCK", 97)  # 10,086 gaps: 104 blocks
    assert _views(_stalls(injected)) == whole


def test_sums_are_those_of_the_whole_frame(injected: tuple[Path, Path]) -> None:
    stalls = _stalls(injected)
    gaps = stalls.gaps
    (overall,) = share_sums(gaps)
    (tail,) = share_sums(gaps, in_tail(stalls.tail_threshold_ns))
    assert stalls.shares() == shares_of(overall)
    assert stalls.tail_shares()["tail_gaps"] == stalls.tail.height == 120
    assert {k: v for k, v in stalls.tail_shares().items() if k.endswith("_share")} == {
        k: v for k, v in shares_of(tail).items() if k.endswith("_share")
    }
    # the worst stalls from the few candidates kept, and from every gap
    assert stalls.worst(3).equals(stalls.worst(stalls.sums.kept + 1).head(3))
    per = (
        stalls.tail.group_by("request_id")
        .agg(pl.len().alias("tail_stalls"))
        .sort("tail_stalls", "request_id", descending=[True, False])
    )
    assert stalls.per_request()["requests_with_tail_stalls"] == per.height == 68


def test_the_report_does_not_make_the_whole_frame(injected: tuple[Path, Path]) -> None:
    analysis = servetrace.analyze(injected[0], steps=injected[1])
    servetrace.to_dict(analysis)
    assert analysis.stalls is not None and "gaps" not in vars(analysis.stalls)
    assert analysis.stalls.gaps.height == 10_086  # made when asked for, then kept
    assert "gaps" in vars(analysis.stalls)
