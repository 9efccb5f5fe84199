"""``servetrace whatif`` through the CLI: exit codes, outputs and the words a user reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
PEERS = Path(__file__).parents[1] / "data" / "peers"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("whatif") / "fcfs.parquet"
    made = runner.invoke(
        app, ["simulate", "-o", str(path), "--requests", "300", "--rate", "5", "--seed", "3"]
    )
    assert made.exit_code == 0, made.stderr
    return path


@pytest.mark.slow
def test_table_says_how_it_was_calibrated_and_that_the_replay_held(trace: Path) -> None:
    done = runner.invoke(app, ["whatif", str(trace), "--policy", "sjf"])
    assert done.exit_code == 0, done.stderr
    out = done.stdout
    assert "step = 10 ms + 80 µs/prompt token + 100 µs/decoding request" in out
    assert "replay under fcfs: every statistic within its tolerance" in out
    assert "kv-tokens none (never binding: no request was preempted)" in out
    assert "predicted on the same requests" in out


@pytest.mark.slow
def test_a_sweep_outputs_and_a_calibration_that_round_trips(trace: Path, tmp_path: Path) -> None:
    model = tmp_path / "model.json"
    args = ["whatif", str(trace), "--policy", "chunked", "--extrapolate", "-f", "json"]
    swept = runner.invoke(
        app, [*args, "--sweep", "max-batch-tokens=256,512,1024", "--calibration-out", str(model)]
    )
    assert swept.exit_code == 0, swept.stderr
    report = json.loads(swept.stdout)["whatif"]
    assert [p["limits"]["max_batch_tokens"] for p in report["predictions"]] == [256, 512, 1024]
    assert report["validation"]["trusted"] is True
    again = runner.invoke(app, [*args, "--max-batch-tokens", "512", "--calibration", str(model)])
    assert json.loads(again.stdout)["whatif"]["predictions"][0] == report["predictions"][1]
    events = tmp_path / "predicted.parquet"
    runner.invoke(app, [*args, "--max-batch-tokens", "512", "--events-out", str(events)])
    analysed = runner.invoke(app, ["analyze", str(events), "-f", "json"])
    assert analysed.exit_code == 0, analysed.stderr
    ttft = json.loads(analysed.stdout)["metrics"]["ttft"]["p50"]
    predicted = report["predictions"][1]["metrics"]["ttft"]["p50"]["predicted_ns"]
    assert ttft == pytest.approx(predicted / 1e6)


@pytest.mark.slow
def test_a_replay_that_misses_exits_1_with_its_figures(trace: Path, tmp_path: Path) -> None:
    model = tmp_path / "model.json"
    runner.invoke(app, ["whatif", str(trace), "--policy", "sjf", "--calibration-out", str(model)])
    data = json.loads(model.read_text())
    data["costs"] = {k: 2 * v for k, v in data["costs"].items()}
    model.write_text(json.dumps(data))
    done = runner.invoke(
        app, ["whatif", str(trace), "--policy", "sjf", "--calibration", str(model)]
    )
    assert done.exit_code == 1
    assert "misses" in done.stdout and "no prediction" in done.stdout
    assert "predicted on the same requests" not in done.stdout
    forced = runner.invoke(
        app, ["whatif", str(trace), "--policy", "sjf", "--calibration", str(model), "--force"]
    )
    assert forced.exit_code == 0 and "predicting anyway (--force)" in forced.stdout


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--policy", "chunked", "--max-batch-tokens", "512"], 2, "would be extrapolated"),
        (["--policy", "sjf", "--max-running", "5000"], 2, "beyond the calibrated range"),
        (["--policy", "sjf", "--sweep", "batch=1,2"], 2, "NAME=VALUE"),
        (["--policy", "sjf", "-f", "csv"], 2, "table, json or markdown"),
    ],
)
def test_bad_requests_are_one_line(trace: Path, args: list[str], code: int, words: str) -> None:
    done = runner.invoke(app, ["whatif", str(trace), *args])
    assert done.exit_code == code, done.output
    assert words in done.stderr and "Traceback" not in done.stderr


def test_a_client_side_trace_says_what_cannot_be_fitted() -> None:
    done = runner.invoke(app, ["whatif", str(PEERS / "aiperf_s1_conc8"), "--policy", "sjf"])
    assert done.exit_code == 3, done.output
    first = done.stderr.splitlines()[0]
    assert "no admission events" in first and "client-side" in first


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace whose requests carry a numeric ``tier`` (0-2), from a workload table."""
    folder = tmp_path_factory.mktemp("tiers")
    table, path = folder / "workload.csv", folder / "tiers.parquet"
    rows = ["request_id,arrival_ns,prompt_tokens,output_tokens,priority"]
    rows += [
        f"r{i},{i * 300_000_000},{100 + 37 * i % 400},{20 + 13 * i % 90},{i % 3}"
        for i in range(120)
    ]
    table.write_text("\n".join(rows) + "\n")
    made = runner.invoke(
        app, ["simulate", "--workload", str(table), "--max-running", "8", "-o", str(path)]
    )
    assert made.exit_code == 0, made.stderr
    import polars as pl

    pl.read_parquet(path).rename({"priority": "tier"}).write_parquet(path)
    return path


@pytest.mark.slow
def test_priority_by_an_attribute_says_its_order(tiered: Path) -> None:
    args = ["whatif", str(tiered), "--policy", "priority", "--priority-by", "tier"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.stderr
    assert "priority order: tier, lower first, by arrival within a level" in done.stdout
    assert "priority by tier" in done.stdout  # the prediction's column
    report = json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)["whatif"]
    assert report["workload"]["priority_by"] == "tier"
    assert report["workload"]["priority_missing"] == 0
    assert report["predictions"][0]["policy"] == "priority" and report["sweep"] is None


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--policy", "priority"], "needs the attribute that orders its queue"),
        (["--policy", "priority", "--priority-by", "tenant"], "no attribute 'tenant'"),
        (["--policy", "sjf", "--priority-by", "tier"], "priority policy only"),
    ],
)
def test_priority_without_a_usable_attribute_is_one_line(
    tiered: Path, args: list[str], words: str
) -> None:
    done = runner.invoke(app, ["whatif", str(tiered), *args])
    assert done.exit_code == 2, done.output
    assert words in done.stderr.splitlines()[0] and "Traceback" not in done.stderr
