"""The runs table fits the terminal: columns every run lacks, then the least needed, are
left out and named; a sweep of several configurations is grouped by folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
SWEEPS = (
    Path(__file__).resolve().parents[2] / "tests" / "data" / "real" / "vllm-bench-llama33-70b-a100"
)


def _table(width: int, *args: str) -> list[str]:
    done = runner.invoke(app, ["analyze", *args, "-q"], env={"COLUMNS": str(width)})
    assert done.exit_code == 0, done.output
    return done.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 100, 250])
def test_the_table_fits_and_names_what_it_left_out(width: int) -> None:
    lines = _table(width, str(SWEEPS / "01_tp8_pp1"), "--goodput", "ttft<=60ms")
    header, *rows = lines[1:5]
    assert max(len(line) for line in [header, *rows]) <= width
    said = "\n".join(lines)
    assert "n/a in every run, left out: concurrency" in said
    assert "tool: vllm-bench" in said
    if width == 250:
        assert "left out to fit" not in said and "TPOT p50" in header
    else:
        assert f"left out to fit {width} columns: errored" in said
        assert "(every column: -f csv or json)" in said
    assert header.split()[0] == "run" and "TTFT p99" in header  # kept at any width


@pytest.mark.slow
def test_a_sweep_of_configurations_is_grouped_by_folder() -> None:
    lines = _table(250, str(SWEEPS))
    rows = [line.split()[0] for line in lines[2:7]]
    assert rows == [
        "tp8_pp1_sharegpt_qps_01",
        "tp8_pp1_sharegpt_qps_04",
        "tp8_pp1_sharegpt_qps_16",
        "tp8_pp1_sharegpt_qps_inf",
        "tp4_pp2_sharegpt_qps_04",
    ]
    assert any(line.startswith("grouped by folder, each sorted") for line in lines)


@pytest.mark.slow
def test_csv_keeps_every_column() -> None:
    done = runner.invoke(app, ["analyze", str(SWEEPS / "01_tp8_pp1"), "-f", "csv", "-q"])
    header = done.stdout.splitlines()[0].split(",")
    assert {"tool", "concurrency", "errored", "tpot_p50", "slo_attainment"} <= set(header)
