"""simulate --metrics-out, analyze --server-metrics and check on a consistency finding,
through the CLI; without the flag the report is unchanged; bad input exits 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("sim")
    trace, prom = folder / "t.parquet", folder / "m.prom"
    done = runner.invoke(
        app,
        [
            "simulate",
            "--requests",
            "120",
            "--rate",
            "20",
            "--kv-blocks",
            "300",
            "-o",
            str(trace),
            "--metrics-out",
            str(prom),
            "--scrape-interval-ms",
            "500",
        ],
    )
    assert done.exit_code == 0, done.output
    return trace, prom


def test_simulate_writes_vllm_series(simulated: tuple[Path, Path]) -> None:
    text = simulated[1].read_text()
    for family in (
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
    ):
        assert f"# TYPE {family} " in text
    assert (
        'vllm:time_to_first_token_seconds_bucket{model_name="sim",engine="0",le="2560.0"}' in text
    )
    # scrapes every 500 ms on the trace clock, in milliseconds
    assert 'vllm:num_requests_waiting{model_name="sim",engine="0"} 0.0 0\n' in text
    assert " 500\n" in text


def test_analyze_json_has_the_findings(simulated: tuple[Path, Path]) -> None:
    trace, prom = simulated
    done = runner.invoke(app, ["analyze", str(trace), "--server-metrics", str(prom), "-f", "json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["server_metrics"]["interval_ms"] == 500
    assert report["server_metrics"]["clock"]["offset_ms"] == 0
    c = report["consistency"]
    assert c["waiting_gauge"]["max_abs"] == 0 and c["waiting_gauge"]["unit"] == "requests"
    assert c["success_counter"]["server_total"] == 120 == c["success_counter"]["trace_total"]
    assert set(c["ttft_histogram"]["percentiles"]) == {"p50", "p90", "p99"}
    assert c["itl_histogram"]["unit"] == "gaps per bucket"
    assert c["e2e_histogram"]["unit"] == "requests per bucket"
    assert c["e2e_histogram"]["server_total"] == 120 and c["e2e_histogram"]["max_abs"] == 0
    assert "engine output step" in c["itl_histogram"]["definition"]


def test_without_the_flag_the_report_is_unchanged(simulated: tuple[Path, Path]) -> None:
    trace, prom = simulated
    plain = runner.invoke(app, ["analyze", str(trace), "-f", "json"]).stdout
    with_metrics = json.loads(
        runner.invoke(
            app, ["analyze", str(trace), "--server-metrics", str(prom), "-f", "json"]
        ).stdout
    )
    del with_metrics["server_metrics"], with_metrics["consistency"]
    assert json.loads(plain) == with_metrics
    assert "server metrics" not in runner.invoke(app, ["analyze", str(trace)]).stdout


def test_table_and_markdown_have_the_section(simulated: tuple[Path, Path]) -> None:
    trace, prom = simulated
    table = runner.invoke(app, ["analyze", str(trace), "--server-metrics", str(prom)]).stdout
    assert "server metrics vs the trace" in table
    assert "waiting_gauge: max |server − trace| 0 requests" in table
    md = runner.invoke(
        app, ["analyze", str(trace), "--server-metrics", str(prom), "-f", "markdown"]
    ).stdout
    assert "### server metrics vs the trace" in md


def test_check_gates_a_finding(simulated: tuple[Path, Path], tmp_path: Path) -> None:
    trace, prom = simulated
    rule = "consistency.waiting_gauge.max_abs<=2"
    ok = runner.invoke(app, ["check", str(trace), "--server-metrics", str(prom), "--slo", rule])
    assert ok.exit_code == 0, ok.output
    # one scrape's gauge 5 higher than the trace's queue
    lines = prom.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(" 1000") and "waiting" in line)
    name, value, stamp = lines[at].rsplit(" ", 2)
    lines[at] = f"{name} {float(value) + 5} {stamp}"
    shifted = tmp_path / "shifted.prom"
    shifted.write_text("\n".join(lines) + "\n")
    bad = runner.invoke(
        app, ["check", str(trace), "--server-metrics", str(shifted), "--slo", rule, "-f", "json"]
    )
    assert bad.exit_code == 1, bad.output
    assert json.loads(bad.stdout)["rules"][0]["value"] == 5


def test_check_gates_each_latency_histogram(simulated: tuple[Path, Path], tmp_path: Path) -> None:
    from servetrace.analysis.server_histograms import HISTOGRAM_CHECKS

    trace, prom = simulated
    args = ["check", str(trace), "--server-metrics", str(prom)]
    for check in HISTOGRAM_CHECKS:
        args += ["--slo", f"consistency.{check.name}.max_abs<=0"]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    # one e2e observation more, above every bound, from the 1 s scrape on
    family = "vllm:e2e_request_latency_seconds"
    lines = prom.read_text().splitlines()
    for i, line in enumerate(lines):
        name, value, stamp = line.rsplit(" ", 2) if not line.startswith("#") else ("", "", "")
        top = name.startswith(f"{family}_bucket") and 'le="+Inf"' in name
        if (top or name.startswith(f"{family}_count")) and int(stamp) >= 1000:
            lines[i] = f"{name} {float(value) + 1} {stamp}"
    extra = tmp_path / "extra.prom"
    extra.write_text("\n".join(lines) + "\n")
    rule = "consistency.e2e_histogram.max_abs<=0"
    bad = runner.invoke(
        app, ["check", str(trace), "--server-metrics", str(extra), "--slo", rule, "-f", "json"]
    )
    assert bad.exit_code == 1, bad.output
    assert json.loads(bad.stdout)["rules"][0]["value"] == 1


def test_consistency_rule_without_metrics_is_a_usage_error(simulated: tuple[Path, Path]) -> None:
    done = runner.invoke(
        app, ["check", str(simulated[0]), "--slo", "consistency.running_gauge.max_abs<=0"]
    )
    assert done.exit_code == 2 and "--server-metrics" in done.output


def test_unreadable_metrics_exit_3(simulated: tuple[Path, Path], tmp_path: Path) -> None:
    garbage = tmp_path / "g.prom"
    garbage.write_text("this is { not prometheus\n")
    done = runner.invoke(app, ["analyze", str(simulated[0]), "--server-metrics", str(garbage)])
    assert done.exit_code == 3
    assert str(garbage) in done.output and "Traceback" not in done.output


def test_clocks_that_cannot_be_aligned_exit_3(simulated: tuple[Path, Path], tmp_path: Path) -> None:
    far = tmp_path / "epoch.prom"
    far.write_text(
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0"} 1.0 1733238000000\n'
        'vllm:num_requests_waiting{engine="0"} 2.0 1733238001000\n'
    )
    done = runner.invoke(app, ["analyze", str(simulated[0]), "--server-metrics", str(far)])
    assert done.exit_code == 3
    assert "cannot be aligned" in done.output and "--clock-offset-ms" in done.output
    # with the offset given, the gauge is compared on the trace's axis
    given = runner.invoke(
        app,
        [
            "analyze",
            str(simulated[0]),
            "--server-metrics",
            str(far),
            "--clock-offset-ms",
            "1733238000000",
            "-f",
            "json",
        ],
    )
    assert given.exit_code == 0, given.output
    report = json.loads(given.stdout)
    assert report["server_metrics"]["clock"]["method"] == "assumed"
    assert report["consistency"]["waiting_gauge"]["compared"] == 2


def test_query_range_json_of_the_same_series_agrees(
    simulated: tuple[Path, Path], tmp_path: Path
) -> None:
    from servetrace.sources.server_metrics import read

    trace, prom = simulated
    samples = read(prom)
    result = []
    for (family, labels, le), part in samples.group_by("family", "labels", "le"):
        metric = {**json.loads(labels), "__name__": family}
        if le is not None:
            metric["__name__"] = f"{family}_bucket"
            metric["le"] = "+Inf" if le == float("inf") else repr(le)
        part = part.sort("ts")
        values = [[t / 1e9, repr(v)] for t, v in zip(part["ts"], part["value"], strict=True)]
        result.append({"metric": metric, "values": values})
    doc = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    answer = tmp_path / "range.json"
    answer.write_text(json.dumps(doc))
    args = ["analyze", str(trace), "--server-metrics", str(answer)]
    done = runner.invoke(app, [*args, "--server-metrics-from", "query_range", "-f", "json"])
    assert done.exit_code == 0, done.output
    findings = json.loads(done.stdout)["consistency"]
    assert all(f["max_abs"] == 0 for f in findings.values()), findings
    wrong = runner.invoke(app, [*args, "--server-metrics-from", "openmetrics"])
    assert wrong.exit_code == 2 and "prometheus, query_range, aiperf" in wrong.output
