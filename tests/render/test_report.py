"""The HTML report without a browser: sections, sentences, sampling, self-containment."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

import servetrace

pytest.importorskip("altair")
pytest.importorskip("jinja2")
pytest.importorskip("vl_convert")

from servetrace.analysis.memory import analyze_events
from servetrace.comparison.compare import compare
from servetrace.render import series
from servetrace.render.report import render_html, report_sections
from servetrace.render.report_sections import TraceView
from servetrace.render.summary import report_dict
from tests.conftest import MS, events, make_request

ROOT = Path(__file__).parents[2]
REALISTIC = str(ROOT / "sample_traces/realistic.parquet")
FCFS = str(ROOT / "sample_traces/policy_fcfs.parquet")
CHUNKED = str(ROOT / "sample_traces/policy_chunked.parquet")
TWO_MB = 2 * 1024 * 1024


def _view(path: str) -> TraceView:
    return TraceView(path, servetrace.analyze(path))


@pytest.fixture(scope="module")
def realistic() -> TraceView:
    return _view(REALISTIC)


def test_every_section_has_charts_and_a_sentence(realistic: TraceView) -> None:
    ((title, sections),) = report_sections([realistic])
    assert title == REALISTIC
    ids = [s.id for s in sections]
    assert ids == [
        "t0-summary",
        "t0-cdfs",
        "t0-over-time",
        "t0-latency-time",
        "t0-waterfall",
        "t0-formula",
    ]
    for section in sections:
        assert section.charts, section.id
        assert section.sentence.endswith("."), section.id
    by_id = {s.id: s for s in sections}
    # Sentences read the numbers the JSON report holds (README: decode 74%, queue 24%).
    assert by_id["t0-summary"].sentence.startswith("Decode dominates: 74% of the mean response")
    assert "queue wait 24%" in by_id["t0-summary"].sentence
    assert "The queue peaked at 42 requests" in by_id["t0-over-time"].sentence
    assert "2,679 of 2,733 requests (98.0%)" in by_id["t0-formula"].sentence
    # 2,733 completed requests, more than the scatter budget: the page says it thinned them.
    assert "of 2,733 completed requests" in (by_id["t0-latency-time"].note or "")


def test_summary_table_cells_are_the_json_numbers(realistic: TraceView) -> None:
    ((_, sections),) = report_sections([realistic])
    doc = report_dict(realistic.analysis.summary, realistic.analysis.inputs)
    table = sections[0].table
    assert table is not None
    checked = 0
    for row in table["rows"]:
        for text, path in row[1:]:
            metric, stat = path.split(".")[1:]
            value = doc["metrics"][metric][stat]
            expected = f"{value:,}" if stat == "count" else f"{value:,.3f}"
            assert text == expected
            checked += 1
    assert checked == 8 * 6


def test_cdf_is_the_empirical_distribution() -> None:
    values = pl.Series([4.0, 1.0, 3.0, 2.0])
    assert series.cdf(values).rows() == [(1.0, 0.25), (2.0, 0.5), (3.0, 0.75), (4.0, 1.0)]
    many = series.cdf(pl.Series(range(1, 10_001), dtype=pl.Float64), points=11)
    assert many["value_ns"].to_list()[0] == 1.0 and many["value_ns"].to_list()[-1] == 10_000.0
    assert many["fraction"].to_list()[-1] == 1.0
    assert many.height == 11


def test_over_time_counts_and_levels() -> None:
    frame = events(
        make_request("a", admission=10, first=20, ticks=[30], complete=30),
        make_request("b", arrival=5, admission=30, first=40, tokens=[3], complete=40),
    )
    analysis = analyze_events(frame)
    over = series.over_time(analysis, frame)
    assert over.bin_ns == MS  # a 40 ms trace: forty 1 ms bins
    rates = over.rates
    assert rates["arrivals_per_s"].sum() == 2 * 1000  # two arrivals, each 1/ms
    assert rates["output_tokens_per_s"].sum() == (1 + 1 + 3) * 1000
    queued = over.levels.filter(pl.col("series") == "queued")
    assert queued["peak"].max() == 2  # b arrived at 5 ms while a still queued until 10
    # Without events there is no tick data: the rate is unknown, not zero.
    assert series.over_time(analysis, None).rates["output_tokens_per_s"].null_count() == 40


def test_slowest_requests_slices_add_up_and_show_requeue() -> None:
    frame = events(
        make_request(
            "p", admission=[10, 60], preempt=[40], first=80, ticks=[90, 100], complete=100
        ),
        make_request("q", admission=1, first=2, complete=2),
    )
    chosen, slices = series.slowest_requests(analyze_events(frame), frame, n=1)
    assert chosen["request_id"].to_list() == ["p"]
    got = [(r["phase"], r["from_ns"] // MS, r["to_ns"] // MS) for r in slices.iter_rows(named=True)]
    assert got == [
        ("queued", 0, 10),
        ("prefill", 10, 80),
        ("decode", 80, 100),
        ("requeued", 40, 60),
    ]


def test_sampling_is_deterministic_and_bounded(realistic: TraceView) -> None:
    a = series.request_points(realistic.analysis, limit=1000)
    b = series.request_points(realistic.analysis, limit=1000)
    assert a.points.equals(b.points)
    assert a.shown <= 500 and a.total == 2733
    points, total = series.formula_points(realistic.analysis, limit=600)
    broken = realistic.analysis.summary.formula.per_request
    # every request that breaks the formula is drawn
    assert points.filter(~pl.col("within")).height == broken.checked - broken.within_tolerance
    assert total == 2733


def _offline(html: str) -> None:
    assert "<link" not in html
    assert not re.search(r"<script[^>]+src=", html)
    assert not re.search(r"""(src|href)=["']https?://""", html)
    assert "Content-Security-Policy" in html


def test_single_trace_page_is_offline_and_light(realistic: TraceView) -> None:
    html = render_html([realistic])
    _offline(html)
    assert len(html.encode()) <= TWO_MB
    reports = json.loads(
        re.search(r'id="servetrace-reports">(.*?)</script>', html, re.S).group(1)  # type: ignore[union-attr]
    )
    assert reports[REALISTIC]["metrics"]["ttft"]["count"] == 2733


@pytest.mark.slow  # several seconds: run by `pytest -m slow`
def test_comparison_page_is_offline_and_light() -> None:
    base, cand = _view(FCFS), _view(CHUNKED)
    comparison = compare(base.analysis, cand.analysis, baseline_label=FCFS, candidate_label=CHUNKED)
    views = [TraceView(v.label, v.analysis, points=series.MAX_POINTS // 2) for v in (base, cand)]
    groups = report_sections(views, [comparison])
    assert [g[0] for g in groups] == ["Comparison", FCFS, CHUNKED]
    cmp_sections = groups[0][1]
    assert "trades 27.3 ms of TTFT p50 for 155 ms of ITL p99" in cmp_sections[0].sentence
    assert "mean e2e moves by -538.4 ms, mostly in decode" in cmp_sections[1].sentence
    html = render_html(views, [comparison])
    _offline(html)
    assert len(html.encode()) <= TWO_MB


def test_request_level_trace_without_send_times_says_what_it_cannot_draw() -> None:
    from servetrace.sources.registry import import_file

    path = ROOT / "tests/data/real/llmperf-leaderboard/individual/anyscale_70b.json"
    imported = import_file(path, "llmperf")
    view = TraceView(str(path), analyze_events(imported.events))
    ((_, sections),) = report_sections([view])
    by_id = {s.id: s for s in sections}
    for section_id in ("t0-over-time", "t0-latency-time"):
        assert by_id[section_id].charts == []
        assert "Send times are unknown" in by_id[section_id].sentence
    assert by_id["t0-formula"].charts == []
    assert "needs per-token times" in by_id["t0-formula"].sentence
    # ITL is unavailable in a request-level trace: no ITL curve, not an empty one.
    assert [c for c, _ in by_id["t0-cdfs"].charts] == ["t0-cdf-ttft", "t0-cdf-tpot", "t0-cdf-e2e"]
    assert render_html([view]).count('class="vl-spec"') == 5


def test_lazy_events_give_the_same_series() -> None:
    # The report scans a large trace lazily; the numbers must not depend on it.
    frame = events(
        make_request(
            "p", admission=[10, 60], preempt=[40], first=80, ticks=[90, 100], complete=100
        ),
        make_request("q", arrival=3, admission=4, first=5, ticks=[7, 9], complete=9),
    )
    analysis = analyze_events(frame)
    eager, lazy = series.over_time(analysis, frame), series.over_time(analysis, frame.lazy())
    assert eager.rates.equals(lazy.rates) and eager.levels.equals(lazy.levels)
    assert series.slowest_requests(analysis, frame)[1].equals(
        series.slowest_requests(analysis, frame.lazy())[1]
    )


def test_embedded_json_holds_no_markup_and_reads_back() -> None:
    # Without a browser: what the report puts inside <script> cannot end or comment it out.
    from servetrace.render._json import script_json

    data = {"<!--<script>": ["</script>", "a & b > c", "\u2028\u2029", "🚀"]}
    text = script_json(data)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == data
