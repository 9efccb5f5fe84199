"""servetrace.render.check by hand: results built from numbers (ns), every format's text."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from servetrace.comparison.measure import Skipped
from servetrace.render.check import (
    check_dict,
    check_junit,
    check_markdown,
    render_check,
)
from servetrace.render.check_words import rule_line
from servetrace.rules.grammar import parse_rules
from servetrace.rules.outcome import Reason, Status
from servetrace.rules.result import CheckResult, RuleResult

MS = 1_000_000
SLO_PASS, SLO_FAIL, BUDGET, SKIPPED, RATE = parse_rules(
    "ttft.p99<=2s, tpot.p99<=30ms, itl.p99:+10%, queue_wait.p99<=1s, throughput.requests_per_s:-5%"
)


def results(require_all: bool = False) -> CheckResult:
    return CheckResult(
        results=(
            RuleResult(SLO_PASS, Status.PASS, Reason.WITHIN, 1348.9 * MS, 2000 * MS),
            RuleResult(SLO_FAIL, Status.FAIL, Reason.BEYOND, 35.14 * MS, 30 * MS),
            RuleResult(
                BUDGET,
                Status.PASS,
                Reason.NOT_SIGNIFICANT,
                240 * MS,
                220 * MS,
                200 * MS,
                significant=False,
                ratio=1.2,
                ci_low=0.9,
                ci_high=1.6,
                p_value=0.2,
            ),
            RuleResult(
                SKIPPED, Status.SKIP, Reason.CLIENT_TRACE, None, 1000 * MS, missing_in="trace"
            ),
            RuleResult(RATE, Status.PASS, Reason.WITHIN, 10.0, 9.5, 10.0, significant=False),
        ),
        significance=True,
        seed=7,
        resamples=500,
        confidence=0.9,
        baseline_kind="trace",
        require_all=require_all,
        notes=(Skipped("itl", "p99", "no gap in the baseline"),),
    )


LINES = [
    "PASS ttft.p99: 1349 ms <= 2000 ms",
    "FAIL tpot.p99: 35.1 ms > 30 ms",
    "PASS itl.p99: 240 ms is beyond the budget 220 ms (baseline 200 ms +10%), but the +20.0% "
    "change is not significant",
    "SKIP queue_wait.p99: unavailable: this trace is a client-side trace: it has no "
    "queue_wait (a client sees no admissions)",
    "PASS throughput.requests_per_s: 10 req/s >= 9.5 req/s (baseline 10 req/s -5%; +0.0%)",
]
METHOD = (
    "regression budgets fail only when exceeded and significant: 90% bootstrap CI of "
    "candidate/baseline on the worse side of 1 (500 resamples, seed 7)"
)


def test_rule_lines() -> None:
    assert [rule_line(r) for r in results().results] == LINES


def test_table() -> None:
    assert render_check(results(), "table") == "\n".join(
        [
            *LINES,
            "",
            "check failed: 1 of 5 rules, 1 skipped",
            "method: " + METHOD,
            "note: itl.p99 skipped: no gap in the baseline",
            "",
        ]
    )


def test_verdict_lines_with_skips() -> None:
    passing = CheckResult(
        results=(results().results[0], results().results[3]),
        significance=True,
        seed=0,
        resamples=2000,
        confidence=0.95,
        baseline_kind=None,
    )
    assert render_check(passing, "table").splitlines()[3] == "check passed: 1 of 2 rules, 1 skipped"
    strict = CheckResult(**{**passing.__dict__, "require_all": True})
    assert not strict.passed
    assert render_check(strict, "table").splitlines()[3] == (
        "check failed: 1 of 2 rules skipped, and --require-all needs every rule checked"
    )


def test_json_values_in_ms_and_status_and_reason() -> None:
    document = check_dict(results(), trace="t.parquet", baseline="b.parquet")
    assert list(document)[:4] == ["servetrace_version", "schema_version", "trace", "baseline_file"]
    assert document["passed"] is False and document["skipped"] == 1
    assert document["require_all"] is False and document["baseline"] == "trace"
    assert (document["seed"], document["resamples"], document["confidence"]) == (7, 500, 0.9)
    assert document["notes"] == ["itl.p99 skipped: no gap in the baseline"]
    first, _, budget, skipped, rate = document["rules"]
    assert first == {
        "rule": "ttft.p99<=2s",
        "kind": "slo",
        "passed": True,
        "value": 1348.9,
        "limit": 2000.0,
        "unit": "ms",
        "baseline": None,
        "significant": None,
        "ratio": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "message": LINES[0],
        "status": "pass",
        "reason": "within",
    }
    assert (budget["value"], budget["limit"], budget["baseline"]) == (240.0, 220.0, 200.0)
    assert (budget["ratio"], budget["ci_low"], budget["ci_high"], budget["p_value"]) == (
        1.2,
        0.9,
        1.6,
        0.2,
    )
    assert budget["reason"] == "not_significant" and budget["passed"] is True
    assert skipped["passed"] is None and skipped["status"] == "skip"
    assert skipped["reason"] == "client_trace" and skipped["value"] is None
    assert skipped["limit"] == 1000.0
    assert rate["unit"] == "req/s" and rate["value"] == 10.0  # rates are not converted
    assert json.loads(render_check(results(), "json")) == check_dict(results())


def test_markdown() -> None:
    assert check_markdown(results()) == "\n".join(
        [
            "### servetrace check :x: check failed: 1 of 5 rules, 1 skipped",
            "",
            "| | rule | value | limit | baseline | significant |",
            "|---|---|---:|---:|---:|---|",
            "| :white_check_mark: | `ttft.p99<=2s` | 1349 ms | 2000 ms |  | - |",
            "| :x: | `tpot.p99<=30ms` | 35.1 ms | 30 ms |  | - |",
            "| :white_check_mark: | `itl.p99:+10%` | 240 ms | 220 ms | 200 ms | no |",
            "| :fast_forward: | `queue_wait.p99<=1s` | n/a | 1000 ms |  | - |",
            "| :white_check_mark: | `throughput.requests_per_s:-5%` | 10 req/s | 9.5 req/s "
            "| 10 req/s | no |",
            "",
            "> :fast_forward: " + LINES[3],
            "",
            f"<sub>{METHOD}</sub>",
            "",
            "> :warning: itl.p99 skipped: no gap in the baseline",
            "",
        ]
    )


def test_junit_skipped_and_failed_cases() -> None:
    root = ET.fromstring(check_junit(results()))
    suite = root.find("testsuite")
    assert suite is not None
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5",
        "failures": "1",
        "errors": "0",
        "skipped": "1",
    }
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {
        "servetrace_version": properties["servetrace_version"],
        "seed": "7",
        "resamples": "500",
        "confidence": "0.9",
        "significance": "True",
    }
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == [
        "servetrace.rules.slo",
        "servetrace.rules.slo",
        "servetrace.rules.regression",
        "servetrace.rules.slo",
        "servetrace.rules.regression",
    ]
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == LINES[1] == failure.text
    assert failure.get("type") == "slo"
    skipped = cases[3].find("skipped")
    assert skipped is not None and skipped.get("message") == LINES[3]
    system_out = cases[0].find("system-out")
    assert system_out is not None and system_out.text == LINES[0]
    # Under --require-all a skipped rule is a failure for the CI system too.
    strict = ET.fromstring(check_junit(results(require_all=True))).find("testsuite")
    assert strict is not None
    assert (strict.get("failures"), strict.get("skipped")) == ("2", "0")
    assert strict.findall("testcase")[3].find("failure") is not None
