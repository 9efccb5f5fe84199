"""The report's headline block: the answer first, every figure the JSON report's, and
unavailable (with its reason) wherever the JSON says so. In headless Chromium: the block
is drawn (an element screenshot of sane size, not blank) and its text is the JSON's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.render.headline import facts, tiles
from tests.render.browser import open_report, png_distinct_bytes, png_size

ROOT = Path(__file__).parents[2]
AIPERF = str(ROOT / "tests/data/peers/aiperf_s1_conc8")
VLLM = str(
    ROOT / "tests/data/real/vllm-bench-sweep-head20/01_tp8_pp1/"
    "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_04.json.gz"
)
GOODPUT = ("--goodput", "ttft<=50ms")
runner = CliRunner()


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["analyze", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _report(tmp: Path, *args: str) -> Path:
    out = tmp / "report.html"
    result = runner.invoke(app, ["report", *args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _value(doc: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        doc = doc[part]
    return doc


# An AIPerf client run of 400 requests at concurrency 8, with a TTFT target of 50 ms.
AIPERF_TILES = {
    "requests": ("400", "400 completed"),
    "requests/s": ("16.56", None),
    "output tokens/s": ("808.9", None),
    "goodput": ("10.80", "ttft<=50ms"),
    "SLO attainment": ("65.2%", "261 of 400 completed"),
    "peak concurrency": ("8", "in the system at once"),
    "peak queue": ("unavailable", "client trace"),
    "TTFT p50": ("45.4", None),
    "TTFT p99": ("548", None),
    "ITL p50": ("8.63", None),
    "ITL p99": ("16.6", None),
}


def test_headline_reads_the_json_and_says_unavailable_with_the_reason() -> None:
    doc = _json(AIPERF, *GOODPUT)
    shown = {t.label: t for t in tiles(doc)}
    assert list(shown) == list(AIPERF_TILES)
    for label, (text, words) in AIPERF_TILES.items():
        tile = shown[label]
        assert tile.text == text, label
        assert (tile.reason or tile.detail) == words, label
    assert shown["peak queue"].path is None  # nothing the JSON lacks is drawn as a number
    assert facts(doc) == [
        ("tool", "aiperf"),
        ("model", "mock-llm"),
        ("max concurrency", "8"),
        ("duration", "24.2 s"),
        ("prompts", "400"),
        ("dataset", "synthetic"),
    ]
    # Without targets there is no goodput tile at all (not a zero one).
    assert "goodput" not in {t.label for t in tiles(_json(AIPERF))}


def test_a_vllm_result_without_send_times_has_no_concurrency_in_its_headline() -> None:
    doc = _json(VLLM)
    shown = {t.label: t for t in tiles(doc)}
    assert (shown["peak concurrency"].text, shown["peak concurrency"].reason) == (
        "unavailable",
        "no send times",
    )
    assert shown["requests/s"].text == "0.318"  # over the declared duration
    assert shown["TTFT p50"].text == "43.4"
    assert ("request rate", "4 req/s") in facts(doc) and ("duration", "63.0 s") in facts(doc)


@pytest.mark.parametrize(
    ("args", "unavailable"),
    [
        ((AIPERF, *GOODPUT), {"peak queue": "client trace"}),
        (
            (VLLM,),
            {
                "peak concurrency": "no send times",
                "peak queue": "client trace",
            },
        ),
    ],
    ids=["aiperf", "vllm-bench"],
)
def test_headline_block_in_chromium(
    browser: Any, tmp_path: Path, args: tuple[str, ...], unavailable: dict[str, str]
) -> None:
    opened = open_report(browser, _report(tmp_path, *args), timeout_ms=60_000)
    page = opened.page
    assert opened.errors == [] and opened.outside == []
    block = page.locator("#t0-headline")
    # It is the first thing in the page's main part: the answer before the charts.
    assert page.evaluate("document.querySelector('main').firstElementChild.id") == "t0-headline"
    shot = block.screenshot()
    width, height = png_size(shot)
    assert 600 <= width <= 1400 and 120 <= height <= 500, (width, height)
    assert png_distinct_bytes(shot) > 16  # text drawn, not a blank box
    expected = _json(*args)
    cells = page.eval_on_selector_all(
        "#t0-headline .tile",
        """tiles => tiles.map(t => [t.dataset.label, t.dataset.path || null,
            t.querySelector('.number').textContent,
            (t.querySelector('.why') || {}).textContent])""",
    )
    assert len(cells) == len(tiles(expected))
    for label, path, text, why in cells:
        if label in unavailable:
            assert (path, text, why) == (None, "unavailable", unavailable[label]), label
            continue
        assert path is not None and why is None, label
        value = _value(expected, path)
        number = float(text.replace(",", "").rstrip("%")) / (100 if text.endswith("%") else 1)
        assert number == pytest.approx(value, rel=5e-3), label
    assert "tool" in block.inner_text()
    page.close()
