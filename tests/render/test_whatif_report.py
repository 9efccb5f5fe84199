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


def test_a_sweep_page_draws_each_metric_against_the_knob_beside_its_table(
    browser: Any, tmp_path: Path
) -> None:
    trace, page = tmp_path / "fcfs.parquet", tmp_path / "sweep.html"
    made = runner.invoke(app, ["simulate", "-o", str(trace), "--requests", "200", "--seed", "3"])
    assert made.exit_code == 0, made.stderr
    args = ["whatif", str(trace), "--policy", "fcfs", "--sweep", "max-running=8,16,32"]
    done = runner.invoke(app, [*args, "--report", str(page)])
    assert done.exit_code == 0, done.stderr
    opened = open_report(browser, page, timeout_ms=90_000)
    assert opened.errors == [] and opened.outside == []
    sections = {s["id"]: s for s in assert_rendered(opened.page)}
    # One curve per metric: TTFT, queue wait, e2e, mean ITL against max-running.
    assert [c["id"] for c in sections["whatif-sweep"]["charts"]] == [
        "whatif-sweep-ttft",
        "whatif-sweep-queue_wait",
        "whatif-sweep-e2e",
        "whatif-sweep-itl_mean",
    ]
    rows = opened.page.eval_on_selector_all(
        "#whatif-sweep tbody tr", "rs => rs.map(r => r.cells[0].textContent)"
    )
    assert rows == ["trace (its own policy)", "8", "16", "32"]
    ticks = opened.page.eval_on_selector_all(
        "#whatif-sweep-ttft svg .role-axis-label text", "ts => ts.map(t => t.textContent)"
    )
    assert {"8", "16", "32"} <= set(ticks)
    # The band around each curve, and the trace's value as a rule.
    marks = opened.page.eval_on_selector_all(
        "#whatif-sweep-ttft svg .role-mark", "ms => ms.map(m => m.getAttribute('class'))"
    )
    assert any("mark-area" in m for m in marks) and any("mark-rule" in m for m in marks)
    # The comparison's CDFs put the trace, the replay and each value's prediction together.
    legend = opened.page.eval_on_selector_all(
        "#cmp-cdf-ttft svg .role-legend-label text", "ts => ts.map(t => t.textContent)"
    )
    assert legend == [
        "trace (baseline)",
        "replay under fcfs",
        "predicted: fcfs max-running 8",
        "predicted: fcfs max-running 16",
        "predicted: fcfs max-running 32",
    ]
    shot = opened.page.locator("#whatif-sweep").screenshot()
    assert png_distinct_bytes(shot) > 8
