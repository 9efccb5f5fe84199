"""servetrace reproduces the Vidur simulator's own figures on its four scheduler traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from servetrace.analysis.dispatch import analyze_paths

VIDUR = Path(__file__).parent.parent / "data" / "vidur"
NS = 1e9

# scheduler: (ttft p50, ttft p99, queue wait p50, preempted requests), Vidur's README (s)
VIDUR_FIGURES = {
    "vllm": (0.309, 4.932, 0.037, 2),
    "sarathi": (0.460, 2.783, 0.083, 0),
    "orca": (4.821, 22.590, 4.602, 0),
    "lightllm": (7.871, 17.507, 7.583, 0),
}


def trace(scheduler: str) -> str:
    return str(VIDUR / f"synthetic_arxiv_poisson_qps2.0_n1000__{scheduler}.parquet")


@pytest.mark.parametrize("scheduler", sorted(VIDUR_FIGURES))
def test_matches_vidur_figures(scheduler: str) -> None:
    ttft_p50, ttft_p99, queue_p50, preempted = VIDUR_FIGURES[scheduler]
    analysis = analyze_paths([trace(scheduler)])
    metrics = analysis.summary.metrics
    # Vidur rounds to the millisecond
    assert metrics["ttft"]["p50"] / NS == pytest.approx(ttft_p50, abs=5e-4)
    assert metrics["ttft"]["p99"] / NS == pytest.approx(ttft_p99, abs=5e-4)
    assert metrics["queue_wait"]["p50"] / NS == pytest.approx(queue_p50, abs=5e-4)
    assert int((analysis.requests["preemptions"] > 0).sum()) == preempted
    a = analysis.summary.accounting
    assert (a.requests, a.requests_invalid, a.rows_quarantined) == (1000, 0, 0)
    assert analysis.summary.outcomes["completed"] == 1000
