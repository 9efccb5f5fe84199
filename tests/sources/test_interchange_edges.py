"""Edges of the interchange formats: an llm-d report's names follow the harness whose own
figure its converter copied, and a folder of canonical CSV parts is never read as BLIS."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sources import blis_files
from servetrace.sources.inputs import resolve

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data" / "interchange"
V02 = (
    DATA / "llm-d" / "inference-perf" / "benchmark_report_v0.2,_stage_2_lifecycle_metrics.json.yaml"
)


def test_a_guidellm_report_reads_its_inter_token_latency_as_tpot(tmp_path: Path) -> None:
    """native_to_br0_2.import_guidellm copies GuideLLM's inter_token_latency_ms (decode /
    (tokens - 1) per request) and time_per_output_token_ms (TTFT included) under the
    schema's names: the first is servetrace's tpot, the second has no servetrace name."""
    report = tmp_path / "benchmark_report_v0.2,_results.json_0.yaml"
    report.write_text(V02.read_text().replace("tool: inference-perf", "tool: guidellm"))
    done = runner.invoke(app, ["analyze", str(report), "-f", "json"])
    assert done.exit_code == 0, done.output
    (run,) = json.loads(done.stdout)["runs"]
    metrics = run["reported"]["metrics"]
    assert sorted(metrics) == ["e2e", "tpot", "ttft"]
    assert metrics["tpot"]["tool_name"] == "inter_token_latency"
    assert metrics["tpot"]["mean"] == 0.0184 * 1000  # s/token -> ms
    assert metrics["tpot"]["p99"] == 0.041 * 1000


def test_a_folder_of_canonical_csv_parts_stays_one_trace(tmp_path: Path) -> None:
    for index in range(2):
        (tmp_path / f"part-{index}.csv").write_text("request_id,event,ts\n0,arrival,0\n")
    (tmp_path / "notes.yaml").write_text("owner: me\n")
    assert blis_files.in_folder(sorted(tmp_path.iterdir())) == []
    (source,) = resolve([str(tmp_path)])
    assert source.fmt is None  # the canonical reader's


def test_a_header_named_apart_from_two_csvs_is_refused(tmp_path: Path) -> None:
    for name in ("a.csv", "b.csv"):
        shutil.copy(DATA / "blis" / "run.csv", tmp_path / name)
    shutil.copy(DATA / "blis" / "run.yaml", tmp_path / "t.yaml")
    paths = [str(tmp_path / n) for n in ("a.csv", "b.csv", "t.yaml")]
    done = runner.invoke(app, ["analyze", *paths, "-q"])
    assert done.exit_code == 3, done.output
    assert done.stderr.splitlines()[0] == (
        f"error: {tmp_path / 't.yaml'}: a BLIS TraceV2 header, but none of the CSVs given "
        "has its stem: which trace it describes cannot be told"
    )
