"""``analyze --steps``, ``--stalls-out`` and ``check`` on stall shares, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.analysis.stall_fixtures import write_injected

runner = CliRunner()


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_injected(tmp_path_factory.mktemp("cli_steps"))


def test_table_has_the_stalls_section(injected: tuple[Path, Path]) -> None:
    trace, steps = injected
    result = runner.invoke(app, ["analyze", str(trace), "--steps", str(steps)])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "where itl stalls come from" in out
    assert "gaps joined to steps: 10,086 of 10,086 (unjoined: none)" in out
    assert (
        "decode-step baseline: 10.000 ms + 0.100 ms/request + 0.25 µs/KV token "
        "(228 decode-only steps, residual 0.000 ms); usual batch 22"
    ) in out
    assert (
        "tail (gaps ≥ ITL p99 53.97 ms): 120 gaps, 100.0% with prefill work in their steps; "
        "prefill 92.4% · paused for prefill 0.0% · skipped 0.0% · between steps 0.0% · "
        "large batch 7.6% · other 0.0%"
    ) in out
    plain = runner.invoke(app, ["analyze", str(trace)])
    assert "stalls" not in plain.stdout
    # the section is added under the summary; nothing above it moves
    assert out.startswith(plain.stdout.rstrip("\n"))


def test_json_and_markdown(injected: tuple[Path, Path]) -> None:
    trace, steps = injected
    result = runner.invoke(app, ["analyze", str(trace), "--steps", str(steps), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    stalls = json.loads(result.stdout)["stalls"]
    assert stalls["steps_format"] == "canonical" and stalls["steps"] == 377
    assert stalls["gaps"] == {
        "total": 10_086,
        "joined": 10_086,
        "unjoined": {},
        "unjoined_reasons": {},
    }
    assert stalls["baseline"]["steps_fitted"] == 228
    assert stalls["overall"]["prefill_share"] == pytest.approx(0.75958, abs=1e-5)
    assert stalls["tail"]["threshold_ms"] == 53.9745
    assert stalls["tail"]["prefill_fraction"] == 1.0
    assert stalls["worst"][0]["request_id"] == "long-1"
    plain = runner.invoke(app, ["analyze", str(trace), "-f", "json"])
    assert "stalls" not in json.loads(plain.stdout)
    markdown = runner.invoke(app, ["analyze", str(trace), "--steps", str(steps), "-f", "markdown"])
    assert "### Where ITL stalls come from\n\n- steps: " in markdown.stdout


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_stalls_out(injected: tuple[Path, Path], tmp_path: Path, suffix: str) -> None:
    trace, steps = injected
    out = tmp_path / f"gaps{suffix}"
    result = runner.invoke(
        app, ["analyze", str(trace), "--steps", str(steps), "--stalls-out", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    frame = pl.read_csv(out) if suffix == ".csv" else pl.read_parquet(out)
    assert frame.columns == [
        "request_id",
        "gap_start_ns",
        "gap_end_ns",
        "steps",
        "prefill_tokens",
        "decode_tokens",
        "excess_ns",
        "cause",
    ]
    assert frame.height == 10_086
    assert frame["cause"].value_counts().sort("cause").rows() == [
        ("large_batch", 4_132),
        ("none", 1_438),
        ("prefill", 4_516),
    ]


def test_check_gates_a_stall_share(injected: tuple[Path, Path]) -> None:
    trace, steps = injected
    base = ["check", str(trace), "--steps", str(steps)]
    failed = runner.invoke(app, [*base, "--slo", "stalls.prefill_share<=50%"])
    assert failed.exit_code == 1
    assert "FAIL stalls.prefill_share: 0.76 > 0.5" in failed.stdout
    passed = runner.invoke(app, [*base, "--slo", "stalls.tail_prefill_share<=95%"])
    assert passed.exit_code == 0, passed.stdout
    skipped = runner.invoke(app, ["check", str(trace), "--slo", "stalls.prefill_share<=50%"])
    assert skipped.exit_code == 0
    assert "no engine steps were joined to this trace" in skipped.stdout


def test_bad_steps_exit_3(injected: tuple[Path, Path], tmp_path: Path) -> None:
    trace, steps = injected
    frame = pl.read_parquet(steps)
    negative = tmp_path / "negative.parquet"
    frame.with_columns(
        ts_end=pl.when(pl.col("step") == 7).then(0).otherwise(pl.col("ts_end"))
    ).write_parquet(negative)
    result = runner.invoke(app, ["analyze", str(trace), "--steps", str(negative)])
    assert result.exit_code == 3
    assert f"{negative}: row 8 (step 7): rule negative_duration" in result.stderr
    assert "Traceback" not in result.stderr
    shifted = tmp_path / "shifted.parquet"
    day = 86_400 * 10**9
    frame.with_columns(pl.col("ts_start", "ts_end") + day).write_parquet(shifted)
    result = runner.invoke(app, ["analyze", str(trace), "--steps", str(shifted)])
    assert result.exit_code == 3
    assert "rule clocks_disjoint" in result.stderr and "cannot be aligned" in result.stderr
    missing = runner.invoke(app, ["analyze", str(trace), "--steps", str(tmp_path / "no.csv")])
    assert missing.exit_code == 3 and "no.csv: cannot read: No such file" in missing.stderr


def test_usage_errors(injected: tuple[Path, Path], tmp_path: Path) -> None:
    trace, steps = injected
    alone = runner.invoke(app, ["analyze", str(trace), "--stalls-out", str(tmp_path / "g.csv")])
    assert alone.exit_code == 2 and "--stalls-out needs --steps" in alone.stderr
    bad = runner.invoke(app, ["analyze", str(trace), "--steps", str(steps), "--steps-from", "nope"])
    assert bad.exit_code == 2 and "--steps-from nope: not a step format" in bad.stderr
    over = runner.invoke(
        app, ["analyze", str(trace), "--steps", str(steps), "--stalls-out", str(steps)]
    )
    assert over.exit_code == 2 and "refusing to overwrite" in over.stderr
