"""``report --steps`` in headless Chromium, on Vidur's Sarathi-Serve run and its own
batches: both stalls charts draw, nothing is logged or fetched, and the cause table's
cells are the JSON report's shares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from servetrace.cli import app
from tests.render.browser import assert_rendered, open_report

VIDUR = Path(__file__).parents[1] / "data" / "vidur"
RUN = "synthetic_arxiv_poisson_qps2.0_n1000__sarathi"
runner = CliRunner()


def test_stalls_sections_render_with_the_json_numbers(browser: Any, tmp_path: Path) -> None:
    trace, steps = VIDUR / f"{RUN}.parquet", VIDUR / "steps" / f"{RUN}_batches.csv.gz"
    out = tmp_path / "stalls.html"
    done = runner.invoke(app, ["report", str(trace), "--steps", str(steps), "-o", str(out)])
    assert done.exit_code == 0, done.output
    opened = open_report(browser, out)
    page = opened.page
    sections = assert_rendered(page)
    ids = [s["id"] for s in sections]
    at = ids.index("t0-latency-time")
    assert ids[at + 1 : at + 3] == ["t0-stalls-prefill", "t0-stalls-causes"]
    assert opened.errors == [] and opened.outside == []
    embedded = json.loads(page.locator("#servetrace-reports").text_content())[str(trace)]
    stalls = embedded["stalls"]
    cells = page.eval_on_selector_all(
        "#t0-stalls-causes td[data-path]", "cells => cells.map(c => [c.dataset.path, c.textContent])"
    )
    assert len(cells) == 10
    for path, text in cells:
        _, group, name = path.split(".")
        assert text == f"{stalls[group][name]:.1%}", path
    # Sarathi's chunked prefill: prefill is the largest cause, overall and in the tail.
    assert stalls["overall"]["prefill_share"] == 0.695119805993377
    reading = page.locator("#t0-stalls-causes p.reading").text_content()
    assert "prefill is the largest cause (70% of the excess)" in reading
    note = page.locator("#t0-stalls-prefill p.note").text_content()
    assert "gaps drawn: every tail gap, the rest thinned" in note
    page.close()
