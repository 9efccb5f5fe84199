"""``servetrace report`` on a load sweep: the
throughput–latency curve and SLO attainment against offered rate, in headless Chromium
(as ``test_report_browser``) and as data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from tests.render.browser import assert_rendered, open_report
from tests.render.test_report_browser import _assert_same

ROOT = Path(__file__).parents[2]
LLAMA = ROOT / "tests/data/real/vllm-bench-llama33-70b-a100"
TP8 = LLAMA / "01_tp8_pp1"
SLO = ["--goodput", "ttft<=60ms", "--attainment", "80%"]
runner = CliRunner()


def _report(tmp: Path, *args: str) -> Path:
    out = tmp / "sweep.html"
    result = runner.invoke(app, ["report", *args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_sweep_sections_as_data() -> None:
    pytest.importorskip("altair", reason="the report extra is not installed")
    from servetrace.render.report_sweep import attainment_frame, curve_frame, sweep_sections

    report = servetrace.capacity([TP8], goodput="ttft<=60ms", attainment="80%")
    curve = curve_frame(report)
    assert curve.height == 4 * 4  # 4 runs × TTFT/TPOT p50/p99
    qps16 = curve.filter((curve["run"] == "qps_16") & (curve["series"] == "p99"))
    assert sorted(qps16["value_ms"].to_list()) == pytest.approx(
        [36.511, 120.336], abs=1e-3
    )  # vLLM's p99_tpot_ms, p99_ttft_ms
    attained = attainment_frame(report)
    assert attained["run"].to_list() == ["qps_01", "qps_04", "qps_16"]  # inf is off the axis
    assert attained["attainment"].to_list() == [116 / 200, 170 / 200, 114 / 200]
    sections = sweep_sections(report)
    assert [s.id for s in sections] == ["sweep-curve", "sweep-attainment"]
    assert "6.14 req/s, linearly interpolated between qps_04" in sections[1].sentence
    assert sections[0].table is not None and len(sections[0].table["rows"]) == 4
    # no --goodput: the curve alone
    bare = sweep_sections(servetrace.capacity([TP8]))
    assert [s.id for s in bare] == ["sweep-curve"]


def test_a_canonical_trace_is_still_a_trace_report(tmp_path: Path) -> None:
    pytest.importorskip("altair", reason="the report extra is not installed")
    out = _report(tmp_path, str(ROOT / "sample_traces/realistic.parquet"))
    assert 'id="sweep-curve"' not in out.read_text()


def test_sweep_report_renders_offline(browser: Any, tmp_path: Path) -> None:
    opened = open_report(browser, _report(tmp_path, str(TP8), *SLO))
    page, errors, outside = opened.page, opened.errors, opened.outside
    sections = assert_rendered(page)
    assert [s["id"] for s in sections] == ["sweep-curve", "sweep-attainment"]
    assert errors == [] and outside == []
    result = runner.invoke(app, ["capacity", str(TP8), *SLO, "--format", "json"])
    expected = json.loads(result.stdout)
    embedded = json.loads(page.locator("#servetrace-reports").text_content())["sweep"]
    _assert_same(embedded, expected)
    first_cells = page.eval_on_selector_all(
        "#sweep-curve tbody tr", "rows => rows.map(r => r.children[0].textContent)"
    )
    assert first_cells == ["qps_01", "qps_04", "qps_16", "qps_inf"]
    text = page.locator("#sweep-attainment p.reading").text_content()
    assert "6.14 req/s, linearly interpolated between qps_04" in text
    page.close()


def test_configurations_side_by_side_render_one_sweep_each(browser: Any, tmp_path: Path) -> None:
    opened = open_report(browser, _report(tmp_path, str(LLAMA), *SLO))
    page, errors, outside = opened.page, opened.errors, opened.outside
    assert_rendered(page)
    assert errors == [] and outside == []
    embedded = json.loads(page.locator("#servetrace-reports").text_content())["sweep"]
    assert [c["sweep"] for c in embedded["capacity_by_sweep"]] == ["01_tp8_pp1", "04_tp4_pp2_IB"]
    text = page.locator("#sweep-attainment p.reading").text_content()
    assert "01_tp8_pp1: capacity" in text and "04_tp4_pp2_IB: capacity" in text
    page.close()
