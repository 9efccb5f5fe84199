"""BLIS TraceV2 traces (tests/data/interchange/blis, see its PROVENANCE.md) through the CLI:
one run per trace, its header's declared facts, hand-computed latencies and one-line
refusals of bad input."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sources import blis

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data" / "interchange" / "blis"


def _json(*args: str) -> dict[str, Any]:
    done = runner.invoke(app, ["analyze", *args, "-f", "json", "-q"])
    assert done.exit_code == 0, done.output
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _refused(*args: str) -> str:
    done = runner.invoke(app, ["analyze", *args, "-q"])
    assert done.exit_code == 3, done.output
    first = done.output.strip().splitlines()[0]
    assert first.startswith("error: ") and "Traceback" not in done.output
    return first


def test_a_real_trace_read_with_its_header() -> None:
    # send → first chunk: 50, 80, 60 ms; send → last chunk: 250, 410, 460 ms
    doc = _json(str(DATA / "observe.csv"))
    assert doc["outcomes"] == {"completed": 3, "cancelled": 1, "in_flight": 0, "errored": 1}
    ttft, e2e = doc["metrics"]["ttft"], doc["metrics"]["e2e"]
    assert (ttft["min"], ttft["p50"], ttft["max"]) == (50.0, 60.0, 80.0)
    assert e2e["mean"] == pytest.approx((250 + 410 + 460) / 3)
    # TPOT = (last − first) / (output − 1): 200/10, 330/15, 400/20
    assert doc["metrics"]["tpot"]["mean"] == pytest.approx((20 + 22 + 20) / 3)
    declared = doc["declared"]
    assert declared["tool"] == "blis"
    assert declared["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert declared["sources"]["model"] == "observe.yaml server.model"
    assert declared["request_rate_per_s"] is None  # a trace states no offered load
    done = runner.invoke(app, ["analyze", str(DATA / "observe.csv")])
    assert "requests not streamed (1)" in done.stderr and "ITL distribution is not" in done.stderr


def test_the_header_alone_finds_its_csv_and_a_pair_is_one_run() -> None:
    by_header = _json(str(DATA / "replay.yaml"))
    by_pair = _json(str(DATA / "replay.csv"), str(DATA / "replay.yaml"))
    for doc in (by_header, by_pair):
        assert doc["outcomes"]["completed"] == 2 and doc["outcomes"]["in_flight"] == 1
        assert doc["declared"]["tool"] == "blis"


def test_a_simulated_trace_counts_and_the_model_column() -> None:
    doc = _json(str(DATA / "run.csv"))
    # ttft 30 and 40 ms (arrival 0 and 50 ms), e2e 130 and 290 ms
    assert doc["metrics"]["ttft"]["mean"] == pytest.approx(35.0)
    assert doc["metrics"]["e2e"]["mean"] == pytest.approx(210.0)
    assert doc["outcomes"] == {"completed": 2, "cancelled": 1, "in_flight": 1, "errored": 0}
    assert doc["declared"]["model"] == "qwen/qwen3-14b"
    assert doc["declared"]["sources"]["model"] == "run.csv model"
    assert doc["tokens"]["prompt_tokens"]["mean"] == (256 + 512) / 2  # the completed ones


def test_the_importer_keeps_prompt_tokens_and_attributes() -> None:
    result = blis.read(DATA / "observe.csv")
    first = result.events.group_by("request_id").first().sort("request_id")
    # server_input_tokens where recorded, else prefix_length + input_tokens (32 + 64)
    assert first["prompt_tokens"].to_list() == [120, 96, 210, 50, 90]
    assert first["error_code"].to_list() == [None, None, None, 503, None]
    assert result.records == 5


def test_a_folder_of_traces_is_a_run_each_and_compare_takes_them(tmp_path: Path) -> None:
    for name in ("run", "replay"):
        for suffix in (".csv", ".yaml"):
            shutil.copy(DATA / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    done = runner.invoke(app, ["analyze", str(tmp_path), "-q"])
    assert done.exit_code == 0, done.output
    assert "2 runs" in done.stdout
    done = runner.invoke(app, ["compare", str(DATA / "run.csv"), str(DATA / "replay.csv")])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["check", str(DATA / "run.csv"), "--slo", "ttft.max<=1s"])
    assert done.exit_code == 0, done.output


def _bad_csv(tmp_path: Path, row: int, column: str, value: str) -> Path:
    lines = (DATA / "run.csv").read_text().splitlines()
    names = lines[0].split(",")
    cells = lines[row].split(",")
    cells[names.index(column)] = value
    lines[row] = ",".join(cells)
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("row", "column", "value", "rule"),
    [
        (2, "output_tokens", "-3", "field 'output_tokens' must be >= 0, got '-3'"),
        (3, "status", "done", "field 'status' must be one of ok, error, timeout, incomplete"),
        (1, "send_time_us", "soon", "field 'send_time_us' must be a whole number"),
    ],
)
def test_a_bad_cell_is_one_line_naming_file_row_and_rule(
    tmp_path: Path, row: int, column: str, value: str, rule: str
) -> None:
    path = _bad_csv(tmp_path, row, column, value)
    said = _refused(str(path))
    assert str(path) in said and f"row {row} (request_id '{row - 1}')" in said and rule in said


def test_a_header_in_other_units_or_without_its_csv_is_refused(tmp_path: Path) -> None:
    shutil.copy(DATA / "run.csv", tmp_path / "t.csv")
    (tmp_path / "t.yaml").write_text("trace_version: 3\ntime_unit: ms\nmode: generated\n")
    said = _refused(str(tmp_path / "t.csv"))
    assert "t.yaml: field 'time_unit' is 'ms'" in said
    (tmp_path / "lone.yaml").write_text("trace_version: 3\nmode: real\n")
    said = _refused(str(tmp_path / "lone.yaml"))
    assert "lone.yaml" in said and "no TraceV2 CSV lone.csv beside it" in said


def test_without_pyyaml_a_header_is_one_line_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml raises ImportError
    said = _refused(str(DATA / "observe.csv"))
    assert "observe.yaml: reading a BLIS TraceV2 header (YAML) needs PyYAML" in said
