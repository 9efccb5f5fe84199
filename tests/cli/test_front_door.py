"""What a new user meets first says the right thing, in words: the names ``compare``
accepts, the states a source cannot tell, the headline's overall effect, the rows of a
summary file, an overloaded simulation, the files other tools write."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.comparison.catalog import METRICS

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
VIDUR = DATA / "vidur"
VLLM = str(VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet")
SARATHI = str(VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__sarathi.parquet")


def _help(*args: str) -> str:
    done = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert done.exit_code == 0, done.output
    return " ".join(done.stdout.split())


def test_compare_help_lists_every_metric_of_the_catalog() -> None:
    text = _help("compare")
    listed = re.search(r"--metric METRIC Metric to compare; repeatable: (.*?) \(default", text)
    assert listed, text
    assert listed.group(1).split(", ") == list(METRICS)
    assert "delivery_tail" in listed.group(1) and "preemptions" in listed.group(1)
    assert "(default: all but decode, delivery_tail, itl_max, requeued, fluidity)" in text


def test_an_unknown_metric_is_a_usage_error_listing_the_names() -> None:
    done = runner.invoke(app, ["compare", VLLM, SARATHI, "--metric", "tft", "--metric", "e2e"])
    assert done.exit_code == 2, done.output
    first, hint = done.stderr.splitlines()
    assert first == "error: unknown metric 'tft' (did you mean 'ttft'?)"
    assert hint.startswith("hint: metrics: " + ", ".join(METRICS) + "; statistics: count, mean")
    assert done.stdout == ""
