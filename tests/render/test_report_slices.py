"""The report's over-time section draws the per-slice figures when they are given."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("altair")

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.slices import slice_figures
from servetrace.render.report_sections import TraceView, over_time_section
from tests.factories import synthetic_events


def test_over_time_section_uses_slices_when_present() -> None:
    events = synthetic_events(200)
    analysis = analyze_events(events)
    plain = over_time_section(TraceView("t", analysis), "p-")
    assert [name for name, _ in plain.charts] == ["p-rates", "p-levels"]
    slices = slice_figures(analysis, 2_000_000_000, events=events)
    section = over_time_section(TraceView("t", replace(analysis, slices=slices)), "p-")
    names = [name for name, _ in section.charts]
    assert names == ["p-rates", "p-levels", "p-slices"]
    data = next(spec for name, spec in section.charts if name == "p-slices")["datasets"]
    rows = next(iter(data.values()))
    ttft = [r["value"] for r in rows if r["series"] == "TTFT p99"]
    assert ttft == pytest.approx((slices["ttft_p99_ns"].drop_nulls() / 1e6).round(3).to_list())
