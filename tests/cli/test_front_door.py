"""What a new user meets first says the right thing, in words: the names ``compare``
accepts, the states a source cannot tell, the headline's overall effect, the rows of a
summary file, an overloaded simulation, the files other tools write."""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.comparison.catalog import COMPARED_METRICS, METRICS

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
VIDUR = DATA / "vidur"
VLLM = str(VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet")
SARATHI = str(VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__sarathi.parquet")


def _help(*args: str) -> str:
    done = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert done.exit_code == 0, done.output
    return " ".join(done.stdout.split())


def test_compare_help_lists_every_metric_of_the_catalog() -> None:
    text = _help("compare")
    listed = re.search(r"--metric METRIC Metric to compare; repeatable: (.*?) \(default", text)
    assert listed, text
    assert listed.group(1).split(", ") == list(COMPARED_METRICS)
    assert "stalls" in METRICS and "stalls" not in COMPARED_METRICS  # check gates it
    assert "delivery_tail" in listed.group(1) and "preemptions" in listed.group(1)
    assert "(default: all but decode, delivery_tail, itl_max, requeued, fluidity)" in text


def test_a_metric_only_check_gates_is_refused_by_compare() -> None:
    done = runner.invoke(app, ["compare", VLLM, SARATHI, "--metric", "stalls"])
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith("error: stalls is gated by check (with --steps), not compared")


def test_an_unknown_metric_is_a_usage_error_listing_the_names() -> None:
    done = runner.invoke(app, ["compare", VLLM, SARATHI, "--metric", "tft", "--metric", "e2e"])
    assert done.exit_code == 2, done.output
    first, hint = done.stderr.splitlines()
    assert first == "error: unknown metric 'tft' (did you mean 'ttft'?)"
    assert hint.startswith(
        "hint: metrics: " + ", ".join(COMPARED_METRICS) + "; statistics: count, mean"
    )
    assert done.stdout == ""


AIPERF_CANCEL = str(DATA / "peers" / "aiperf_s1_cancel20")


def test_aiperf_cancellations_are_in_an_unknown_stage() -> None:
    """AIPerf drops a cancelled request's partial output: its 59 cancellations (0.2 s in,
    against a 45 ms TTFT median) are not "before the first token, 0 delivered"."""
    done = runner.invoke(app, ["analyze", AIPERF_CANCEL, "-f", "json", "-q"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["cancelled_in"] == {
        "queued": 0,
        "prefill": 0,
        "decode": 0,
        "before_first_token": 0,
        "unknown": 59,
    }
    assert report["cancelled"]["output_tokens_delivered"] is None
    assert report["cancelled"]["unknown_reason"] == (
        "the source drops the partial output of a cancelled request"
    )
    ttft, e2e = report["survival"]["ttft"], report["survival"]["e2e"]
    # Left out of the TTFT estimate, not censored before a first token they may have had.
    assert (ttft["events"], ttft["censored"], ttft["left_out_unknown"]) == (241, 0, 59)
    assert ttft["p90"] == ttft["completed_only"]["p90"]
    # Their e2e is still known to exceed the time to cancel: censored there.
    assert (e2e["censored_cancelled"], e2e["left_out_unknown"]) == (59, 0)


def test_aiperf_cancellations_say_the_unknown_in_words() -> None:
    done = runner.invoke(app, ["analyze", AIPERF_CANCEL, "--censoring"])
    assert done.exit_code == 0, done.output
    assert (
        "cancelled in: unknown 59 (the source drops the partial output of a cancelled "
        "request); tokens delivered unknown before cancel"
    ) in done.stdout
    assert (
        "censored ttft: none censored (59 cancelled left out: the source drops the partial "
        "output of a cancelled request, so whether each had its first token is unknown)"
    ) in done.stdout
    assert "understates" not in done.stdout
    assert "before_first_token" not in done.stdout and "0 tokens delivered" not in done.stdout
    assert (
        "warning: " + AIPERF_CANCEL + "/profile_export.jsonl.gz: 59 cancelled records carry no "
        "partial output (AIPerf drops it)"
    ) in done.stderr


def test_compare_headline_leads_with_the_overall_effect() -> None:
    """Vidur vLLM → Sarathi: e2e is 1.47x faster at mean and p50, 1.53x at p90, 1.43x at
    p99; the TTFT p50 / ITL p99 trade-off follows it."""
    metrics = ["--metric", "ttft", "--metric", "itl", "--metric", "e2e"]
    done = runner.invoke(app, ["compare", VLLM, SARATHI, "-f", "json", *metrics])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["headlines"][SARATHI] == (
        f"{SARATHI}: e2e 1.43-1.53x faster at every statistic (mean, p50, p90, p99); "
        "it trades 152 ms of TTFT p50 for 486 ms of ITL p99"
    )
    assert report["tradeoffs"][SARATHI] == (
        f"{SARATHI} trades 152 ms of TTFT p50 for 486 ms of ITL p99"
    )
    table = runner.invoke(app, ["compare", VLLM, SARATHI, "--metric", "e2e", "--metric", "ttft"])
    assert (
        " ".join(table.stdout.split()).count(
            f"{SARATHI}: e2e 1.43-1.53x faster at every statistic (mean, p50, p90, p99)"
        )
        == 1
    )


def test_a_split_overall_effect_names_each_side() -> None:
    """With --min-change 0.5, e2e p50 (1.47x) does not count as a change, p90 (1.53x)
    does: the headline says which statistic moved and which did not."""
    stats = ["--stat", "p50", "--stat", "p90", "--min-change", "0.5"]
    done = runner.invoke(app, ["compare", VLLM, SARATHI, "-f", "json", "--metric", "e2e", *stats])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["headlines"][SARATHI] == (
        f"{SARATHI}: e2e faster at p90 (1.53x), no significant change at p50"
    )


BENCHMARK_RESULTS = (
    DATA / "real" / "vllm-bench-llama33-70b-a100" / "01_tp8_pp1" / "benchmark_results.json"
)


def test_a_summary_file_labels_its_rows_by_test_name(tmp_path: Path) -> None:
    """vLLM's benchmark_results.json alone: four rows, each named by its 'Test name'."""
    shutil.copy(BENCHMARK_RESULTS, tmp_path)
    done = runner.invoke(app, ["analyze", str(tmp_path / BENCHMARK_RESULTS.name), "-q"])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == "4 runs"
    assert [line.split()[0] for line in lines[2:6]] == [
        "tp8_pp1_qps_01",
        "tp8_pp1_qps_04",
        "tp8_pp1_qps_16",
        "tp8_pp1_qps_inf",
    ]
    assert "#2" not in done.stdout
    assert (
        "n/a in every run, left out: concurrency (not declared), errored (unavailable: the "
        "source does not tell failed from cancelled requests), goodput/s, attainment (needs a "
        "per-request file)"
    ) in done.stdout
    report = json.loads(
        runner.invoke(
            app, ["analyze", str(tmp_path / BENCHMARK_RESULTS.name), "-q", "-f", "json"]
        ).stdout
    )
    assert [run["label"] for run in report["runs"]][1] == "tp8_pp1_qps_04"
    assert report["runs"][1]["reported"]["unavailable"] == {
        "errored": "the source does not tell failed from cancelled requests"
    }


def test_one_run_is_one_run(tmp_path: Path) -> None:
    rows = json.loads(BENCHMARK_RESULTS.read_text())
    (tmp_path / "benchmark_results.json").write_text(json.dumps(rows[1:2]))
    done = runner.invoke(app, ["analyze", str(tmp_path / "benchmark_results.json"), "-q"])
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[0] == "1 run"
    assert done.stdout.splitlines()[2].split()[:3] == ["tp8_pp1_qps_04", "4", "200"]
    markdown = runner.invoke(
        app, ["analyze", str(tmp_path / "benchmark_results.json"), "-q", "-f", "markdown"]
    )
    assert markdown.stdout.startswith("## 1 run\n")


AZURE = DATA / "workloads" / "azure_conv_2023_head300.csv"


def _azure_work_s(kv_tokens: int = (4096 - 40) * 16) -> float:
    """The engine time a request of the Azure slice needs at least, by hand: the default
    engine (80 µs a prompt token, 10 ms a step shared by 4,096 tokens or by the batch,
    0.1 ms a decoding sequence, 0.25 µs a context token; prompt + output − 1 ≤ 4,096 for
    fcfs, else rejected at no cost)."""
    with AZURE.open(newline="") as handle:
        rows = [
            (int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in csv.DictReader(handle)
        ]
    fits = [(p, o) for p, o in rows if p + o - 1 <= 4096]
    held = sum(p + o / 2 for p, o in fits) / len(fits)
    batch = min(128, int(kv_tokens // held))
    total = 0.0
    for p, o in fits:
        context = sum(p + k for k in range(1, o))
        total += 80e-6 * p + 10e-3 * p / 4096 + (o - 1) * (0.1e-3 + 10e-3 / batch)
        total += 0.25e-6 * context
    return total / len(rows)


def test_simulate_says_when_the_workload_saturates_the_engine(tmp_path: Path) -> None:
    """The Azure slice: 299 requests in 83.797671 s (3.556 req/s). Replayed as is, the
    engine keeps up (utilisation 0.68); twice as fast it cannot, and says so."""
    work = _azure_work_s()
    args = ["simulate", "--workload", str(AZURE), "-f", "json"]
    calm = runner.invoke(app, [*args, "-o", str(tmp_path / "calm.parquet")])
    assert calm.exit_code == 0, calm.output
    assert "warning:" not in calm.stderr
    load = json.loads(calm.stdout)["offered_load"]
    assert load["arrival_rate_per_s"] == pytest.approx(298 / 83.797671)
    assert load["work_ms"] == pytest.approx(work * 1000, rel=1e-9)
    assert load["utilisation"] == pytest.approx(298 / 83.797671 * work, rel=1e-9)
    assert round(load["utilisation"], 2) == 0.68
    assert (load["saturated"], load["warning"]) == (False, None)

    fast = runner.invoke(app, [*args, "--speed", "2", "-o", str(tmp_path / "fast.parquet")])
    assert fast.exit_code == 0, fast.output
    load = json.loads(fast.stdout)["offered_load"]
    assert load["utilisation"] == pytest.approx(2 * 298 / 83.797671 * work, rel=1e-6)
    assert load["saturated"] is True
    warning = [line for line in fast.stderr.splitlines() if line.startswith("warning:")]
    assert warning == [f"warning: {load['warning']}"]
    assert load["warning"].startswith(
        "the workload offers 7.11 req/s, each needing at least 190 ms of engine time: 135% of "
        "what the modelled engine can serve (at most 5.25 req/s, at its best batching)"
    )
    assert "replay it slower (--speed 1.18)" in load["warning"]


GUIDELLM = DATA / "peers" / "guidellm_s1_conc8"
GUIDELLM_CSV = DATA / "summaries" / "guidellm_s1_conc8" / "benchmarks.csv"


def test_guidellm_benchmarks_csv_is_read_as_its_summary() -> None:
    """Every figure equals GuideLLM's own, as its benchmarks.json of the same run has it."""
    done = runner.invoke(app, ["analyze", str(GUIDELLM_CSV), "-f", "json"])
    assert done.exit_code == 0, done.output
    assert "give every column its own name" not in done.output
    (run,) = json.loads(done.stdout)["runs"]
    with gzip.open(GUIDELLM / "benchmarks.json.gz") as handle:
        own = json.load(handle)["benchmarks"][0]["metrics"]
    reported = run["reported"]
    for ours, theirs, to_ms in (
        ("ttft", "time_to_first_token_ms", 1),
        ("tpot", "inter_token_latency_ms", 1),
        ("e2e", "request_latency", 1000),
    ):
        figures = own[theirs]["successful"]
        expected = {
            "mean": figures["mean"],
            "p50": figures["median"],
            "std": figures["std_dev"],
            "min": figures["min"],
            "p90": figures["percentiles"]["p90"],
            "p95": figures["percentiles"]["p95"],
            "p99": figures["percentiles"]["p99"],
            "max": figures["max"],
        }
        got = {k: v for k, v in reported["metrics"][ours].items() if k in expected}
        assert got == pytest.approx({k: v * to_ms for k, v in expected.items()}, rel=1e-15)
    assert reported["metrics"]["ttft"]["p99"] == 349.61962699890137
    assert reported["throughput"] == {
        "requests_per_s": own["requests_per_second"]["successful"]["mean"],
        "output_tokens_per_s": own["output_tokens_per_second"]["successful"]["mean"],
    }
    assert (reported["completed"], reported["errored"]) == (400, 0)
    assert run["label"] == "concurrent@8"
    declared = run["declared"]
    assert (declared["max_concurrency"], declared["num_prompts"]) == (8, 400)
    assert declared["duration_s"] == 23.10758948326111 and declared["model"] == "mock-llm"


def test_guidellm_csv_beside_its_json_defers_to_the_json(tmp_path: Path) -> None:
    shutil.copy(GUIDELLM / "benchmarks.json.gz", tmp_path)
    shutil.copy(GUIDELLM_CSV, tmp_path)
    done = runner.invoke(app, ["analyze", str(tmp_path / "benchmarks.csv"), "-f", "json"])
    assert done.exit_code == 0, done.output
    assert "guidellm's summary, not a per-request file: using" in done.stderr
    report = json.loads(done.stdout)
    assert report["accounting"]["requests"] == 400  # the per-request analysis


BURSTGPT = DATA / "real" / "burstgpt-replay" / "detail_log_scale100_prompt500.json"


def test_a_per_request_log_read_as_events_leads_with_from_requests() -> None:
    """BurstGPT's detail log is one JSON object of 500 records keyed by id: the error says
    how to read it first, in one line, and names the records' fields, not 500 keys."""
    done = runner.invoke(app, ["analyze", str(BURSTGPT)])
    assert done.exit_code == 3
    first, hint = done.stderr.splitlines()
    assert first == (
        f"error: {BURSTGPT}: read it with --from requests --column ttft=NAME --column e2e=NAME "
        "(and arrival=NAME or end=NAME): it holds 500 per-request records keyed by id "
        "(event_id, out_len, out_len_expected, in_len, sampled_in_num, sampled_out_len, "
        "first_chunk_time, total_chunk_time, …), not an event log"
    )
    assert hint == (
        "hint: the keys become the request ids; as an event log it would need 'request_id', "
        "'event', 'ts'"
    )
    # The suggestion, followed, reads it.
    mapped = ["--column", "ttft=first_chunk_time", "--column", "e2e=total_chunk_time"]
    followed = runner.invoke(
        app, ["analyze", str(BURSTGPT), "--from", "requests", *mapped, "-q", "-f", "json"]
    )
    assert followed.exit_code == 0, followed.output
    assert json.loads(followed.stdout)["metrics"]["ttft"]["count"] == 500


EDGE_CLIENT_CANCEL = DATA / "edge" / "client_cancel_before_first_token.csv"
AIPERF_OSS = DATA / "real" / "aiperf-gpt-oss-20b-run1"


def _timeline(tmp_path: Path, trace: str, *extra: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "timeline.json"
    done = runner.invoke(app, ["timeline", trace, "-o", str(out), *extra])
    assert done.exit_code == 0, done.output
    return json.loads(out.read_text()), done.stderr


def _named(trace: dict[str, Any], cat: str, request_id: str) -> list[tuple[str, float]]:
    return [
        (e["name"], e.get("dur", 0.0))
        for e in trace["traceEvents"]
        if e.get("cat") == cat and e["args"]["request_id"] == request_id
    ]


def test_timeline_a_client_request_cancelled_without_a_token_awaits_it(tmp_path: Path) -> None:
    """Sent at 0, cancelled at 40 ms, no token: one 40 ms awaiting_token phase, not ttft."""
    trace, _ = _timeline(tmp_path, str(EDGE_CLIENT_CANCEL))
    assert _named(trace, "phase", "c1") == [("awaiting_token", 40_000.0)]
    assert _named(trace, "lifecycle", "c1") == [("cancelled before the first token", 0.0)]
    assert _named(trace, "phase", "ok") == [("ttft", 2_000.0), ("decode", 1_000.0)]


def test_timeline_markers_and_phases_say_what_the_source_knows(tmp_path: Path) -> None:
    trace, stderr = _timeline(tmp_path, AIPERF_CANCEL, "-q")
    names = [e["name"] for e in trace["traceEvents"] if e.get("cat") in ("phase", "lifecycle")]
    # AIPerf dropped what the 59 cancelled requests delivered: neither ttft nor awaiting.
    assert names.count("unknown_state") == 59 and names.count("ttft") == 241
    assert "awaiting_token" not in names
    assert names.count("cancelled, stage unknown (the source drops the partial output)") == 59
    assert not any(name.startswith("cancelled in ") for name in names)
    # The 11 cancelled "after 0.000 seconds" of the real AIPerf run had nothing to deliver.
    trace, stderr = _timeline(tmp_path, str(AIPERF_OSS))
    markers = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "lifecycle"]
    assert markers.count("cancelled before the first token") == 11
    assert markers.count("completed") == 89
    assert stderr.splitlines()[0].startswith("warning: ")
    assert all(line.startswith(("warning: ", "wrote ")) for line in stderr.splitlines()), stderr


def test_timeline_inputs_carry_no_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    trace, _ = _timeline(tmp_path, str(EDGE_CLIENT_CANCEL.resolve()), "-q")
    assert trace["otherData"]["inputs"] == ["tests/data/edge/client_cancel_before_first_token.csv"]
    elsewhere = tmp_path / "copy" / "trace.csv"
    elsewhere.parent.mkdir()
    shutil.copy(EDGE_CLIENT_CANCEL, elsewhere)
    trace, _ = _timeline(tmp_path, str(elsewhere), "-q")
    assert trace["otherData"]["inputs"] == ["trace.csv"]
    # As the user gave it when relative.
    trace, _ = _timeline(tmp_path, "tests/data/edge/../edge/client_cancel_before_first_token.csv")
    assert trace["otherData"]["inputs"] == [
        "tests/data/edge/../edge/client_cancel_before_first_token.csv"
    ]
