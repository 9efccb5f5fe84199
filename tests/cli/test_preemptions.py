"""analyze reports a trace's preemptions, as compare counts them, and says nothing of
preemptions a client-side trace cannot see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.conftest import events, make_request

runner = CliRunner()
DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
VLLM = DATA / "vidur" / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet"


def _json(*args: str) -> dict:
    done = runner.invoke(app, [*args, "-f", "json", "-q"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_preemptions_by_hand(tmp_path: Path) -> None:
    # a: preempted twice, b: once, c: never
    trace = tmp_path / "t.parquet"
    events(
        make_request("a", admission=[10, 40, 70], preempt=[30, 60], first=80, complete=90),
        make_request("b", admission=[5, 25], preempt=[20], first=30, complete=35),
        make_request("c", admission=5, first=10, complete=12),
    ).write_parquet(trace)
    assert _json("analyze", str(trace))["preemptions"] == {"events": 3, "requests": 2}
    shown = runner.invoke(app, ["analyze", str(trace), "-q"]).stdout
    assert "preemptions: 3 on 2 requests" in shown


def test_analyze_and_compare_count_the_same_preemptions() -> None:
    ours = _json("analyze", str(VLLM))["preemptions"]
    rows = _json("compare", str(VLLM), str(VLLM), "--metric", "preemptions")["rows"]
    count = next(r["baseline"] for r in rows if r["stat"] == "count")
    assert ours == {"events": 2, "requests": 2} and count == 2


@pytest.mark.slow
def test_a_client_trace_has_no_preemption_figure() -> None:
    report = _json("analyze", str(DATA / "peers" / "aiperf_s1_conc8"))
    assert report["preemptions"] is None
    assert (
        "preemptions:"
        not in runner.invoke(app, ["analyze", str(DATA / "peers" / "aiperf_s1_conc8"), "-q"]).stdout
    )
