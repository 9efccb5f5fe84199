"""The HTML report in a real browser (headless Chromium through Playwright).

Every chart renders (an SVG with marks in every section), nothing is logged as an error,
no request leaves the page, and the numbers on it are the JSON report's. Skipped, with
the reason shown, where Playwright or a Chromium binary is missing; ``.ci/run`` installs
both so CI always runs these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.render.browser import assert_rendered, open_report

ROOT = Path(__file__).parents[2]
REALISTIC = str(ROOT / "sample_traces/realistic.parquet")
FCFS = str(ROOT / "sample_traces/policy_fcfs.parquet")
CHUNKED = str(ROOT / "sample_traces/policy_chunked.parquet")
runner = CliRunner()


def _report(tmp: Path, *traces: str) -> Path:
    out = tmp / "report.html"
    result = runner.invoke(app, ["report", *traces, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _cli_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _assert_same(got: Any, want: Any, path: str = "") -> None:
    """Equal, floats to 1e-12 relative: `analyze` itself differs run to run in the last bit
    of a pooled ITL std (a parallel Polars sum), so bit-equality would be flaky."""
    if isinstance(want, dict):
        assert set(got) == set(want), path
        for key in want:
            _assert_same(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-12), path
    else:
        assert got == want, path


def _value(doc: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        doc = doc[part]
    return doc


def test_single_trace_report_renders_offline(browser: Any, tmp_path: Path) -> None:
    opened = open_report(browser, _report(tmp_path, REALISTIC))
    page, errors, outside = opened.page, opened.errors, opened.outside
    sections = assert_rendered(page)
    assert [s["id"] for s in sections] == [
        "t0-summary",
        "t0-cdfs",
        "t0-over-time",
        "t0-latency-time",
        "t0-waterfall",
        "t0-formula",
    ]
    assert errors == []
    assert outside == []
    # The numbers on the page are those of `servetrace analyze --format json`.
    expected = _cli_json("analyze", REALISTIC)
    embedded = json.loads(page.locator("#servetrace-reports").text_content())[REALISTIC]
    _assert_same(embedded, expected)
    cells = page.eval_on_selector_all(
        "td[data-path]", "cells => cells.map(c => [c.dataset.path, c.textContent])"
    )
    assert len(cells) == 48
    for path, text in cells:
        value = _value(expected, path)
        if value is None:
            assert text == "n/a"
        else:
            assert float(text.replace(",", "")) == pytest.approx(value, abs=5e-4), path
    page.close()


def test_comparison_report_renders_offline(browser: Any, tmp_path: Path) -> None:
    opened = open_report(browser, _report(tmp_path, FCFS, CHUNKED))
    page, errors, outside = opened.page, opened.errors, opened.outside
    sections = assert_rendered(page)
    ids = [s["id"] for s in sections]
    assert ids[:2] == ["cmp-cdfs", "cmp-decomposition"] and "t1-waterfall" in ids
    assert errors == [] and outside == []
    expected = _cli_json("compare", FCFS, CHUNKED)
    embedded = json.loads(page.locator("#servetrace-reports").text_content())["comparison"]
    _assert_same(embedded["rows"], expected["rows"])
    rows = page.eval_on_selector_all(
        "#cmp-decomposition tbody tr", "rows => rows.map(r => r.children[6].textContent)"
    )
    assert rows == [r["verdict"] for r in expected["rows"]]
    page.close()


def test_a_client_trace_page_shows_no_placeholder_numbers(browser: Any, tmp_path: Path) -> None:
    """An AIPerf run folder (a client: no admissions, no preemptions): the page draws, and
    says unavailable wherever the JSON does, never a zero queue or requeue time."""
    folder = str(ROOT / "tests/data/peers/aiperf_s1_conc8")
    opened = open_report(browser, _report(tmp_path, folder))
    page, errors, outside = opened.page, opened.errors, opened.outside
    assert_rendered(page)
    assert errors == [] and outside == []
    expected = _cli_json("analyze", folder)
    assert {"queue_wait", "prefill", "requeued"} <= set(expected["unavailable"])
    text = page.locator("body").inner_text()
    assert "queue peaked" not in text.lower()
    assert "queue and running set unavailable: client trace" in text
    rows = page.eval_on_selector_all(
        "#t0-summary tbody tr", "rows => rows.map(r => [...r.children].map(c => c.textContent))"
    )
    shown = {row[0]: row[1:] for row in rows}
    for metric in ("queue_wait", "prefill", "requeued"):
        assert shown[metric][0] == "unavailable: client trace", shown[metric]
    assert shown["ttft"][0] == f"{expected['metrics']['ttft']['count']:,}"
    page.close()
