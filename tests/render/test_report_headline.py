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


def _value(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
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


@pytest.mark.slow
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
    expected = _json(*args)
    _check_block(opened, "t0-headline", expected, len(tiles(expected)), unavailable)
    assert "tool" in opened.page.locator("#t0-headline").inner_text()
    opened.page.close()


def _check_block(
    opened: Any, block_id: str, doc: dict[str, Any], count: int, unavailable: dict[str, str]
) -> None:
    """The block opens the page, is drawn (a screenshot of sane size, not blank), and
    shows ``count`` tiles: the unavailable ones with their reason, the rest the numbers
    of ``doc`` to the digits shown."""
    page = opened.page
    assert opened.errors == [] and opened.outside == []
    block = page.locator(f"#{block_id}")
    assert page.evaluate("document.querySelector('main').firstElementChild.id") == block_id
    shot = block.screenshot()
    width, height = png_size(shot)
    assert 600 <= width <= 1400 and 100 <= height <= 500, (width, height)
    assert png_distinct_bytes(shot) > 16  # text drawn, not a blank box
    cells = page.eval_on_selector_all(
        f"#{block_id} .tile",
        """tiles => tiles.map(t => [t.dataset.label, t.dataset.path || null,
            t.querySelector('.number').textContent,
            (t.querySelector('.why') || {}).textContent])""",
    )
    assert len(cells) == count
    for label, path, text, why in cells:
        if label in unavailable:
            assert (path, text, why) == (None, "unavailable", unavailable[label]), label
            continue
        assert path is not None and why is None, label
        value = _value(doc, path)
        if isinstance(value, list):
            value = len(value)
        number = float(text.replace(",", "").rstrip("%")) / (100 if text.endswith("%") else 1)
        assert number == pytest.approx(value, rel=5e-3), label


def test_a_sweep_opens_with_its_capacity_per_configuration() -> None:
    from servetrace.render.headline import sweep_headline

    sweep = str(ROOT / "tests/data/real/vllm-bench-sweep-head20")
    result = runner.invoke(app, ["capacity", sweep, *("--goodput", "ttft<=100ms"), "-f", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    shown = [(t.label, t.text, t.reason or t.detail) for t in sweep_headline(doc).tiles]
    below = "no run meets the SLO at 90%: capacity is below the lowest offered rate (1 req/s, {})"
    assert shown == [
        ("runs", "16", None),
        ("highest requests/s", "0.84", "01_tp8_pp1/qps_inf"),
        ("highest output tokens/s", "180.3", "01_tp8_pp1/qps_inf"),
        ("capacity: 01_tp8_pp1", "0.633", "at 90% attainment (achieved)"),
        ("capacity: 02_tp4_pp2_no_IB", "0.374", "at 90% attainment (achieved)"),
        ("capacity: 03_tp4_pp2_IB", "unavailable", below.format("03_tp4_pp2_IB/qps_01")),
        ("capacity: 04_tp4_pp2_IB", "unavailable", below.format("04_tp4_pp2_IB/qps_01")),
    ]
    for tile in sweep_headline(doc).tiles:
        if tile.path and tile.path != "runs":  # each number the capacity report's
            assert float(tile.text) == pytest.approx(_value(doc, tile.path), rel=5e-3)


def test_sweep_headline_in_chromium(browser: Any, tmp_path: Path) -> None:
    sweep = str(ROOT / "tests/data/real/vllm-bench-sweep-head20")
    out = _report(tmp_path, sweep, "--goodput", "ttft<=100ms")
    opened = open_report(browser, out, timeout_ms=60_000)
    doc = json.loads(opened.page.locator("#servetrace-reports").text_content())["sweep"]
    below = "no run meets the SLO at 90%: capacity is below the lowest offered rate (1 req/s, {})"
    unavailable = {
        f"capacity: {name}": below.format(f"{name}/qps_01")
        for name in ("03_tp4_pp2_IB", "04_tp4_pp2_IB")
    }
    _check_block(opened, "sweep-headline", doc, 7, unavailable)
    opened.page.close()
