"""Opening a written HTML report in headless Chromium (through Playwright).

Shared by the browser tests: the page is opened from its file with every request that
would leave it aborted and recorded, every console error, page error and dialog
recorded, and returned once the page says every chart has been drawn.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str | None:
    for candidate in (os.environ.get("SERVETRACE_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch_browser() -> Iterator[Any]:
    """A headless Chromium, or the test skipped with the reason shown."""
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')"
    )
    pytest.importorskip("altair", reason="the report extra is not installed")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set SERVETRACE_CHROMIUM)")
    with playwright_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@dataclass
class OpenedPage:
    page: Any
    errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


def open_report(browser: Any, path: Path, timeout_ms: int = 120_000) -> OpenedPage:
    """The page after every chart rendered, with what it logged, fetched and popped up."""
    opened = OpenedPage(browser.new_page())
    page = opened.page
    page.on("console", lambda m: opened.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: opened.errors.append(str(e)))

    def dialog(d: Any) -> None:
        opened.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)

    def route(r: Any) -> None:
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            opened.outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.rendered === 'true'", timeout=timeout_ms)
    return opened


MARKS_PER_CHART = """
() => Array.from(document.querySelectorAll("section.report-section")).map((s) => ({
  id: s.id,
  expected: Number(s.dataset.charts),
  charts: Array.from(s.querySelectorAll("div.chart")).map((c) => ({
    id: c.id,
    svg: c.querySelectorAll("svg").length,
    marks: c.querySelectorAll("svg .role-mark > *").length,
  })),
}))
"""


def assert_rendered(page: Any, empty: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Every section holds the charts it announces, each an SVG with marks; only the
    sections named in ``empty`` (a trace without send times has no time axis) draw none."""
    sections = page.evaluate(MARKS_PER_CHART)
    assert sections
    for section in sections:
        least = 0 if section["id"] in empty else 1
        assert len(section["charts"]) == section["expected"] >= least, section["id"]
        for chart in section["charts"]:
            assert chart["svg"] == 1 and chart["marks"] > 0, chart
    assert page.evaluate("window.servetraceFailed") == []
    return sections


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its IHDR header."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def png_distinct_bytes(data: bytes) -> int:
    """How many distinct byte values the decoded pixel rows hold (1–2: a blank image)."""
    import zlib

    chunks, at = [], 8
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        if data[at + 4 : at + 8] == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + length])
        at += 12 + length
    return len(set(zlib.decompress(b"".join(chunks))))
