"""servetrace.rules.evaluate on real analyses of generated events: hand-computed numbers in
ns, and the pass / fail / skip rule for values a trace does not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.analysis.memory import Analysis, analyze_events
from servetrace.cli import app
from servetrace.errors import UsageError
from servetrace.render.check_words import rule_line
from servetrace.render.summary import summary_dict
from servetrace.rules.baseline import as_report
from servetrace.rules.evaluate import evaluate
from servetrace.rules.grammar import parse_rules
from servetrace.rules.outcome import Reason, Status
from tests.conftest import MS, events, make_request

runner = CliRunner()
LLMPERF = Path(__file__).parents[1] / "data" / "real" / "llmperf-leaderboard" / "individual"


def three(ttft_last: float = 30, **attributes: str) -> list[list[dict]]:
    """TTFT 10, 20, ``ttft_last`` ms; queue wait 2, 4, 6 ms; 2 output tokens each."""
    out = []
    for i, (wait, ttft, gap) in enumerate(((2, 10, 5), (4, 20, 10), (6, ttft_last, 15))):
        a = i * 100
        out.append(
            make_request(
                f"r{i}",
                arrival=a,
                admission=None if attributes else a + wait,
                first=a + ttft,
                ticks=[a + ttft + gap],
                complete=a + ttft + gap,
                prompt_tokens=None if attributes else 5,
                **attributes,
            )
        )
    return out


def analysis(*requests: list[dict]) -> Analysis:
    return analyze_events(events(*requests))


def write(tmp_path: Path, name: str, *requests: list[dict]) -> str:
    path = tmp_path / name
    events(*requests).write_parquet(path)
    return str(path)


# --------------------------------------------------------------------------- numbers
def test_slo_values_by_hand_in_ns() -> None:
    result = evaluate(
        analysis(*three()),
        "ttft.p50<=20ms, ttft.p99<=29ms, queue_wait.p50<4ms, tpot.max<=15ms, "
        "throughput.requests_per_s>=12.2, throughput.total_tokens_per_s>=86",
    )
    p50, p99, wait, tpot, rps, tps = result.results
    # Three requests cannot bound a median at 95 % (0.5^3 > 0.025): INCONCLUSIVE, the
    # point value still reported (behaviour changed on purpose: rules.percentile_gate).
    assert p50.interval == (None, None) and p50.interval_samples == 3
    assert (p50.status, p50.reason, p50.value, p50.limit) == (
        Status.INCONCLUSIVE,
        Reason.UNDECIDED,
        20 * MS,
        20 * MS,
    )
    # linear interpolation: index 0.99 * 2 = 1.98 → 20 + 0.98 * (30 - 20) ms
    assert p99.value == pytest.approx(29.8 * MS) and p99.limit == 29 * MS
    # p99 of 3: l = 2 (P(B <= 1) ≈ 3e-4, P(B <= 2) = 1 − 0.99^3 = 0.0297), no upper bound:
    # [20 ms, ∞) contains 29 ms
    assert p99.interval == (20 * MS, None)
    assert (p99.status, p99.reason) == (Status.INCONCLUSIVE, Reason.UNDECIDED)
    assert wait.value == 4 * MS and wait.status is Status.INCONCLUSIVE
    assert tpot.value == 15 * MS and tpot.passed  # (245 - 230) ms / (2 - 1)
    # window 0 → 245 ms; 3 completed; tokens 3 × (5 prompt + 2 output) = 21
    assert rps.value == pytest.approx(3 / 0.245) and rps.passed
    assert tps.value == pytest.approx(21 / 0.245) and tps.status is Status.FAIL
    assert not result.passed and [r.rule.key for r in result.failures] == [
        "throughput.total_tokens_per_s",
    ]
    assert [r.rule.key for r in result.inconclusive] == ["ttft.p50", "ttft.p99", "queue_wait.p50"]


def test_budget_values_by_hand_without_significance() -> None:
    base, slow = analysis(*three()), analysis(*three(ttft_last=40))
    result = evaluate(slow, "ttft.p99:+10%, ttft.p50:+0ms, ttft.max:+5ms", base, significance=False)
    p99, p50, top = result.results
    assert p99.baseline == pytest.approx(29.8 * MS)
    assert p99.limit == pytest.approx(29.8 * 1.1 * MS)
    assert p99.value == pytest.approx(39.6 * MS)  # 20 + 0.98 * 20
    assert (p99.status, p99.reason, p99.significant) == (Status.FAIL, Reason.BEYOND, None)
    assert (p50.value, p50.limit, p50.status) == (20 * MS, 20 * MS, Status.PASS)
    assert (top.baseline, top.limit, top.value) == (30 * MS, 35 * MS, 40 * MS)
    assert rule_line(top) == "FAIL ttft.max: 40 ms > 35 ms (baseline 30 ms +5ms; +33.3%)"
    assert result.baseline_kind == "trace" and result.workload is None


def test_tiny_samples_are_not_testable_and_say_how_many() -> None:
    base, slow = analysis(*three()), analysis(*three(ttft_last=40))
    (rule,) = evaluate(slow, "ttft.p99:+10%", base, resamples=200).results
    assert (rule.status, rule.reason, rule.samples, rule.significant) == (
        Status.PASS,
        Reason.NOT_TESTABLE,
        3,
        False,
    )


# --------------------------------------------------------------------------- missing values
def test_a_trace_with_no_valid_request_fails_every_rule(tmp_path: Path) -> None:
    stray = make_request("a", arrival=10, first=5, complete=12)  # token before arrival
    result = evaluate(
        analysis(stray),
        "throughput.requests_per_s>=1, ttft.p99<=1s, cancelled.fraction<=0.5, preemptions.count<=0",
    )
    assert [(r.status, r.reason) for r in result.results] == [(Status.FAIL, Reason.NO_REQUESTS)] * 4
    assert rule_line(result.results[0]) == (
        "FAIL throughput.requests_per_s: no value: this trace has no valid request "
        "(a rule that cannot be checked does not pass)"
    )
    # Through the CLI: exit 1 with the reason, not exit 2 with "unknown" as before.
    path = write(tmp_path, "stray.parquet", stray)
    cli = runner.invoke(app, ["check", path, "--slo", "throughput.requests_per_s>=1"])
    assert cli.exit_code == 1, cli.stderr
    assert "this trace has no valid request" in cli.stdout and "unknown" not in cli.stderr


def test_no_completed_request_fails_with_the_reason() -> None:
    cancelled = [make_request(f"c{i}", arrival=i * 10, cancel=i * 10 + 5) for i in range(3)]
    rps, ttft = evaluate(analysis(*cancelled), "throughput.requests_per_s>=1, ttft.p99<=1s").results
    assert rps.value == 0.0 and rps.reason is Reason.BEYOND  # 0 completed over a real window
    assert (ttft.status, ttft.reason, ttft.missing_in) == (
        Status.FAIL,
        Reason.NO_COMPLETED,
        "trace",
    )
    assert rule_line(ttft) == (
        "FAIL ttft.p99: no value: no completed request of this trace has a ttft "
        "(a rule that cannot be checked does not pass)"
    )


def test_a_client_trace_skips_what_a_client_cannot_see(tmp_path: Path) -> None:
    client = analysis(*three(source="client"))
    wait, preempted, ttft, tokens = evaluate(
        client,
        "queue_wait.p99<=1s, preemptions.count<=0, ttft.p99<=1s, throughput.total_tokens_per_s>=1",
    ).results
    assert (wait.status, wait.reason, wait.value) == (Status.SKIP, Reason.CLIENT_TRACE, None)
    assert (preempted.status, preempted.reason) == (Status.SKIP, Reason.CLIENT_TRACE)
    assert ttft.status is Status.INCONCLUSIVE  # three requests cannot bound a p99
    assert (tokens.status, tokens.reason) == (Status.SKIP, Reason.PROMPT_UNKNOWN)
    assert rule_line(wait) == (
        "SKIP queue_wait.p99: unavailable: this trace is a client-side trace: it has no "
        "queue_wait (a client sees no admissions)"
    )
    path = write(tmp_path, "client.parquet", *three(source="client"))
    rules = ["--slo", "queue_wait.p99<=1s, ttft.p99<=1s"]
    lenient = runner.invoke(app, ["check", path, *rules, "--allow-inconclusive"])
    assert lenient.exit_code == 0, lenient.stdout + lenient.stderr
    assert "check passed: 0 of 2 rules, 1 skipped, 1 inconclusive" in lenient.stdout
    strict = runner.invoke(app, ["check", path, *rules, "--require-all", "--allow-inconclusive"])
    assert strict.exit_code == 1
    assert "check failed: 1 of 2 rules skipped, and --require-all" in strict.stdout


def test_one_token_answers_have_no_tpot() -> None:
    single = [
        make_request(
            f"s{i}", arrival=i * 10, admission=i * 10 + 1, first=i * 10 + 4, complete=i * 10 + 4
        )
        for i in range(3)
    ]
    (tpot,) = evaluate(analysis(*single), "tpot.p99<=50ms").results
    assert (tpot.status, tpot.reason) == (Status.SKIP, Reason.METRIC_MISSING)
    assert (
        rule_line(tpot)
        == "SKIP tpot.p99: unavailable: no completed request of this trace has a tpot"
    )


def test_a_request_level_export_skips_itl_and_throughput() -> None:
    result = runner.invoke(
        app,
        [
            "check",
            str(LLMPERF / "together_13b.json"),
            "--from",
            "llmperf",
            "--slo",
            "itl.p99<=1s, throughput.requests_per_s>=0.1, ttft.p99<=60s",
            "-f",
            "json",
            "--allow-inconclusive",
        ],
    )
    assert result.exit_code == 0, result.stderr  # was exit 2: "throughput … unknown"
    rules = json.loads(result.stdout)["rules"]
    assert [(r["status"], r["reason"], r["passed"]) for r in rules] == [
        ("skip", "no_token_times", None),
        ("skip", "arrival_unknown", None),
        # 149 requests: p99's interval [792 ms, ∞) contains 60 s
        ("inconclusive", "undecided", False),
    ]
    assert json.loads(result.stdout)["skipped"] == 2


def test_a_baseline_that_cannot_express_the_metric_skips_the_budget() -> None:
    server, client = analysis(*three()), analysis(*three(source="client"))
    wait, ttft = evaluate(
        server, "queue_wait.p99:+10%, ttft.p99:+50%", client, significance=False
    ).results
    assert (wait.status, wait.reason, wait.missing_in) == (
        Status.SKIP,
        Reason.CLIENT_TRACE,
        "baseline",
    )
    assert wait.value == pytest.approx(5.96 * MS) and wait.baseline is None
    assert rule_line(wait) == (
        "SKIP queue_wait.p99: unavailable in the baseline: the baseline is a client-side "
        "trace: it has no queue_wait (a client sees no admissions)"
    )
    assert ttft.passed


def test_an_empty_baseline_fails_the_budget() -> None:
    empty = analysis(make_request("a", arrival=10, first=5, complete=12))
    (rule,) = evaluate(analysis(*three()), "ttft.p99:+10%", empty).results
    assert (rule.status, rule.reason, rule.missing_in) == (
        Status.FAIL,
        Reason.NO_REQUESTS,
        "baseline",
    )
    assert rule_line(rule) == "FAIL ttft.p99: no value in the baseline: it has no valid request"


def test_a_json_baseline_with_nulls_skips_or_fails_by_the_same_rule() -> None:
    client = analysis(*three(source="client"))
    document = summary_dict(client.summary)
    report = as_report(document)
    assert report.facts().client and report.facts().completed == 3
    wait, ttft = evaluate(analysis(*three()), "queue_wait.p99:+10%, ttft.p99:+0%", report).results
    assert (wait.status, wait.reason, wait.missing_in) == (
        Status.SKIP,
        Reason.CLIENT_TRACE,
        "baseline",
    )
    assert ttft.baseline == pytest.approx(29.8 * MS) and ttft.passed
    emptied = {**document, "outcomes": {"completed": 0, "cancelled": 0, "in_flight": 0}}
    emptied["accounting"] = {**document["accounting"], "requests_valid": 0}
    (rule,) = evaluate(analysis(*three()), "ttft.p99:+0%", emptied).results
    assert (rule.status, rule.reason) == (Status.FAIL, Reason.NO_REQUESTS)


def test_goodput_without_targets_stays_a_usage_error() -> None:
    with pytest.raises(UsageError, match="needs per-request goodput targets"):
        evaluate(analysis(*three()), "goodput.fraction>=0.9")


def test_rules_can_be_parsed_once_and_evaluated_on_many_traces() -> None:
    rules = parse_rules("ttft.p50<=20ms")
    assert evaluate(analysis(*three()), rules, allow_inconclusive=True).passed
    assert evaluate(analysis(*three(ttft_last=40)), rules, allow_inconclusive=True).passed
    assert isinstance(rules, tuple)


def test_options_out_of_range_are_usage_errors_before_any_work() -> None:
    trace = analysis(*three())
    for options, named in (
        ({"seed": -1}, "seed must be an integer from 0"),
        ({"resamples": 10}, "resamples must be an integer from 100"),
        ({"confidence": float("nan")}, "confidence must be a number from 0.5"),
        ({"confidence": float("inf")}, "confidence must be a number from 0.5"),
    ):
        with pytest.raises(UsageError, match=named):
            evaluate(trace, "ttft.p99<=1s", **options)  # type: ignore[arg-type]
