"""The library API gives the CLI's numbers: same JSON, for canonical traces and exports."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from servetrace.errors import InputError, UsageError
from servetrace.render.summary import render_json

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
AIPERF = DATA / "peers" / "aiperf_s1_conc8" / "profile_export.jsonl.gz"
CANONICAL = ROOT / "sample_traces" / "realistic.parquet"
FCFS = ROOT / "sample_traces" / "policy_fcfs.parquet"
CHUNKED = ROOT / "sample_traces" / "policy_chunked.parquet"
runner = CliRunner()


def cli_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def as_json(document: dict) -> dict:
    """What the CLI prints, read back: the same encoder (NaN → null, tuples → lists)."""
    return json.loads(render_json(document))


def assert_same(a: object, b: object, path: str = "") -> None:
    """Equal, floats to 1e-9 relative: Polars' multi-threaded sums may differ in the 15th
    digit between two identical runs, which is not a difference of API and CLI."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (path, a, b)
    else:
        assert a == b, (path, a, b)


@pytest.mark.slow
@pytest.mark.parametrize("path", [CANONICAL, AIPERF], ids=["canonical", "aiperf-export"])
def test_analyze_to_dict_is_the_cli_json_report(path: Path) -> None:
    analysis = servetrace.analyze(str(path))
    assert_same(as_json(servetrace.to_dict(analysis)), cli_json("analyze", str(path)))


def test_analyze_foreign_export_is_imported_like_the_cli() -> None:
    analysis = servetrace.analyze(AIPERF)  # a Path, detected by content
    summary = analysis.summary
    assert summary.source == "client"
    assert summary.accounting.requests == summary.accounting.requests_valid > 0
    assert summary.metrics["queue_wait"]["count"] == 0  # client-side: no admission
    assert summary.metrics["ttft"]["count"] == summary.outcomes["completed"] > 0


def test_analyze_by_and_options_match_the_cli() -> None:
    args = ["--by", "policy", "--goodput", "ttft<=500ms", "--formula-abs-tol-ms", "2"]
    path = str(CANONICAL)
    analysis = servetrace.analyze(
        path, by="policy", goodput=["ttft<=500ms"], formula_abs_tol_ns=2_000_000
    )
    assert analysis.groups and analysis.by == "policy"
    assert_same(as_json(servetrace.to_dict(analysis)), cli_json("analyze", path, *args))


def test_analyze_requests_and_quarantine_frames(tmp_path: Path) -> None:
    analysis = servetrace.analyze(CANONICAL)
    assert "_key" not in analysis.requests.columns
    assert analysis.requests.height == analysis.summary.accounting.requests_valid
    assert analysis.quarantine.height == analysis.summary.accounting.rows_quarantined
    out = tmp_path / "requests.parquet"
    assert (
        runner.invoke(app, ["analyze", str(CANONICAL), "--requests-out", str(out)]).exit_code == 0
    )
    assert pl.read_parquet(out).equals(analysis.requests)


def test_read_events_canonical_and_foreign() -> None:
    canonical = servetrace.read_events(CANONICAL)
    assert canonical.columns[:3] == ["request_id", "event", "ts"]
    assert canonical.height == servetrace.analyze(CANONICAL).summary.accounting.rows
    imported = servetrace.read_events([AIPERF])
    assert set(imported["event"].unique()) >= {"arrival", "first_token", "completion"}
    assert imported["ts"].dtype == pl.Int64


def test_compare_is_the_cli_comparison() -> None:
    from servetrace.render.compare import compare_dict

    comparison = servetrace.compare(str(FCFS), str(CHUNKED), metrics=["ttft", "itl"], resamples=200)
    cli = cli_json(
        "compare",
        str(FCFS),
        str(CHUNKED),
        "--metric",
        "ttft",
        "--metric",
        "itl",
        "--resamples",
        "200",
    )
    assert_same(as_json(compare_dict([comparison])), cli)


def test_compare_accepts_analyses() -> None:
    base, cand = servetrace.analyze(FCFS, streaming=False), servetrace.analyze(CHUNKED)
    by_path = servetrace.compare(FCFS, CHUNKED, metrics=["ttft"], resamples=200)
    by_object = servetrace.compare(base, cand, metrics=["ttft"], resamples=200)
    assert by_path.rows.equals(by_object.rows)


def test_check_is_the_cli_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no servetrace.toml of the repository's own
    result = servetrace.check(
        str(CHUNKED), ["ttft.p99<=1ms", "itl.p50:+50%"], baseline=str(FCFS), resamples=200
    )
    assert not result.passed and result.failures
    cli = cli_json(
        "check",
        str(CHUNKED),
        "--slo",
        "ttft.p99<=1ms",
        "--max-regression",
        "itl.p50:+50%",
        "--baseline",
        str(FCFS),
        "--resamples",
        "200",
    )
    assert_same(as_json(servetrace.to_dict(result)), cli)


def test_check_against_a_json_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "base.json"
    report.write_text(render_json(servetrace.to_dict(servetrace.analyze(FCFS))), encoding="utf-8")
    result = servetrace.check(CHUNKED, "ttft.p50:+1000%", baseline=report)
    assert result.passed and result.baseline_kind == "json"
    assert result.baseline_file == str(report)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: servetrace.analyze(CANONICAL, formula_rel_tol=math.nan), "formula_rel_tol"),
        (lambda: servetrace.analyze(CANONICAL, formula_abs_tol_ns=-1), "formula_abs_tol_ns"),
        (lambda: servetrace.compare(FCFS, CHUNKED, min_change=math.nan), "min_change"),
        (lambda: servetrace.compare(FCFS, CHUNKED, confidence=math.inf), "confidence"),
        (lambda: servetrace.compare(FCFS, CHUNKED, seed=-1), "seed"),
        (lambda: servetrace.compare(FCFS, CHUNKED, resamples=10), "resamples"),
        (lambda: servetrace.check(FCFS, "ttft.p99<=1s", resamples=0), "resamples"),
        (lambda: servetrace.analyze(CANONICAL, batch_rows=True), "batch_rows"),
    ],
)
def test_api_rejects_nan_and_out_of_range_options(call, name: str) -> None:
    with pytest.raises(UsageError, match=name):
        call()


def test_api_errors_are_servetrace_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        servetrace.analyze(tmp_path / "missing.parquet")


def test_import_servetrace_is_light_and_exports_the_api() -> None:
    code = (
        "import sys, servetrace; "
        "assert 'polars' not in sys.modules, 'polars imported eagerly'; "
        "assert callable(servetrace.analyze); "
        "assert 'polars' in sys.modules; "
        "print(sorted(servetrace.__all__))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "analyze" in done.stdout and "read_events" in done.stdout
    with pytest.raises(AttributeError):
        _ = servetrace.not_an_api  # type: ignore[attr-defined]
