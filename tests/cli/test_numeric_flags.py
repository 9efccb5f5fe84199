"""Every numeric flag rejects NaN, ±inf and values outside its domain: exit 2, naming it.

``compare --min-change nan`` used to be accepted and reported "no significant change"
where the default finds four; nothing may be read or written first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

ROOT = Path(__file__).parent.parent.parent
TRACE = str(ROOT / "sample_traces" / "policy_fcfs.parquet")
OTHER = str(ROOT / "sample_traces" / "policy_chunked.parquet")
runner = CliRunner()

NOT_FINITE = ["nan", "inf", "-inf"]

# (command line before the flag, flag, values it must refuse)
CASES: list[tuple[list[str], str, list[str]]] = [
    (["analyze", TRACE], "--formula-abs-tol-ms", [*NOT_FINITE, "-1", "1e300"]),
    (["analyze", TRACE], "--formula-rel-tol", [*NOT_FINITE, "-0.01"]),
    (["analyze", TRACE], "--batch-rows", ["0", "999", "-5", str(2**63)]),
    (["compare", TRACE, OTHER], "--min-change", [*NOT_FINITE, "-0.05"]),
    (["compare", TRACE, OTHER], "--confidence", [*NOT_FINITE, "0", "1", "1.5", "0.4"]),
    (["compare", TRACE, OTHER], "--arrival-tolerance-ms", [*NOT_FINITE, "-1", "1e400"]),
    (["compare", TRACE, OTHER], "--seed", ["-1", str(2**64)]),
    (["compare", TRACE, OTHER], "--resamples", ["0", "99", "-1", "100000000"]),
    (["check", TRACE, "--slo", "ttft.p99<=1s"], "--seed", ["-1", str(2**64)]),
    (["check", TRACE, "--slo", "ttft.p99<=1s"], "--resamples", ["0", "-3"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--rate", [*NOT_FINITE, "0", "-1"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--burstiness", [*NOT_FINITE, "0"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--speed", [*NOT_FINITE, "0", "-2"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--cancel-fraction", [*NOT_FINITE, "1.1"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--bundle-prob", ["nan", "-0.1", "2"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--release-delay-ms", [*NOT_FINITE, "-1"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--horizon-s", [*NOT_FINITE, "-1"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--requests", ["-1"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--max-batch-tokens", ["0", "-1"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--max-running", ["0"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--kv-blocks", ["0"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--block-size", ["0"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--limit", ["-1"]),
    (["simulate", "-o", "/nonexistent/out.parquet"], "--seed", ["-1"]),
]


@pytest.mark.parametrize(
    ("prefix", "flag", "value"),
    [(prefix, flag, value) for prefix, flag, values in CASES for value in values],
    ids=lambda part: part if isinstance(part, str) else None,
)
def test_numeric_flag_rejects(prefix: list[str], flag: str, value: str) -> None:
    result = runner.invoke(app, [*prefix, f"{flag}={value}"])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert flag in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("prefix", "flag", "value"),
    [
        (["analyze", TRACE], "--formula-abs-tol-ms", "0"),
        (["analyze", TRACE], "--formula-rel-tol", "0"),
        (["compare", TRACE, OTHER, "--metric", "ttft", "--resamples", "100"], "--min-change", "0"),
        (
            ["compare", TRACE, OTHER, "--metric", "ttft", "--resamples", "100"],
            "--confidence",
            "0.5",
        ),
        (["compare", TRACE, OTHER, "--metric", "ttft"], "--resamples", "100"),
    ],
)
def test_numeric_flag_accepts_its_boundary(prefix: list[str], flag: str, value: str) -> None:
    result = runner.invoke(app, [*prefix, f"{flag}={value}", "--format", "json"])
    assert result.exit_code == 0, result.stderr


def test_min_change_nan_no_longer_hides_the_changes() -> None:
    result = runner.invoke(app, ["compare", TRACE, OTHER, "--min-change", "nan"])
    assert result.exit_code == 2
    assert "--min-change" in result.stderr and "finite" in result.stderr
