"""Every command takes what ``analyze`` takes, and no view shows what ``analyze`` calls
unavailable: the commands go one way, through one result, on real files."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from servetrace.errors import UsageError

ROOT = Path(__file__).parents[2]
AIPERF = ROOT / "tests/data/peers/aiperf_s1_conc8"  # a client-side run folder
GENAI_PERF = ROOT / "tests/data/peers/genai_perf_s1_conc8"
SWEEP = ROOT / "tests/data/real/vllm-bench-llama33-70b-a100/01_tp8_pp1"
# vLLM bench results without per-request send times ('start_times').
QPS_01 = SWEEP / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_01.json.gz"
QPS_16 = SWEEP / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_16.json.gz"
runner = CliRunner()
needs_extra = pytest.mark.skipif(
    any(__import__("importlib").util.find_spec(m) is None for m in ("altair", "vl_convert")),
    reason="the report extra is not installed",
)


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
@needs_extra
@pytest.mark.parametrize("folder", [AIPERF, GENAI_PERF], ids=["aiperf", "genai-perf"])
def test_report_takes_a_run_folder_as_analyze_does(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    expected = _json("analyze", str(folder))
    page = out.read_text()
    found = re.search(
        r'<script type="application/json" id="servetrace-reports">(.*?)</script>', page, re.S
    )
    assert found is not None
    embedded = json.loads(found.group(1))
    (report,) = embedded.values()
    assert report["outcomes"] == expected["outcomes"]
    assert report["metrics"]["ttft"] == expected["metrics"]["ttft"]


@pytest.mark.slow
@pytest.mark.parametrize("folder", [AIPERF, GENAI_PERF], ids=["aiperf", "genai-perf"])
def test_timeline_takes_a_run_folder_as_analyze_does(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    result = runner.invoke(app, ["timeline", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    trace = json.loads(out.read_text())
    requests = [e for e in trace["traceEvents"] if e.get("cat") == "request"]
    assert len(requests) == _json("analyze", str(folder))["accounting"]["requests_valid"]
    # A client sees no queue and no running set: only the requests in the system.
    counters = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "C"}
    assert "queued" not in counters and "running" not in counters
    assert "in_system" in counters


def test_timeline_refuses_a_trace_without_send_times(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    result = runner.invoke(app, ["timeline", str(QPS_01), "-o", str(out)])
    assert result.exit_code == 2
    assert "does not record send times" in result.stderr
    assert not out.exists()
    assert _json("analyze", str(QPS_01))["concurrency"]["in_system_peak"] is None


def test_compare_measures_only_what_both_sides_express() -> None:
    report = _json("compare", str(QPS_01), str(QPS_16))
    (gone,) = report["unavailable"].values()
    measured = {row["metric"] for row in report["rows"] if row["verdict"] != "unavailable"}
    assert not measured & set(gone), measured & set(gone)
    for row in report["rows"]:  # a metric one side lacks is listed, never compared
        if row["metric"] in gone:
            assert row["verdict"] == "unavailable" and row["unavailable"] == gone[row["metric"]]
            assert row["baseline"] is row["candidate_value"] is row["ratio"] is None
    assert {"preemptions", "requeued", "queue_wait"} <= set(gone)
    # Throughput over the declared duration is what analyze reports, so compare has it.
    assert "throughput" not in gone and "throughput" in measured
    for qps in (QPS_01, QPS_16):
        analysis = _json("analyze", str(qps))
        assert analysis["throughput"]["window_source"] == "declared"
        assert "throughput" not in analysis["unavailable"]
    components = {row["component"] for row in next(iter(report["decomposition"].values()))}
    assert "delivery_tail" not in components


def test_a_client_trace_shows_no_placeholder_numbers() -> None:
    report = _json("analyze", str(AIPERF))
    for name in ("queue_wait", "prefill", "requeued"):
        assert name in report["unavailable"]
        assert report["metrics"][name]["count"] == 0
        assert report["metrics"][name]["mean"] is None
    assert report["concurrency"]["queued_peak"] is None


@pytest.mark.slow
@needs_extra
def test_the_html_of_a_client_trace_says_unavailable(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert runner.invoke(app, ["report", str(AIPERF), "-o", str(out)]).exit_code == 0
    page = out.read_text()
    assert "queue peaked" not in page.lower()
    assert "queue and running set unavailable: client trace" in page
    row = re.search(r"<tr>\s*<td>requeued</td>(.*?)</tr>", page, re.S)
    assert row is not None and "unavailable: client trace" in row.group(1)
    assert 'data-path="metrics.requeued' not in page


@needs_extra
def test_the_html_of_a_trace_without_send_times_draws_no_time_axis(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(QPS_01), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "Send times are unknown in this trace" in page
    assert "queue peaked" not in page.lower()


@pytest.mark.slow
def test_the_library_takes_the_same_inputs(tmp_path: Path) -> None:
    analysis = servetrace.analyze(AIPERF)
    assert servetrace.to_dict(analysis) == _json("analyze", str(AIPERF))
    runs = servetrace.analyze_runs(SWEEP)
    assert len(runs) == 4 and all(run.analysis is not None for run in runs)
    with pytest.raises(UsageError, match="holds 4 runs"):
        servetrace.analyze(SWEEP)
    events = servetrace.read_events(AIPERF)
    assert events["request_id"].n_unique() == analysis.summary.accounting.requests


def test_every_trace_command_refuses_a_missing_input_the_same_way(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.parquet")
    out = tmp_path / "o"
    commands = [
        ["analyze", missing],
        ["validate", missing],
        ["check", missing, "--slo", "ttft.p99<=1s"],
        ["compare", missing, missing],
        ["report", missing, "-o", f"{out}.html"],
        ["timeline", missing, "-o", f"{out}.json"],
    ]
    for args in commands:
        result = runner.invoke(app, args)
        assert result.exit_code == 3, (args, result.output)
        assert f"{missing}: no such file or directory" in result.stderr, args


def test_gzip_run_folder_is_read_once_per_command(tmp_path: Path) -> None:
    """A copy of the folder with its raw file gzipped again still resolves to one run."""
    folder = tmp_path / "run"
    folder.mkdir()
    for item in AIPERF.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    with gzip.open(folder / "inputs.json.gz", "wt") as handle:
        handle.write('{"data": []}')
    assert len(servetrace.analyze_runs(folder)) == 1
