"""``report --server-metrics`` in headless Chromium: every server chart renders offline with
no console error, its x axis is the over-time charts' own (same domain), and the findings
table shows the embedded JSON's numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sim.metrics import HISTOGRAMS
from tests.render.browser import assert_rendered, open_report

runner = CliRunner()
X_AXIS = """(id) => document.querySelector(
  "#" + CSS.escape(id) + " svg g.role-axis[aria-label^='X-axis']").getAttribute("aria-label")"""


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("sim")
    trace, prom, html = folder / "t.parquet", folder / "m.prom", folder / "r.html"
    made = runner.invoke(
        app,
        ["simulate", "--requests", "120", "--rate", "20", "--kv-blocks", "300", "-o", str(trace),
         "--metrics-out", str(prom), "--scrape-interval-ms", "500"],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    done = runner.invoke(
        app, ["report", str(trace), "--server-metrics", str(prom), "-o", str(html)]
    )
    assert done.exit_code == 0, done.output
    return trace, html


def test_server_sections_render_on_the_trace_axis(
    browser: Any, page_file: tuple[Path, Path]
) -> None:
    trace, html = page_file
    opened = open_report(browser, html)
    page = opened.page
    # The findings are a table: the one section without a chart.
    sections = assert_rendered(page, empty=frozenset({"t0-server-consistency"}))
    assert opened.errors == [] and opened.outside == []
    ids = [s["id"] for s in sections]
    server = [i for i in ids if i.startswith("t0-server-vllm")]
    # the two gauges, four counters and each latency histogram the simulator writes
    assert len(server) == 6 + len(HISTOGRAMS)
    assert ids.index(server[0]) == ids.index("t0-over-time") + 1
    levels = page.evaluate(X_AXIS, "t0-levels")
    assert "values from 0 to" in levels
    for section in server:
        chart = section.replace("t0-server-", "t0-server-chart-")
        assert page.evaluate(X_AXIS, chart) == levels, section
    report = json.loads(page.locator("#servetrace-reports").text_content())[str(trace)]
    cells = page.eval_on_selector_all(
        "#t0-server-consistency td[data-path]",
        "cells => cells.map(c => [c.dataset.path, c.textContent])",
    )
    assert len(cells) > 30
    for path, text in cells:
        _, name, stat = path.split(".")
        value = report["consistency"][name][stat]
        if value is None:
            assert text == "n/a", path
        else:
            assert float(text.replace(",", "")) == pytest.approx(value, abs=5e-4), path
    assert "Every available finding agrees" in page.locator("#t0-server-consistency").inner_text()
    page.close()
