"""``--plots DIR``: PNGs at twice the chart's size, and Markdown whose links work from
where the Markdown file is (``-o FILE``), on a real AIPerf run and a real comparison."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.render.browser import png_size

pytest.importorskip("vl_convert", reason="the report extra is not installed")

ROOT = Path(__file__).parents[2]
AIPERF = str(ROOT / "tests/data/peers/aiperf_s1_conc8")
VIDUR = ROOT / "tests/data/vidur"
VLLM_RUN, SARATHI_RUN = (
    str(VIDUR / f"synthetic_arxiv_poisson_qps2.0_n1000__{name}.parquet")
    for name in ("vllm", "sarathi")
)
runner = CliRunner()


def _svg_size(path: Path) -> tuple[int, int]:
    found = re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', path.read_text())
    assert found, path
    return int(found[1]), int(found[2])


def _links(markdown: str) -> list[str]:
    return re.findall(r"\]\(([^)]+\.(?:png|svg))\)", markdown)


@pytest.mark.slow  # several seconds (ten charts through vl-convert): run by `pytest -m slow`
def test_analyze_plots_are_sharp_and_linked_from_the_markdown_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    args = ["analyze", AIPERF, "--format", "markdown", "--plots", "figs"]
    result = runner.invoke(app, [*args, "-o", "reports/summary.md"])
    assert result.exit_code == 0, result.output
    figs = tmp_path / "figs"
    # The TTFT CDF is a 375×267 SVG (the 1× PNG of the old chart was 359×293 px).
    assert _svg_size(figs / "cdf-ttft.svg") == (375, 267)
    assert png_size((figs / "cdf-ttft.png").read_bytes()) == (750, 534)
    for png in figs.glob("*.png"):
        width, height = _svg_size(png.with_suffix(".svg"))
        assert png_size(png.read_bytes()) == (2 * width, 2 * height), png.name
    summary = (tmp_path / "reports/summary.md").read_text()
    links = _links(summary)
    assert "../figs/cdf-ttft.png" in links and "../figs/cdf-ttft.svg" in links
    assert len(links) == 2 * len(list(figs.glob("*.png")))
    for link in links:  # every link opens from the Markdown file's folder
        assert not Path(link).is_absolute()
        assert (tmp_path / "reports" / link).is_file(), link
    # plots.md sits beside the pictures and links them by name.
    assert "](cdf-ttft.png)" in (figs / "plots.md").read_text()


@pytest.mark.slow  # a bootstrap and six charts: run by `pytest -m slow`
def test_compare_plots_linked_from_a_file_in_the_same_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "ci"
    out.mkdir()
    args = ["compare", VLLM_RUN, SARATHI_RUN, "--metric", "ttft", "--format", "markdown"]
    result = runner.invoke(app, [*args, "--plots", str(out / "plots"), "-o", str(out / "c.md")])
    assert result.exit_code == 0, result.output
    links = _links((out / "c.md").read_text())
    assert "plots/cmp-ratios.png" in links
    assert all((out / link).is_file() for link in links)
    ratios = out / "plots/cmp-ratios"
    width, height = _svg_size(ratios.with_suffix(".svg"))
    assert png_size(ratios.with_suffix(".png").read_bytes()) == (2 * width, 2 * height)
