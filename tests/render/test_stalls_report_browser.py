"""``report --steps`` in headless Chromium: the stalls charts render offline with no console
error, the scatter draws every point it embeds and the ITL p99 rule, the bars a bar per
cause and group, and the cause table shows the embedded JSON's shares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.analysis.stall_fixtures import write_injected
from tests.render.browser import assert_rendered, open_report

runner = CliRunner()
MARKS = """(id) => Array.from(document.querySelectorAll(
  "#" + CSS.escape(id) + " svg g.role-mark")).map((g) => [
    g.getAttribute("aria-roledescription"), g.children.length])"""


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("stalls")
    trace, steps = write_injected(folder)
    html = folder / "r.html"
    done = runner.invoke(app, ["report", str(trace), "--steps", str(steps), "-o", str(html)])
    assert done.exit_code == 0, done.output
    return trace, html


def test_stall_sections_render(browser: Any, page_file: tuple[Path, Path]) -> None:
    trace, html = page_file
    opened = open_report(browser, html)
    page = opened.page
    sections = assert_rendered(page)
    assert opened.errors == [] and opened.outside == []
    ids = [s["id"] for s in sections]
    assert ids.index("t0-stalls-prefill") == ids.index("t0-latency-time") + 1
    assert ids.index("t0-stalls-causes") == ids.index("t0-stalls-prefill") + 1
    marks = dict(page.evaluate(MARKS, "t0-stalls-prefill-chart"))
    # 120 tail gaps and every 5th of the 9,966 others (2,400 points at most): 2,114.
    assert marks == {"symbol mark container": 2_114, "rule mark container": 1}
    bars = dict(page.evaluate(MARKS, "t0-stalls-causes-chart"))
    assert bars == {"rect mark container": 12}  # six causes × (every stalled gap, the tail)
    report = json.loads(page.locator("#servetrace-reports").text_content())[str(trace)]
    cells = page.eval_on_selector_all(
        "#t0-stalls-causes td[data-path]",
        "cells => cells.map(c => [c.dataset.path, c.textContent])",
    )
    assert len(cells) == 12
    for path, text in cells:
        _, group, name = path.split(".")
        assert text == f"{report['stalls'][group][name]:.1%}", path
    words = page.locator("#t0-stalls-causes").inner_text()
    assert "prefill is the largest cause" in words
    page.close()
