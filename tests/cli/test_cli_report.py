"""``report``, ``timeline`` and ``--plots`` through the command line: files, exit codes."""

from __future__ import annotations

import builtins
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.conftest import events, make_request
from tests.render.timeline_format import assert_consistent, validate

ROOT = Path(__file__).parents[2]
WORKED = str(ROOT / "sample_traces/worked_example.csv")
FCFS = str(ROOT / "sample_traces/policy_fcfs.parquet")
CHUNKED = str(ROOT / "sample_traces/policy_chunked.parquet")
runner = CliRunner()
needs_extra = pytest.mark.skipif(
    any(__import__("importlib").util.find_spec(m) is None for m in ("altair", "vl_convert")),
    reason="the report extra is not installed",
)


@pytest.fixture
def small(tmp_path: Path) -> Path:
    frame = events(
        make_request("a", admission=10, first=50, ticks=[60, 70], complete=70),
        make_request(
            "b", arrival=5, admission=[20, 45], preempt=[30], first=90, ticks=[100], complete=100
        ),
        make_request("c", arrival=8, cancel=40),
    )
    path = tmp_path / "small.parquet"
    frame.write_parquet(path)
    return path


def test_help_and_analyze_do_not_load_the_report_extra() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from servetrace.cli import app\n"
        f"r = CliRunner().invoke(app, ['analyze', {WORKED!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "CliRunner().invoke(app, ['--help'])\n"
        "print(sorted(m for m in ('altair', 'jinja2', 'vl_convert', 'playwright') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_missing_extra_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, small: Path
) -> None:
    real_import = builtins.__import__

    def without_altair(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "altair":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_altair)
    result = runner.invoke(app, ["report", str(small), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert "pip install 'servetrace[report]'" in result.stderr
    result = runner.invoke(app, ["analyze", str(small), "--plots", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert "pip install 'servetrace[report]'" in result.stderr


@pytest.mark.slow
@needs_extra
def test_report_writes_one_file(tmp_path: Path, small: Path) -> None:
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", str(small), "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "vegaEmbed" in html
    assert f"wrote {out}" in result.stderr


@needs_extra
def test_report_bad_paths(tmp_path: Path, small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = runner.invoke(app, ["report", str(small), "-o", str(tmp_path / "r.txt")])
    assert result.exit_code == 2 and ".html" in result.stderr
    result = runner.invoke(app, ["report", str(small), "-o", str(tmp_path / "no/r.html")])
    assert result.exit_code == 2 and "does not exist" in result.stderr
    # The missing directory is named as the user wrote it, not resolved.
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["report", str(small), "-o", "no/r.html"])
    assert result.exit_code == 2 and "directory no does not exist" in result.stderr
    result = runner.invoke(
        app, ["report", str(tmp_path / "missing.parquet"), "-o", str(tmp_path / "r.html")]
    )
    assert result.exit_code == 3
    assert "Traceback" not in result.output


@pytest.mark.slow  # several seconds: run by `pytest -m slow`
@needs_extra
def test_analyze_plots_writes_svg_png_and_markdown_links(
    tmp_path: Path, small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # stdout's Markdown links from the working directory
    plots = tmp_path / "plots"
    result = runner.invoke(
        app, ["analyze", str(small), "--format", "markdown", "--plots", str(plots)]
    )
    assert result.exit_code == 0, result.output
    svgs = sorted(p.stem for p in plots.glob("*.svg"))
    pngs = sorted(p.stem for p in plots.glob("*.png"))
    assert svgs == pngs
    assert {
        "decomposition",
        "cdf-ttft",
        "cdf-e2e",
        "rates",
        "levels",
        "waterfall-chart",
        "residuals",
    } <= set(svgs)
    for name in svgs:
        assert (plots / f"{name}.svg").read_text().lstrip().startswith("<svg")
        assert (plots / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # the Markdown on stdout links every chart where it was written
        assert f"](plots/{name}.png)" in result.stdout
        assert f"]({name}.png)" in (plots / "plots.md").read_text()
    # the JSON contract is untouched by --plots
    plain = runner.invoke(app, ["analyze", str(small), "--format", "json"])
    with_plots = runner.invoke(
        app, ["analyze", str(small), "--format", "json", "--plots", str(tmp_path / "p2")]
    )
    assert json.loads(plain.stdout) == json.loads(with_plots.stdout)


@pytest.mark.slow  # several seconds: run by `pytest -m slow`
@needs_extra
def test_compare_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plots = tmp_path / "cmp"
    result = runner.invoke(
        app,
        [
            "compare",
            FCFS,
            CHUNKED,
            "--metric",
            "ttft",
            "--metric",
            "itl",
            "--format",
            "markdown",
            "--plots",
            str(plots),
        ],
    )
    assert result.exit_code == 0, result.output
    names = sorted(p.stem for p in plots.glob("*.svg"))
    assert names == sorted(
        ["cmp-cdf-ttft", "cmp-cdf-tpot", "cmp-cdf-itl", "cmp-cdf-e2e", "cmp-ratios", "cmp-delta"]
    )
    assert "(cmp/cmp-ratios.png)" in result.stdout


@pytest.mark.slow  # several seconds: run by `pytest -m slow`
@needs_extra
def test_compare_plots_name_the_traces_by_their_labels(tmp_path: Path) -> None:
    plots = tmp_path / "cmp"
    args = ["compare", FCFS, CHUNKED, "--metric", "ttft", "--plots", str(plots)]
    result = runner.invoke(app, [*args, "--label", "fcfs-A", "--label", "chunked-B"])
    assert result.exit_code == 0, result.output
    cdf = (plots / "cmp-cdf-ttft.svg").read_text()
    assert "fcfs-A" in cdf and "chunked-B" in cdf
    assert Path(FCFS).name not in cdf and Path(CHUNKED).name not in cdf


def test_timeline_cli_options(tmp_path: Path, small: Path) -> None:
    out = tmp_path / "t.json"
    result = runner.invoke(app, ["timeline", str(small), "-o", str(out), "--requests", "b,c"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    names = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "request"}
    assert names == {"b", "c"}
    requeued = [e for e in doc["traceEvents"] if e["name"] == "requeued"]
    assert [(e["ts"], e["dur"]) for e in requeued] == [(30000.0, 15000.0)]
    result = runner.invoke(app, ["timeline", str(small), "-o", str(out), "--requests", "zz"])
    assert result.exit_code == 2 and "zz" in result.stderr
    result = runner.invoke(app, ["timeline", str(small), "-o", str(out), "--window", "5:1"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["timeline", str(tmp_path / "none.csv"), "-o", str(out)])
    assert result.exit_code == 3


def test_timeline_of_an_aiperf_export(tmp_path: Path) -> None:
    # A client trace: no admissions, so arrival → first token is one "ttft" phase.
    export = ROOT / "tests/data/real/aiperf-gpt-oss-20b-run1/profile_export.jsonl.gz"
    out = tmp_path / "t.json.gz"
    result = runner.invoke(app, ["timeline", str(export), "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(gzip.decompress(out.read_bytes()))
    requests = assert_consistent(validate(doc))
    assert requests
    phases = {name for r in requests.values() for name, *_ in r["phases"]}
    assert "ttft" in phases and "queued" not in phases and "prefill" not in phases
