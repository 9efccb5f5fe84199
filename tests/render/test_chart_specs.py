"""The report's Vega-Lite specs read: titles in words with units, log axes with round ticks
that end near the data, run labels in legends, ratios of 0 drawn at the axis edge,
distinct level colours, labelled percentile lines, whole-number counts. On real files
of ``tests/data``; in Chromium, the charts of those pages render without an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import servetrace
from servetrace.comparison.catalog import DEFAULT_COMPARE_METRICS
from servetrace.comparison.compare import compare
from servetrace.render.chart_style import log_ticks
from servetrace.render.report_compare import comparison_sections, short_labels
from servetrace.render.report_sections import TraceView, cdf_section, over_time_section
from tests.render.browser import assert_rendered, open_report

pytest.importorskip("altair", reason="the report extra is not installed")

ROOT = Path(__file__).parents[2]
AIPERF = str(ROOT / "tests/data/peers/aiperf_s1_conc8")
VIDUR = ROOT / "tests/data/vidur"
VLLM_RUN, SARATHI_RUN = (
    str(VIDUR / f"synthetic_arxiv_poisson_qps2.0_n1000__{name}.parquet")
    for name in ("vllm", "sarathi")
)
SWEEP = ROOT / "tests/data/real/vllm-bench-sweep-head20"
RUN = "01_tp8_pp1/serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_{}.json.gz"
QPS = {rate: str(SWEEP / RUN.format(rate)) for rate in ("01", "inf")}
# vLLM results without send times: nothing on a time axis, said in words instead.
NO_TIME_AXIS = frozenset(f"t{i}-{s}" for i in (0, 1) for s in ("over-time", "latency-time"))


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every unit spec inside a (faceted, layered) spec."""
    inner = spec.get("spec", spec)
    return inner.get("layer", [inner])


def _rows(spec: dict[str, Any], layer: dict[str, Any]) -> list[dict[str, Any]]:
    name = (layer.get("data") or spec.get("data"))["name"]
    rows: list[dict[str, Any]] = spec["datasets"][name]
    return rows


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _titles(spec: dict[str, Any]) -> list[str]:
    return [
        v
        for k, v in _walk({k: v for k, v in spec.items() if k != "datasets"})
        if k == "title" and isinstance(v, str)
    ]


def test_log_ticks_are_round_and_few() -> None:
    assert log_ticks(15.4, 571) == [20, 50, 100, 200, 500]
    assert log_ticks(22, 170) == [30, 50, 70, 100, 150]  # < 3 of 1-2-5: finer steps
    assert log_ticks(0.013, 2.7) == [0.02, 0.05, 0.1, 0.2, 0.5, 1, 2]
    assert log_ticks(35, 2e5) == [100, 1000, 10_000, 100_000]  # many decades: powers only
    assert log_ticks(0, 10) == [] and log_ticks(None, 3) == []


@pytest.fixture(scope="module")
def aiperf() -> TraceView:
    return TraceView(AIPERF, servetrace.analyze(AIPERF))


def test_cdf_axis_ends_at_the_data_and_percentile_lines_are_named(aiperf: TraceView) -> None:
    ttft = dict(cdf_section(aiperf, "t0-").charts)["t0-cdf-ttft"]
    line, rules, names = _layers(ttft)
    x = line["encoding"]["x"]
    assert x["scale"] == {"nice": False, "type": "log"}  # no padding to the next decade
    assert x["title"] == "TTFT (ms, log)"
    values = [r["value_ms"] for r in _rows(ttft, line)]
    assert (min(values), max(values)) == (15.424, 571.563)  # AIPerf's own min and max TTFT
    assert x["axis"]["values"] == [20, 50, 100, 200, 500]
    assert rules["mark"]["type"] == "rule" and names["mark"]["type"] == "text"
    labelled = {(r["label"], r["fraction"]) for r in _rows(ttft, names)}
    assert labelled == {("p50", 0.5), ("p90", 0.9), ("p99", 0.99)}
    assert ttft["config"]["axis"]["labelSeparation"] > 0  # tick labels never touch


def test_over_time_charts_speak_words_and_tell_running_from_in_system() -> None:
    view = TraceView(VLLM_RUN, servetrace.analyze(VLLM_RUN))
    charts = dict(over_time_section(view, "t0-").charts)
    rates = charts["t0-rates"]
    assert {r["series"] for r in _rows(rates, _layers(rates)[0])} == {
        "arrivals (req/s)",
        "output tokens (tok/s)",
    }
    levels = charts["t0-levels"]
    enc = _layers(levels)[0]["encoding"]
    assert enc["color"]["scale"]["domain"] == ["queued", "running", "in system"]
    colours = enc["color"]["scale"]["range"]
    assert len(set(colours)) == 3
    assert enc["strokeDash"]["scale"]["range"][1] != enc["strokeDash"]["scale"]["range"][2]
    assert enc["y"]["axis"]["format"] == ",d" and enc["y"]["axis"]["tickMinStep"] == 1
    assert next(t for t in enc["tooltip"] if t["field"] == "peak")["format"] == ",d"
    for spec in charts.values():
        assert not [t for t in _titles(spec) if "_" in t], _titles(spec)


@pytest.fixture(scope="module")
def vidur_sections() -> list[Any]:
    views = [
        TraceView(path, servetrace.analyze(path), name=name)
        for path, name in zip(
            (VLLM_RUN, SARATHI_RUN), short_labels([VLLM_RUN, SARATHI_RUN]), strict=True
        )
    ]
    metrics = [m for m in DEFAULT_COMPARE_METRICS if m != "goodput"]
    comparison = compare(
        views[0].analysis,
        views[1].analysis,
        metrics=metrics,
        baseline_label=views[0].label,
        candidate_label=views[1].label,
    )
    return comparison_sections(views, [comparison])


@pytest.mark.slow
def test_a_ratio_of_zero_is_drawn_at_the_axis_edge(vidur_sections: list[Any]) -> None:
    """Vidur's vLLM run preempted 2 requests, Sarathi none: the ratio is 0."""
    section = vidur_sections[0]
    forest = dict(section.charts)["cmp-ratios"]
    whiskers, dots, _ = _layers(forest)
    scale = whiskers["encoding"]["x"]["scale"]
    low, high = scale["domain"]
    assert scale["type"] == "log" and 0 < low < high
    # 0.0227 (preemptions.count's interval start) / 1.25; 2.79 (queue_wait.p50's end) × 1.25
    assert (low, high) == (0.0181, 3.49)
    assert whiskers["encoding"]["x"]["axis"]["values"] == [0.02, 0.05, 0.1, 0.2, 0.5, 1, 2]
    rows = {r["statistic"]: r for r in _rows(forest, dots)}
    zero = rows["preemptions.count"]
    assert zero["reading"] == "ratio 0: drawn at the left edge"
    assert zero["ratio_drawn"] == pytest.approx(low) and zero["ratio_text"] == "0.0"
    assert all(low <= r["ratio_drawn"] <= high for r in rows.values())
    shapes = dots["encoding"]["shape"]["scale"]
    assert shapes["range"][shapes["domain"].index(zero["reading"])] == "triangle-left"
    assert rows["ttft.p50"]["ratio_drawn"] == pytest.approx(1.492, abs=1e-3)  # untouched
    assert "preemptions.count" in (section.note or "") and "axis edge" in (section.note or "")
    # The verdict table shows a count as a count.
    table = {row[1]: row for row in vidur_sections[1].table["rows"]}
    assert table["preemptions.count"][2:4] == ["2", "0"]
    assert table["preemptions.count"][0] == "sarathi"


def test_compare_legends_use_run_labels_and_name_the_baseline() -> None:
    """Two vLLM results whose file names share 60 characters: the legend says qps_01 and
    qps_inf (Vega cuts a long label, so the full names read the same)."""
    assert short_labels([QPS["01"], QPS["inf"]]) == ["qps_01", "qps_inf"]
    views = [
        TraceView(path, servetrace.analyze(path), name=name)
        for path, name in zip(QPS.values(), ("qps_01", "qps_inf"), strict=True)
    ]
    comparison = compare(views[0].analysis, views[1].analysis, metrics=["ttft"])
    charts = dict(comparison_sections(views, [comparison])[0].charts)
    line = _layers(charts["cmp-cdf-ttft"])[0]
    assert line["encoding"]["color"]["scale"]["domain"] == ["qps_01 (baseline)", "qps_inf"]
    assert "sort" not in line["encoding"]["color"]  # a sort list would be a Vega expression


def test_sweep_points_are_named_by_their_run() -> None:
    from servetrace.api import capacity
    from servetrace.render.report_sweep import sweep_sections

    report = capacity([str(SWEEP / "01_tp8_pp1")])
    spec = dict(sweep_sections(report)[0].charts)["sweep-curve-chart"]
    assert spec["facet"]["row"]["sort"][0].startswith("TTFT")  # TTFT first
    line, names = _layers(spec)
    assert line["encoding"]["y"]["scale"] == {"nice": False, "type": "log"}
    assert names["mark"]["type"] == "text" and names["encoding"]["text"]["field"] == "name"
    rows = spec["datasets"][spec["data"]["name"]]
    named = sorted((r["panel"], r["name"]) for r in rows if r["name"] is not None)
    runs = ["qps_01", "qps_04", "qps_16", "qps_inf"]
    assert named == [(p, run) for p in ("TPOT (ms, log)", "TTFT (ms, log)") for run in runs]


@pytest.mark.parametrize(
    ("traces", "empty"),
    [((VLLM_RUN, SARATHI_RUN), frozenset()), ((QPS["01"], QPS["inf"]), NO_TIME_AXIS)],
    ids=["ratio-zero", "long-prefix"],
)
def test_the_comparison_pages_render_in_chromium(
    browser: Any, tmp_path: Path, traces: tuple[str, str], empty: frozenset[str]
) -> None:
    from typer.testing import CliRunner

    from servetrace.cli import app

    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", *traces, "-o", str(out)])
    assert result.exit_code == 0, result.output
    opened = open_report(browser, out, timeout_ms=60_000)
    assert_rendered(opened.page, empty)
    assert opened.errors == [] and opened.outside == []
    ticks = opened.page.eval_on_selector_all(
        "#cmp-ratios svg .role-axis-label text", "labels => labels.map(l => l.textContent)"
    )
    assert len(ticks) >= 3, ticks  # the forest has a readable axis
    legend = opened.page.eval_on_selector_all(
        "#cmp-cdf-ttft svg .role-legend-label text", "labels => labels.map(l => l.textContent)"
    )
    assert legend[0].endswith("(baseline)") and len(set(legend)) == 2
    embedded = json.loads(opened.page.locator("#servetrace-reports").text_content())
    assert set(traces) <= set(embedded)
    opened.page.close()


def test_an_infinite_ratio_is_drawn_at_the_right_edge() -> None:
    """A count that rose from zero: ratio and interval end ∞, drawn at the edge, said in
    the tooltip's text (JSON has no infinity)."""
    from servetrace.render.compare_charts import ratio_frame

    rows = pl.DataFrame(
        {
            "candidate": ["c", "c"],
            "metric": ["errored", "ttft"],
            "stat": ["count", "p50"],
            "ratio": [float("inf"), 2.0],
            "ci_low": [0.0, 1.5],
            "ci_high": [float("inf"), 2.5],
            "significant": [True, True],
            "verdict": ["slower", "slower"],
        }
    )
    frame, (low, high) = ratio_frame(rows)
    assert (low, high) == (0.8, 3.12)  # 1 / 1.25 and 2.5 × 1.25, to three digits
    inf = frame.row(0, named=True)
    assert inf["reading"] == "ratio ∞: drawn at the right edge"
    assert (inf["ratio_drawn"], inf["ci_low_drawn"], inf["ci_high_drawn"]) == (high, low, high)
    assert (inf["ratio_text"], inf["ci_high_text"]) == ("∞", "∞")
