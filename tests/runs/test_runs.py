"""Runs are the unit: real vLLM sweeps, peer run folders, summaries
alone, the runs table, labels, --pool, declared facts and the declared-duration window.

The "Done when" checks: one vLLM configuration's folder → 4 rows equal to vLLM's own
numbers (1e-9 relative) and to the user's cumulative_results.md (its 6 digits); four
configurations → 16 labelled rows; peer run folders side by side → one row per run with
each tool's TTFT/TPOT percentiles; compare qps_01 qps_16 → the declared load differs;
check with a throughput SLO on a vLLM file decides on the declared-duration throughput.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app
from servetrace.runs import Runs

DATA = Path(__file__).resolve().parent.parent / "data"
LLAMA = DATA / "real" / "vllm-bench-llama33-70b-a100"
TP8 = LLAMA / "01_tp8_pp1"
SWEEP = DATA / "real" / "vllm-bench-sweep-head20"
PEERS = DATA / "peers"
QPS = {
    q: TP8 / f"serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_{q}.json.gz"
    for q in ("01", "04", "16", "inf")
}

runner = CliRunner()


def _vllm(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _json(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _cumulative() -> dict[str, dict[str, float]]:
    """The user's table: Test name → column → number (6 significant digits)."""
    lines = [
        line
        for line in (LLAMA / "cumulative_results.md").read_text().splitlines()
        if line.startswith("|")
    ]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        row = dict(zip(head, cells, strict=True))
        rows[row["Test name"]] = {k: float(v) for k, v in row.items() if re.fullmatch(r"[\d.]+", v)}
    return rows


# ----------------------------------------------------------------- one configuration


@pytest.fixture(scope="module")
def tp8() -> dict[str, Any]:
    return _json(["analyze", str(TP8)])


@pytest.mark.slow
def test_one_configuration_folder_is_four_runs_sorted_by_rate(tp8: dict[str, Any]) -> None:
    assert tp8["schema_version"] == 1 and "servetrace_version" in tp8
    assert [r["label"] for r in tp8["runs"]] == ["qps_01", "qps_04", "qps_16", "qps_inf"]
    assert [r["declared"]["request_rate_per_s"] for r in tp8["runs"]] == [1.0, 4.0, 16.0, "inf"]
    for run in tp8["runs"]:
        assert run["accounting"]["requests_invalid"] == 0
        assert run["outcomes"]["completed"] == 200


@pytest.mark.parametrize("q", list(QPS))
def test_each_row_equals_vllms_own_numbers(tp8: dict[str, Any], q: str) -> None:
    theirs = _vllm(QPS[q])
    run = next(r for r in tp8["runs"] if r["label"] == f"qps_{q}")
    for metric in ("ttft", "itl"):
        ours = run["metrics"][metric]
        assert ours["mean"] == pytest.approx(theirs[f"mean_{metric}_ms"], rel=1e-9)
        assert ours["p50"] == pytest.approx(theirs[f"median_{metric}_ms"], rel=1e-9)
        assert ours["p99"] == pytest.approx(theirs[f"p99_{metric}_ms"], rel=1e-9)
    # vLLM's TPOT divides an e2e latency it does not save (tests/sources/test_vllm_bench)
    assert run["metrics"]["tpot"]["mean"] == pytest.approx(theirs["mean_tpot_ms"], abs=1.5e-4)
    throughput = run["throughput"]
    assert throughput["window_source"] == "declared"
    assert throughput["window_s"] == theirs["duration"]
    assert throughput["requests_per_s"] == pytest.approx(theirs["request_throughput"], rel=1e-9)
    assert throughput["output_tokens_per_s"] == pytest.approx(theirs["output_throughput"], rel=1e-9)
    assert throughput["total_tokens_per_s"] == pytest.approx(
        theirs["total_token_throughput"], rel=1e-9
    )
    declared = run["declared"]
    assert declared["tool"] == "vllm-bench"
    assert declared["model"] == "meta-llama/Llama-3.3-70B-Instruct"
    assert declared["num_prompts"] == 200 and declared["completed"] == 200
    assert declared["duration_s"] == theirs["duration"]
    assert declared["max_concurrency"] is None  # vLLM wrote null: no limit declared
    assert (declared["tensor_parallel"], declared["pipeline_parallel"], declared["gpus"]) == (
        8,
        1,
        8,
    )
    assert declared["dataset"] == "sharegpt"  # from the .commands file
    assert declared["sources"]["dataset"].endswith(".commands")


@pytest.mark.parametrize("q", list(QPS))
def test_each_row_equals_the_users_cumulative_results(tp8: dict[str, Any], q: str) -> None:
    row = _cumulative()[f"tp8_pp1_qps_{q}"]
    run = next(r for r in tp8["runs"] if r["label"] == f"qps_{q}")
    m = run["metrics"]
    pairs = {
        "Tput (req/s)": run["throughput"]["requests_per_s"],
        "Output Tput (tok/s)": run["throughput"]["output_tokens_per_s"],
        "Total Tput (tok/s)": run["throughput"]["total_tokens_per_s"],
        "Mean TTFT (ms)": m["ttft"]["mean"],
        "Median TTFT (ms)": m["ttft"]["p50"],
        "P99 TTFT (ms)": m["ttft"]["p99"],
        "Mean ITL (ms)": m["itl"]["mean"],
        "Median ITL (ms)": m["itl"]["p50"],
        "P99 ITL (ms)": m["itl"]["p99"],
    }
    for column, ours in pairs.items():
        assert float(f"{ours:.6g}") == pytest.approx(row[column], rel=1e-12), column
    assert row["# of req."] == run["outcomes"]["completed"]


@pytest.mark.slow
def test_the_table_has_one_row_per_run_and_the_library_agrees(tp8: dict[str, Any]) -> None:
    result = runner.invoke(app, ["analyze", str(TP8)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "4 runs"
    assert [line.split()[0] for line in lines[2:6]] == ["qps_01", "qps_04", "qps_16", "qps_inf"]
    assert "declared duration" in result.stdout
    assert "benchmark_results.json: vllm-bench's summary" in result.stderr  # said, then skipped
    runs = servetrace.analyze_runs(TP8)
    assert isinstance(runs, Runs) and len(runs) == 4
    assert servetrace.to_dict(runs) == tp8
    assert runs.by_label("qps_16").analysis is not None


@pytest.mark.slow
def test_a_glob_of_four_exports_is_four_runs_not_duplicate_arrivals() -> None:
    """The issue's first row: four QPS files used to pool into "200 invalid"."""
    result = runner.invoke(app, ["analyze", str(TP8 / "*qps_*.json.gz"), "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["label"] for r in rows] == ["qps_01", "qps_04", "qps_16", "qps_inf"]
    assert all(r["completed"] == "200" and r["reported"] == "false" for r in rows)
    assert float(rows[1]["requests_per_s"]) == pytest.approx(
        _vllm(QPS["04"])["request_throughput"], rel=1e-9
    )
    markdown = runner.invoke(app, ["analyze", *map(str, QPS.values()), "--format", "markdown"])
    assert markdown.exit_code == 0
    assert markdown.stdout.startswith("## 4 runs") and markdown.stdout.count("| qps_") == 4


def test_one_export_keeps_the_single_run_report() -> None:
    single = runner.invoke(app, ["analyze", str(QPS["04"])])
    assert single.exit_code == 0
    assert single.stdout.startswith("200 requests")
    assert "throughput over 62.99 s (declared duration): 3.18 req/s" in single.stdout
    analysis = servetrace.analyze(QPS["04"])
    assert isinstance(analysis, servetrace.Analysis)
    assert analysis.declared is not None and analysis.declared["request_rate_per_s"] == 4.0


# ----------------------------------------------------------------- sixteen runs


def test_four_configurations_give_sixteen_clearly_labelled_runs() -> None:
    report = _json(["analyze", str(SWEEP)])
    labels = [r["label"] for r in report["runs"]]
    assert len(labels) == 16 == len(set(labels))
    configs = ["01_tp8_pp1", "02_tp4_pp2_no_IB", "03_tp4_pp2_IB", "04_tp4_pp2_IB"]
    assert labels == [f"{c}/qps_{q}" for q in ("01", "04", "16", "inf") for c in configs]
    gpus = {
        r["label"]: (r["declared"]["tensor_parallel"], r["declared"]["pipeline_parallel"])
        for r in report["runs"]
    }
    assert gpus["01_tp8_pp1/qps_01"] == (8, 1) and gpus["03_tp4_pp2_IB/qps_inf"] == (4, 2)


def test_labels_given_by_the_user_and_their_count_checked() -> None:
    report = _json(["analyze", str(QPS["01"]), str(QPS["16"]), "--label", "low", "--label", "high"])
    assert [r["label"] for r in report["runs"]] == ["low", "high"]
    wrong = runner.invoke(app, ["analyze", str(QPS["01"]), str(QPS["16"]), "--label", "x"])
    assert wrong.exit_code == 2 and "1 --label given for 2 runs" in wrong.stderr


def test_pool_makes_ids_unique_per_run() -> None:
    pooled = servetrace.analyze([QPS["01"], QPS["04"]], pool=True)
    assert isinstance(pooled, servetrace.Analysis)
    summary = pooled.summary
    assert summary.accounting.requests == 400 and summary.accounting.requests_invalid == 0
    ids = pooled.requests["request_id"]
    assert ids.n_unique() == 400 and ids.str.starts_with("qps_01:").sum() == 200
    assert set(pooled.requests["run"].unique()) == {"qps_01", "qps_04"}


# ----------------------------------------------------------------- peer run folders


def _aiperf_like(folder: str, name: str) -> dict[str, Any]:
    return json.loads((PEERS / folder / name).read_text())


@pytest.mark.slow
def test_peer_run_folders_side_by_side_match_each_tools_summary() -> None:
    report = _json(["analyze", str(PEERS)])
    runs = {r["label"]: r for r in report["runs"]}
    assert set(runs) == {
        "aiperf_s1_cancel20",
        "aiperf_s1_conc8",
        "genai_perf_s1_conc8",
        "guidellm_s1_conc8",
    }
    for label, file, tol_ms in (
        ("aiperf_s1_conc8", "profile_export_aiperf.json", 1e-9),
        ("aiperf_s1_cancel20", "profile_export_aiperf.json", 1e-9),
        # GenAI-Perf keeps its per-request ITL to 1e-7 ms: agreement within 1 ns
        ("genai_perf_s1_conc8", "profile_export_genai_perf.json", 1e-6),
    ):
        theirs = _aiperf_like(label, file)
        ours = runs[label]["metrics"]
        for stat in ("p50", "p99"):
            assert ours["ttft"][stat] == pytest.approx(
                theirs["time_to_first_token"][stat], abs=tol_ms
            )
            # the tools' inter_token_latency is the per-request mean: servetrace's tpot
            assert ours["tpot"][stat] == pytest.approx(
                theirs["inter_token_latency"][stat], abs=tol_ms
            )
        assert runs[label]["declared"]["max_concurrency"] == 8
        assert runs[label]["declared"]["tool"] in ("aiperf", "genai-perf")
    assert runs["aiperf_s1_conc8"]["declared"]["duration_s"] == pytest.approx(24.156701952)
    guide = runs["guidellm_s1_conc8"]
    assert guide["declared"]["max_concurrency"] == 8 and guide["declared"]["num_prompts"] == 400


@pytest.mark.slow
def test_guidellm_row_is_guidellms_numbers_under_its_own_percentile_rule() -> None:
    """GuideLLM's percentiles are nearest-rank (no interpolation) and its ITL statistics
    token-weighted; the table uses linear interpolation: the row equals GuideLLM's
    summary when recomputed under GuideLLM's rule from the same per-request values."""
    from tests.sources.test_guidellm import guidellm_distribution

    runs = servetrace.analyze_runs(PEERS)
    assert isinstance(runs, Runs)
    run = runs.by_label("guidellm_s1_conc8")
    assert run.analysis is not None
    done = run.analysis.requests.filter(pl.col("outcome") == "completed")
    doc = json.loads(
        gzip.decompress((PEERS / "guidellm_s1_conc8" / "benchmarks.json.gz").read_bytes())
    )
    theirs = doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]
    ttft_ms = done["ttft_ns"] / 1e6
    rule = guidellm_distribution(ttft_ms)
    assert rule["p50"] == pytest.approx(theirs["p50"], abs=1e-6)
    assert rule["p99"] == pytest.approx(theirs["p99"], abs=1e-6)
    row = run.analysis.summary.metrics["ttft"]
    assert row["p50"] / 1e6 == pytest.approx(
        float(np.percentile(ttft_ms.to_numpy(), 50)), rel=1e-12
    )


def test_a_guidellm_file_of_two_benchmarks_is_two_runs(tmp_path: Path) -> None:
    doc = json.loads(
        gzip.decompress((PEERS / "guidellm_s1_conc8" / "benchmarks.json.gz").read_bytes())
    )
    second = json.loads(json.dumps(doc["benchmarks"][0]))
    second["config"]["strategy"] = {"type_": "constant", "rate": 2.5}
    doc["benchmarks"].append(second)
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    runs = servetrace.analyze_runs(path)
    assert isinstance(runs, Runs) and len(runs) == 2
    # the rate-declared benchmark sorts first; concurrency-only (rate unknown) last
    assert [r.declared["request_rate_per_s"] for r in runs] == [2.5, None]
    assert [r.declared["max_concurrency"] for r in runs] == [None, 8]
    assert {r.label for r in runs} == {"benchmarks#0", "benchmarks#1"}
    assert all(
        r.analysis is not None and r.analysis.summary.outcomes["completed"] == 400 for r in runs
    )


# ----------------------------------------------------------------- summaries


def test_a_summary_beside_its_per_request_file_uses_the_per_request_file() -> None:
    summary = PEERS / "aiperf_s1_conc8" / "profile_export_aiperf.json"
    result = runner.invoke(app, ["analyze", str(summary)])
    assert result.exit_code == 0, result.output
    assert "aiperf's summary, not a per-request file: using" in result.stderr
    assert "profile_export.jsonl.gz" in result.stderr
    assert result.stdout.startswith("400 requests")
    assert "not valid JSON" not in result.output


def test_a_summary_alone_is_reported_clearly_marked(tmp_path: Path) -> None:
    lonely = tmp_path / "run_a"
    lonely.mkdir()
    shutil.copy(PEERS / "aiperf_s1_conc8" / "profile_export_aiperf.json", lonely)
    theirs = json.loads((lonely / "profile_export_aiperf.json").read_text())
    runs = servetrace.analyze_runs(lonely / "profile_export_aiperf.json")
    assert isinstance(runs, Runs) and len(runs) == 1
    run = runs[0]
    assert run.analysis is None and run.reported is not None
    assert run.reported["metrics"]["ttft"]["p99"] == theirs["time_to_first_token"]["p99"]
    assert run.reported["throughput"]["requests_per_s"] == theirs["request_throughput"]["avg"]
    assert run.declared["max_concurrency"] == 8
    table = runner.invoke(app, ["analyze", str(lonely)])
    assert table.exit_code == 0, table.output
    assert "548*" in table.stdout and "reported by the tool's own summary" in table.stdout
    report = _json(["analyze", str(lonely)])["runs"][0]
    assert report["reported"]["note"].startswith("the tool's own summary")
    assert "metrics" not in report  # no per-request statistics invented
    # compare and check need requests: a usage error, not a crash
    compared = runner.invoke(app, ["compare", str(lonely), str(QPS["04"])])
    assert compared.exit_code == 2 and "only the tool's summary" in compared.stderr


def test_vllm_benchmark_results_alone_is_one_reported_run_per_row(tmp_path: Path) -> None:
    shutil.copy(TP8 / "benchmark_results.json", tmp_path)
    report = _json(["analyze", str(tmp_path / "benchmark_results.json")])
    rows = report["runs"]
    assert len(rows) == 4
    assert [r["declared"]["request_rate_per_s"] for r in rows] == [1.0, 4.0, 16.0, "inf"]
    qps4 = rows[1]["reported"]
    assert qps4["metrics"]["ttft"]["p99"] == _vllm(QPS["04"])["p99_ttft_ms"]
    assert rows[0]["declared"]["tensor_parallel"] == 8


def test_llmperf_summary_folder_is_never_called_broken_json_lines() -> None:
    result = runner.invoke(app, ["analyze", str(DATA / "real" / "llmperf-leaderboard" / "summary")])
    assert result.exit_code == 0, result.output
    assert "JSON Lines" not in result.output
    assert result.stdout.startswith("6 runs")  # one per summary file of the 6 providers


# ----------------------------------------------------------------- compare and check


@pytest.mark.slow
def test_compare_says_the_declared_load_differs() -> None:
    result = runner.invoke(app, ["compare", str(QPS["01"]), str(QPS["16"]), "--metric", "ttft"])
    assert result.exit_code == 0, result.output
    assert "load: declared load differs 16×: request rate 1 req/s vs 16 req/s" in result.stdout
    assert "declared load differs 16×" in result.stderr  # and loudly, as a warning
    report = json.loads(
        runner.invoke(app, ["compare", str(QPS["01"]), str(QPS["16"]), "--format", "json"]).stdout
    )
    load = report["load"][str(QPS["16"])]
    assert load["verdict"] == "differs"
    assert load["differences"] == [
        {"key": "request_rate_per_s", "baseline": 1.0, "candidate": 16.0, "factor": 16.0}
    ]
    comparison = servetrace.compare(QPS["04"], QPS["inf"], metrics=["ttft"])
    assert comparison.load is not None and comparison.load.verdict == "differs"
    assert math.isinf(comparison.load.differences[0].factor)
    same = servetrace.compare(
        QPS["04"],
        LLAMA
        / "04_tp4_pp2_IB"
        / "serving_meta-llama-Llama-3.3-70B-Instruct_tp4_pp2_sharegpt_qps_04.json.gz",
        metrics=["ttft"],
    )
    assert same.load is not None and same.load.verdict == "same"


@pytest.mark.parametrize(("limit", "code"), [("3.17", 0), ("3.18", 1)])
def test_check_a_throughput_slo_on_the_declared_duration(limit: str, code: int) -> None:
    """vLLM's qps_04 file: 200 completed over 62.988 s = 3.1752 req/s."""
    result = runner.invoke(
        app, ["check", str(QPS["04"]), "--slo", f"throughput.requests_per_s>={limit}"]
    )
    assert result.exit_code == code, result.output
    checked = servetrace.check(QPS["04"], f"throughput.requests_per_s>={limit}")
    assert checked.passed is (code == 0)


@pytest.mark.slow
def test_compare_several_candidates_gives_one_table_with_a_verdict_each() -> None:
    args = ["compare", str(QPS["04"]), str(QPS["01"]), str(QPS["16"]), str(QPS["inf"])]
    result = runner.invoke(app, [*args, "--metric", "ttft", "--metric", "itl"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "baseline: qps_04; 3 candidates"
    assert lines[1].split() == [
        "candidate",
        "verdict",
        "better",
        "worse",
        "unchanged",
        "workload",
        "load",
    ]
    table = {line.split()[0]: line.split() for line in lines[2:5]}
    assert set(table) == {"qps_01", "qps_16", "qps_inf"}
    assert all(row[-1] == "differs" for row in table.values())
    report = json.loads(runner.invoke(app, [*args, "--metric", "ttft", "--format", "json"]).stdout)
    verdicts = {Path(v["candidate"]).name: v for v in report["verdicts"]}
    inf = verdicts[QPS["inf"].name]
    # qps_inf queues: every TTFT statistic significantly worse than at 4 req/s
    assert inf["verdict"] == "worse" and inf["better"] == [] and "ttft.p50" in inf["worse"]
    assert inf["load"] == "differs"
    md = runner.invoke(app, [*args, "--metric", "ttft", "--format", "markdown"]).stdout
    assert md.startswith("### servetrace compare: 3 candidates vs `qps_04`")


def test_the_users_table_alone_is_an_input_error_not_an_empty_report(tmp_path: Path) -> None:
    shutil.copy(LLAMA / "cumulative_results.md", tmp_path)
    result = runner.invoke(app, ["analyze", str(tmp_path / "cumulative_results.md")])
    assert result.exit_code == 3
    assert "nothing to analyse" in result.stderr and "folder of runs" in result.stderr


def test_runs_requests_out_keeps_each_run_apart(tmp_path: Path) -> None:
    out = tmp_path / "requests.parquet"
    result = runner.invoke(
        app, ["analyze", str(QPS["01"]), str(QPS["04"]), "--requests-out", str(out)]
    )
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(out)
    assert frame.height == 400
    assert frame.group_by("run").len().sort("run").rows() == [("qps_01", 200), ("qps_04", 200)]
    plots = runner.invoke(
        app, ["analyze", str(QPS["01"]), str(QPS["04"]), "--plots", str(tmp_path / "p")]
    )
    assert plots.exit_code == 2 and "several runs" in plots.stderr


@pytest.mark.slow
def test_library_labels_and_one_run_needed_for_compare() -> None:
    runs = servetrace.analyze_runs([QPS["16"], QPS["01"]], labels=["fast", "slow"])
    assert isinstance(runs, Runs)
    assert [r.label for r in runs] == ["slow", "fast"]  # sorted by declared rate
    with pytest.raises(servetrace.errors.UsageError, match="holds 4 runs"):
        servetrace.compare(TP8, QPS["04"])
