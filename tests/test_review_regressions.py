"""Cases found by review, each pinned so it stays fixed (named after the case)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.streaming import NotTimeOrdered, analyze_streaming
from servetrace.cli import app
from servetrace.errors import InputError
from servetrace.sources.canonical import read_events
from tests.conftest import MS, events, make_request

runner = CliRunner()


def write_csv(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_token_at_the_readmission_timestamp_is_valid(tmp_path: Path) -> None:
    rows = "a,arrival,0\na,admission,100\na,first_token,200\na,preemption,300\n"
    rows += "a,admission,400\na,token,400\na,completion,500\n"
    path = write_csv(tmp_path / "eq.csv", "request_id,event,ts\n" + rows)
    analysis = analyze_paths([path])
    assert analysis.summary.violations == {}
    assert analysis.requests["requeued_ns"].to_list() == [100]


def test_negative_prompt_or_output_tokens_are_invalid() -> None:
    frame = events(
        make_request("ok", admission=1, first=2, complete=2),
        make_request("neg", admission=1, first=2, complete=2, prompt_tokens=-5),
    )
    from servetrace.analysis.memory import analyze_events

    assert list(analyze_events(frame).summary.violations) == ["invalid_token_count"]


@pytest.mark.parametrize("value", ["2.7", "99999999999999999999999"])
def test_token_counts_that_are_not_whole_int64_are_errors(tmp_path: Path, value: str) -> None:
    text = f"request_id,event,ts,tokens\na,arrival,0,\na,first_token,5,{value}\na,completion,6,\n"
    with pytest.raises(InputError, match="not a whole number"):
        analyze_paths([write_csv(tmp_path / "t.csv", text)])


def test_iso_timestamps_with_zone_offsets(tmp_path: Path) -> None:
    text = "request_id,event,ts\na,arrival,2024-01-01T00:00:00.000Z\n"
    text += "a,first_token,2024-01-01T00:00:00.250Z\na,completion,2024-01-01T02:00:00.500+02:00\n"
    r = analyze_paths([write_csv(tmp_path / "iso.csv", text)]).requests.row(0, named=True)
    assert (r["ttft_ns"], r["e2e_ns"]) == (250 * MS, 500 * MS)


def test_overflowing_time_unit_is_an_error(tmp_path: Path) -> None:
    from servetrace.sources.canonical import IngestOptions

    text = "request_id,event,ts\na,arrival,10000000000\na,first_token,10000000001\n"
    with pytest.raises(InputError, match="beyond the"):
        analyze_paths([write_csv(tmp_path / "t.csv", text)], IngestOptions(time_unit="s"))


def test_csv_id_column_is_typed_on_every_row(tmp_path: Path) -> None:
    lines = ["request_id,event,ts"]
    for i in range(4000):
        lines += [
            f"{i},arrival,{i * 10}",
            f"{i},first_token,{i * 10 + 1}",
            f"{i},completion,{i * 10 + 2}",
        ]
    lines += ["x1,arrival,50000", "x1,first_token,50001", "x1,completion,50002"]
    analysis = analyze_paths([write_csv(tmp_path / "late.csv", "\n".join(lines) + "\n")])
    assert analysis.summary.outcomes["completed"] == 4001


def test_nan_request_id_is_a_missing_id(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "request_id": [1.0, 1.0, 1.0, float("nan")],
            "event": ["arrival", "first_token", "completion", "token"],
            "ts": [0, 5, 6, 7],
        }
    )
    frame.write_parquet(tmp_path / "nan.parquet")
    violations = analyze_paths([str(tmp_path / "nan.parquet")]).summary.violations
    assert violations["missing_request_id"]["rows"] == 1


def test_directory_inside_an_underscore_folder(tmp_path: Path, worked_example) -> None:
    parts = tmp_path / "_private" / "parts"
    parts.mkdir(parents=True)
    worked_example.write_parquet(parts / "p0.parquet")
    (parts / "_SUCCESS.csv").write_text("not a part\n")
    assert analyze_paths([str(parts)]).summary.outcomes["completed"] == 1


def test_hive_partition_values_become_columns(tmp_path: Path) -> None:
    for policy in ("fcfs", "sjf"):
        folder = tmp_path / "trace" / f"policy={policy}"
        folder.mkdir(parents=True)
        events(make_request(f"{policy}-1", admission=1, first=2, complete=3)).write_parquet(
            folder / "part-0.parquet"
        )
    result = runner.invoke(
        app, ["analyze", str(tmp_path / "trace"), "--by", "policy", "-f", "json"]
    )
    assert result.exit_code == 0, result.stderr
    groups = json.loads(result.stdout)["by"]["groups"]
    assert [g["value"] for g in groups] == ["fcfs", "sjf"]


@pytest.mark.slow
def test_streaming_partitions_a_log_with_a_row_after_its_request_finished(tmp_path: Path) -> None:
    frame = events(
        make_request("x", admission=1, first=2, complete=3),
        *[
            make_request(f"f{i}", admission=10 + i, first=11 + i, complete=12 + i)
            for i in range(400)
        ],
        [{"request_id": "x", "event": "token", "ts": 999 * MS}],
    )
    path = tmp_path / "late.parquet"
    frame.write_parquet(path)
    with pytest.raises(NotTimeOrdered, match="comes after the request finished"):
        analyze_streaming(read_events([str(path)]), batch_rows=10)
    # the command no longer refuses such a log; it partitions it by request.
    result = runner.invoke(
        app, ["analyze", str(path), "--streaming", "--batch-rows", "1000", "-f", "json"]
    )
    assert result.exit_code == 0, result.stderr
    whole = runner.invoke(app, ["analyze", str(path), "--no-streaming", "-f", "json"])
    streamed, memory = json.loads(result.stdout), json.loads(whole.stdout)
    # the gaps fit the exact budget: the ITL interval too is the in-memory one
    assert streamed == memory


def test_streaming_ignores_unplaceable_rows_for_trace_facts(tmp_path: Path) -> None:
    frame = events(
        make_request("a", first=100, ticks=[150], complete=200),
        make_request("b", first=120, cancel=130),
        [{"request_id": None, "event": "admission", "ts": 5 * MS}],
    )
    path = tmp_path / "client.parquet"
    frame.write_parquet(path)
    whole = analyze_paths([str(path)])
    streamed = analyze_streaming(read_events([str(path)]), batch_rows=3)
    assert streamed.summary.violations == whole.summary.violations
    assert (
        streamed.summary.outcomes
        == whole.summary.outcomes
        == {"completed": 1, "cancelled": 1, "in_flight": 0, "errored": 0}
    )


def test_streaming_by_keeps_itl_per_group() -> None:
    sample = str(Path(__file__).parent.parent / "sample_traces" / "realistic.parquet")
    result = runner.invoke(app, ["analyze", sample, "--streaming", "--by", "policy", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    (group,) = json.loads(result.stdout)["by"]["groups"]
    assert group["metrics"]["itl"]["count"] == 566_257


def test_strict_counts_row_level_quarantine(tmp_path: Path) -> None:
    text = "request_id,event,ts\na,arrival,0\na,first_token,5\na,completion,6\n,token,7\n"
    result = runner.invoke(app, ["analyze", write_csv(tmp_path / "n.csv", text), "--strict"])
    assert result.exit_code == 1


def test_unwritable_output_is_a_usage_error_before_any_work(tmp_path: Path) -> None:
    sample = str(Path(__file__).parent.parent / "sample_traces" / "worked_example.csv")
    for flag in ("--requests-out", "--quarantine-out"):
        result = runner.invoke(app, ["analyze", sample, flag, str(tmp_path / "no" / "x.csv")])
        assert result.exit_code == 2 and "does not exist" in result.stderr
        assert "Traceback" not in result.stderr


def test_compare_report_is_not_a_baseline(tmp_path: Path) -> None:
    sample = str(Path(__file__).parent.parent / "sample_traces" / "policy_fcfs.parquet")
    report = runner.invoke(app, ["compare", sample, sample, "-f", "json", "--resamples", "50"])
    baseline = tmp_path / "cmp.json"
    baseline.write_text(report.stdout)
    result = runner.invoke(
        app, ["check", sample, "--baseline", str(baseline), "--max-regression", "ttft.p99:+10%"]
    )
    assert result.exit_code == 3 and str(baseline) in result.stderr


def test_goodput_on_a_metric_the_trace_lacks_is_a_usage_error(tmp_path: Path) -> None:
    frame = events(make_request("a", first=100, ticks=[150], complete=200))
    path = tmp_path / "client.parquet"
    frame.write_parquet(path)
    result = runner.invoke(app, ["analyze", str(path), "--goodput", "queue_wait<=1ms"])
    assert result.exit_code == 2 and "no completed request has a queue_wait" in result.stderr


def _tiny_pair(tmp_path: Path, n: int, admission: bool = True) -> tuple[str, str]:
    base, slow = [], []
    for i in range(n):
        a = i * 100
        adm = a + 1 if admission else None
        base.append(
            make_request(
                f"r{i}",
                arrival=a,
                admission=adm,
                first=a + 40,
                ticks=[a + 48, a + 56],
                complete=a + 56,
            )
        )
        slow.append(
            make_request(
                f"r{i}",
                arrival=a,
                admission=adm,
                first=a + 60,
                ticks=[a + 90, a + 120],
                complete=a + 120,
            )
        )
    paths = (tmp_path / "base.parquet", tmp_path / "slow.parquet")
    events(*base).write_parquet(paths[0])
    events(*slow).write_parquet(paths[1])
    return str(paths[0]), str(paths[1])


def test_itl_significance_counts_requests_not_gaps(tmp_path: Path) -> None:
    base, slow = _tiny_pair(tmp_path, 3)
    report = runner.invoke(app, ["compare", base, slow, "-f", "json", "--resamples", "200"])
    rows = [r for r in json.loads(report.stdout)["rows"] if r["metric"] == "itl"]
    assert rows and not any(r["significant"] for r in rows)
    check = runner.invoke(
        app,
        [
            "check",
            slow,
            "--baseline",
            base,
            "--max-regression",
            "itl.mean:+10%",
            "--resamples",
            "200",
        ],
    )
    assert check.exit_code == 0 and "is not testable (3 requests" in check.stdout


def test_client_traces_skip_queue_wait_and_decompose_into_ttft(tmp_path: Path) -> None:
    base, slow = _tiny_pair(tmp_path, 30, admission=False)
    report = json.loads(
        runner.invoke(app, ["compare", base, slow, "-f", "json", "--resamples", "200"]).stdout
    )
    assert not any(r["metric"] in ("queue_wait", "prefill") for r in report["rows"])
    assert any("queue_wait skipped" in note for note in report["notes"])
    parts = {p["component"]: p for p in report["decomposition"][slow]}
    assert parts["ttft"]["delta_mean_ms"] == pytest.approx(20.0)
    assert parts["decode"]["delta_mean_ms"] == pytest.approx(44.0)
    assert parts["e2e"]["delta_mean_ms"] == pytest.approx(64.0)


DATA = Path(__file__).parent / "data" / "real"


def test_vllm_bench_negative_ttft_is_named(tmp_path: Path) -> None:
    import gzip

    source = DATA / "vllm-bench-llama33-70b-a100" / "01_tp8_pp1"
    (path,) = source.glob("*qps_04.json.gz")  # the folder now holds all four runs
    with gzip.open(path) as handle:
        doc = json.load(handle)
    doc["ttfts"][3] = -0.5
    broken = tmp_path / "neg.json"
    broken.write_text(json.dumps(doc))
    result = runner.invoke(
        app, ["import", "vllm-bench", str(broken), "-o", str(tmp_path / "x.parquet")]
    )
    assert result.exit_code == 3
    assert "request 3" in result.stderr and "'ttfts'" in result.stderr and ">= 0" in result.stderr


def test_llmperf_ttft_after_e2e_is_named(tmp_path: Path) -> None:
    (path,) = (DATA / "llmperf-leaderboard" / "individual").glob("anyscale_70b.json")
    records = json.loads(path.read_text())
    records[4]["ttft_s"], records[4]["end_to_end_latency_s"] = 10.0, 1.0
    broken = tmp_path / "late_ttft_individual_responses.json"
    broken.write_text(json.dumps(records))
    result = runner.invoke(app, ["analyze", str(broken), "--from", "llmperf"])
    assert result.exit_code == 3
    assert "'ttft_s'" in result.stderr and "end_to_end_latency_s" in result.stderr
    assert "Traceback" not in result.stderr
