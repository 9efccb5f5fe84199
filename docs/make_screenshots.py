"""Render the README's screenshots of ``servetrace report`` in headless Chromium.

    python docs/make_screenshots.py            # writes docs/img/*.png
    python docs/make_screenshots.py server     # only those of one group

Builds two reports from the sample traces (one trace; a comparison of two policies), opens
each in Chromium through Playwright with every network request refused, and captures a
few sections as PNG. Needs the ``report`` and ``test`` extras and a Chromium binary
(``SERVETRACE_CHROMIUM``, default ``/usr/bin/chromium``); nothing is hand-made.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
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
SHOTS = {
    "single": (
        ["sample_traces/realistic.parquet"],
        {
            "report-headline.png": "#t0-headline",
            "report-summary.png": "#t0-summary",
            "report-over-time.png": "#t0-over-time",
            "report-latency-time.png": "#t0-latency-time",
            "report-waterfall.png": "#t0-waterfall",
        },
    ),
    "compare": (
        ["sample_traces/policy_fcfs.parquet", "sample_traces/policy_chunked.parquet"],
        {"report-compare.png": "#cmp-cdfs"},
    ),
    # A simulated run with the vLLM series it would export (made below, in the temp dir).
    "server": (
        ["{tmp}/sim.parquet", "--server-metrics", "{tmp}/sim.prom"],
        {
            "report-server-running.png": "#t0-server-vllm-num-requests-running",
            "report-server-consistency.png": "#t0-server-consistency",
        },
    ),
}
SIMULATE = ["simulate", "--requests", "300", "--rate", "4", "--seed", "1",
            "-o", "{tmp}/sim.parquet", "--metrics-out", "{tmp}/sim.prom"]  # fmt: skip


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    executable = os.environ.get("SERVETRACE_CHROMIUM", "/usr/bin/chromium")
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        simulate = [a.format(tmp=tmp) for a in SIMULATE]
        subprocess.run([sys.executable, "-m", "servetrace", *simulate], check=True, cwd=ROOT)
        # ``python docs/make_screenshots.py server``: only the named groups.
        chosen = sys.argv[1:] or list(SHOTS)
        for name, (traces, shots) in SHOTS.items():
            if name not in chosen:
                continue
            html = Path(tmp) / f"{name}.html"
            given = [a.format(tmp=tmp) for a in traces]
            subprocess.run(
                [sys.executable, "-m", "servetrace", "report", *given, "-o", str(html)],
                check=True,
                cwd=ROOT,
            )
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.route(
                "**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort()
            )
            page.goto(html.as_uri())
            page.wait_for_function("document.body.dataset.rendered === 'true'")
            for file_name, selector in shots.items():
                page.locator(selector).screenshot(path=str(IMG / file_name))
                print(f"wrote docs/img/{file_name}")
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
