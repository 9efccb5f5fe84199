"""``whatif --report`` in headless Chromium: the validation first, every chart drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from servetrace.cli import app
from tests.render.browser import assert_rendered, open_report, png_distinct_bytes

runner = CliRunner()


def test_whatif_page_draws_the_validation_and_each_prediction(browser: Any, tmp_path: Path) -> None:
    trace, page = tmp_path / "fcfs.parquet", tmp_path / "whatif.html"
    made = runner.invoke(app, ["simulate", "-o", str(trace), "--requests", "200", "--seed", "3"])
    assert made.exit_code == 0, made.stderr
    done = runner.invoke(app, ["whatif", str(trace), "--policy", "sjf", "--report", str(page)])
    assert done.exit_code == 0, done.stderr
    opened = open_report(browser, page, timeout_ms=60_000)
    assert opened.errors == [] and opened.outside == [] and opened.dialogs == []
    sections = {s["id"]: s for s in assert_rendered(opened.page)}
    assert sections["whatif-validation"]["expected"] == 1  # the per-request scatter
    assert "whatif-prediction-0" in sections
    text = opened.page.inner_text("#whatif-validation")
    assert "every statistic within its tolerance" in text and "TTFT" in text
    # The replay and the prediction each get the report's comparison with the trace.
    headings = opened.page.eval_on_selector_all("h2", "hs => hs.map(h => h.textContent)")
    assert headings[0] == "What-if" and "Comparison" in headings
    shot = opened.page.locator("#whatif-validation").screenshot()
    assert png_distinct_bytes(shot) > 8
