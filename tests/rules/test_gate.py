"""servetrace.check: the rule grammar, config files, evaluation, and the check renderers."""

from __future__ import annotations

import json
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

from servetrace.analysis.summary import GoodputTarget
from servetrace.errors import InputError, UsageError
from servetrace.render.check import check_junit, render_check
from servetrace.render.check_words import rule_line
from servetrace.render.formats import CheckFormat
from servetrace.rules.config import CheckConfig, find_config, load_config
from servetrace.rules.evaluate import evaluate
from servetrace.rules.grammar import (
    RuleError,
    parse_goodput_target,
    parse_goodput_targets,
    parse_regression,
    parse_rules,
    parse_slo,
)
from servetrace.rules.rules import RegressionRule, SloRule
from tests.factories import MS, one_request, streamed, synthetic, synthetic_events

FAST = {"resamples": 200}


@pytest.fixture(autouse=True)
def _no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# --------------------------------------------------------------------------- grammar
def test_parse_slo_rules_and_the_mlperf_line() -> None:
    assert parse_slo("ttft.p99<=500ms") == (SloRule("ttft", "p99", "<=", 500, "ms"),)
    assert parse_slo("itl.p50<20ms")[0].limit == 20 * MS
    assert parse_slo("cancelled.fraction<=0.01")[0].limit == 0.01
    assert parse_slo("cancelled.fraction<=1%")[0].limit == pytest.approx(0.01)
    assert parse_slo("goodput.fraction>=0.95")[0].op == ">="
    mlperf = parse_slo("ttft.p99<=2s, tpot.p99<=200ms")
    assert [str(r) for r in mlperf] == ["ttft.p99<=2s", "tpot.p99<=200ms"]
    assert parse_slo("ttft.p99 <= 2 s && tpot.p99<=200ms") == mlperf
    assert parse_slo("ttft.p99 ≤ 2s")[0].op == "<="
    assert parse_slo("ttft.median<=1s")[0].stat == "p50"
    assert parse_slo("e2el.p99_9<1s")[0].key == "e2e.p99_9"


def test_parse_regression_budgets_and_their_direction() -> None:
    assert parse_regression("ttft.p99:+10%") == (RegressionRule("ttft", "p99", 10, "%"),)
    itl = parse_regression("itl.p50:+2ms")[0]
    assert itl.limit_for(10 * MS) == 12 * MS
    assert parse_regression("ttft.p99:10%")[0].value == 10  # unsigned: the worse direction
    throughput = parse_regression("throughput.requests_per_s:5%")[0]
    assert throughput.value == -5 and str(throughput) == "throughput.requests_per_s:-5%"
    assert throughput.limit_for(100.0) == pytest.approx(95.0)
    with pytest.raises(RuleError) as error:
        parse_regression("throughput.requests_per_s:+5%")
    assert error.value.position == len("throughput.requests_per_s:")
    assert "write throughput.requests_per_s:-5%" in error.value.message


def test_parse_rules_tells_slos_from_budgets() -> None:
    kinds = [r.kind for r in parse_rules("ttft.p99<=1s, ttft.p99:+10%")]
    assert kinds == ["slo", "regression"]
    with pytest.raises(RuleError, match="':' starts a regression budget"):
        parse_slo("ttft.p99:+10%")
    with pytest.raises(RuleError, match="a regression budget is written"):
        parse_regression("ttft.p99<=1s")


def test_caret_points_at_the_bad_unit() -> None:
    with pytest.raises(UsageError) as raised:
        parse_slo("ttft.p99<=500xs")
    error = raised.value
    assert isinstance(error, RuleError)
    assert (error.position, error.length) == (13, 2)
    lines = error.message.splitlines()
    assert lines == [
        "bad rule: unknown unit 'xs' (use ns, us, ms, s, min or h)",
        "  ttft.p99<=500xs",
        "               ^^",
    ]
    assert error.hint and "ttft.p99<=500ms" in error.hint


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ("ttfx.p99<=1s", 0, "did you mean 'ttft'"),
        ("ttft<=1s", 4, "expected '.' and a statistic"),
        ("ttft.q99<=1s", 5, "no statistic 'q99'"),
        ("ttft.p99=1s", 8, "use <=, <, >= or >"),
        ("ttft.p99<=", 10, "expected a number"),
        ("ttft.p99<=500", 13, "add a unit"),
        ("ttft.p99<=-1s", 10, "takes no sign"),
        ("ttft.p99<=1s extra", 13, "unexpected text"),
        ("cancelled.fraction<=1ms", 21, "remove 'ms'"),
        ("ttft.p99<=2s,", 12, "empty rule"),  # the caret marks the stray comma
        ("ttft.p99:-10%", 9, "write ttft.p99:+10%"),
        ("throughput.rps>=1", 11, "no statistic"),
    ],
)
def test_bad_rules_show_where(text: str, position: int, reason: str) -> None:
    with pytest.raises(RuleError) as raised:
        parse_rules(text)
    assert raised.value.position == position
    assert reason in raised.value.reason
    caret_line = raised.value.message.splitlines()[2]
    assert caret_line.index("^") == 2 + position


def test_every_bad_rule_of_a_line_is_reported() -> None:
    with pytest.raises(RuleError) as raised:
        parse_rules("ttft.p99<=1xs, itl.p50<2ms, tpot.p99<=")
    assert [p.position for p in raised.value.problems] == [11, 38]
    assert raised.value.message.count("bad rule") == 2


metric_stat = hs.sampled_from(
    [
        ("ttft", "p99"),
        ("itl", "p50"),
        ("e2e", "mean"),
        ("tpot", "p99_9"),
        ("queue_wait", "max"),
        ("cancelled", "fraction"),
        ("throughput", "requests_per_s"),
        ("preemptions", "count"),
        ("goodput", "fraction"),
        ("ttft", "p75"),
    ]
)
number = hs.one_of(
    hs.integers(0, 10**6).map(float),
    hs.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=200, deadline=None)
@given(
    key=metric_stat,
    op=hs.sampled_from(["<=", "<", ">=", ">"]),
    value=number,
    time_unit=hs.sampled_from(["ns", "us", "ms", "s"]),
    budget=hs.booleans(),
    percent=hs.booleans(),
)
def test_rules_round_trip(key, op, value, time_unit, budget, percent) -> None:
    metric, stat = key
    is_time = metric in ("ttft", "itl", "e2e", "tpot", "queue_wait")
    if budget:
        unit = "%" if percent or not is_time else time_unit
        text = f"{metric}.{stat}:{value!r}{unit}"
    else:
        unit = time_unit if is_time else ("%" if percent and stat == "fraction" else "")
        text = f"{metric}.{stat}{op}{value!r}{unit}"
    # Out-of-range numbers are refused (tests/rules/test_grammar.py): a fraction above 1,
    # a higher-is-better metric falling by more than 100 %.
    as_ratio = value / 100 if unit == "%" else value
    assume(not (stat == "fraction" and (not budget or unit != "%") and as_ratio > 1))
    assume(not (budget and unit == "%" and metric in ("throughput", "goodput") and value > 100))
    (rule,) = parse_rules(text)
    assert parse_rules(str(rule)) == (rule,)
    assert parse_rules(str(rule))[0].text == str(rule)


def test_goodput_targets_as_vllm_spells_them() -> None:
    assert parse_goodput_target("ttft<=200ms") == GoodputTarget("ttft", "<=", 200 * MS)
    assert parse_goodput_target("e2el<=2s") == GoodputTarget("e2e", "<=", 2e9)
    assert parse_goodput_targets("ttft<=200ms, tpot<=50ms")[1].limit_ns == 50 * MS
    with pytest.raises(RuleError, match="without a statistic"):
        parse_goodput_target("ttft.p99<=200ms")
    with pytest.raises(RuleError, match="give each its own"):
        parse_goodput_target("ttft<=200ms, tpot<=50ms")
    with pytest.raises(RuleError, match="cannot be a per-request goodput target"):
        parse_goodput_target("throughput<=1s")


# --------------------------------------------------------------------------- config
def test_config_found_walking_up_from_cwd(tmp_path: Path) -> None:
    (tmp_path / "servetrace.toml").write_text(
        '[check]\nslo = ["ttft.p99<=2s", "tpot.p99<=200ms"]\n'
        'regression = "ttft.p99:+10%, itl.p50:+2ms"\ngoodput = ["ttft<=200ms"]\n'
        'baseline = "runs/base.parquet"\nsignificance = false\nseed = 7\nresamples = 500\n'
    )
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    config = load_config(cwd=deep)
    assert config.source == tmp_path / "servetrace.toml"
    assert [str(r) for r in config.rules] == [
        "ttft.p99<=2s",
        "tpot.p99<=200ms",
        "ttft.p99:+10%",
        "itl.p50:+2ms",
    ]
    assert config.goodput == (GoodputTarget("ttft", "<=", 200 * MS),)
    assert config.baseline == (tmp_path / "runs" / "base.parquet").resolve()
    assert (config.significance, config.seed, config.resamples) == (False, 7, 500)


def test_pyproject_tool_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.servetrace.check]\nslo = ["ttft.p99<=1s"]\n'
    )
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n')  # no tool table
    assert find_config(inner) == tmp_path / "pyproject.toml"
    assert [str(r) for r in load_config(cwd=inner).rules] == ["ttft.p99<=1s"]
    assert load_config(tmp_path / "pyproject.toml").rules == load_config(cwd=inner).rules
    with pytest.raises(UsageError, match=r"no \[tool.servetrace\] table"):
        load_config(inner / "pyproject.toml")


def test_no_config_is_empty(tmp_path: Path) -> None:
    assert load_config(cwd=tmp_path) == CheckConfig() or find_config(tmp_path) is not None


def test_config_problems_are_reported_together(tmp_path: Path) -> None:
    path = tmp_path / "servetrace.toml"
    path.write_text('[check]\nslo = ["ttft.p99<=500xs"]\nsignificanse = true\nseed = "0"\n')
    with pytest.raises(UsageError) as raised:
        load_config(path)
    message = raised.value.message
    assert f"{path}: check.slo[0]: bad rule: unknown unit 'xs'" in message
    assert "               ^^" in message
    assert "'significanse' (did you mean 'significance'?)" in message
    assert "check.seed must be an integer" in message
    path.write_text("[check\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_config(path)


# --------------------------------------------------------------------------- evaluate
def test_slo_failure_message_by_hand() -> None:
    result = evaluate(one_request(208), "ttft.p99<=200ms, ttft.p50<1s")
    assert not result.passed
    failed, passed = result.results
    assert rule_line(failed) == "FAIL ttft.p99: 208 ms > 200 ms"
    assert (failed.value, failed.limit) == (208 * MS, 200 * MS)  # ns until rendered
    assert failed.baseline is None and failed.significant is None
    # one request cannot bound a median from above: INCONCLUSIVE, led by what was observed
    # (6 give the bound: 0.5^6 = 0.0156 <= 0.025 < 0.5^5)
    assert rule_line(passed) == (
        "INCONCLUSIVE ttft.p50: observed 208 ms meets 1000 ms, but 1 request cannot bound a "
        "p50 from above at 95% (that needs at least 6 requests; --gate point decides on the "
        "observed value)"
    )


def test_check_against_itself_passes() -> None:
    a = synthetic(300)
    rules = parse_rules(
        "ttft.p99:+0%, itl.p50:+0ms, throughput.requests_per_s:-0%, cancelled.fraction:+0"
    )
    result = evaluate(a, rules, a, **FAST)
    assert result.passed
    assert all(r.significant is False for r in result.results)
    assert result.workload is not None and result.workload.verdict == "identical"


def test_budget_fails_only_when_exceeded_and_significant() -> None:
    base = synthetic(400)
    slow = synthetic(400, queue_scale=1.3, prefill_scale=1.3)
    result = evaluate(slow, "ttft.p50:+10%, ttft.p50:+50%", base, **FAST)
    over, within = result.results
    assert not over.passed and over.significant is True
    assert rule_line(over).startswith("FAIL ttft.p50:") and rule_line(over).endswith(
        "+30.0%, significant)"
    )
    assert within.passed
    # a noisy, tiny sample: beyond the budget but not significant, so it passes
    few = synthetic(12, latency_seed=1)
    other = synthetic(12, latency_seed=2)
    noisy = evaluate(other, "ttft.p99:+1%", few, **FAST)
    rule = noisy.results[0]
    if rule.value > rule.limit:
        assert rule.passed and rule.significant is False
    unchecked = evaluate(slow, "ttft.p50:+10%", base, significance=False)
    assert not unchecked.passed and unchecked.results[0].significant is None


def test_json_baseline_applies_the_budget_only() -> None:
    analysis = one_request(208)
    document = {
        "metrics": {"ttft": {"unit": "ms", "p99": 180.0}},
        "throughput": {"requests_per_s": 1.0},
        "outcomes": {"completed": 9, "cancelled": 1, "in_flight": 0},
    }
    result = evaluate(analysis, "ttft.p99:+10%, cancelled.fraction:+0", document)
    ttft, cancelled = result.results
    assert not ttft.passed and ttft.significant is None
    assert ttft.baseline == 180 * MS and ttft.limit == pytest.approx(198 * MS)
    assert rule_line(ttft) == "FAIL ttft.p99: 208 ms > 198 ms (baseline 180 ms +10%; +15.6%)"
    assert cancelled.passed and cancelled.baseline == pytest.approx(0.1)
    assert result.baseline_kind == "json"
    with pytest.raises(UsageError, match=r"has no itl\.p50"):
        evaluate(analysis, "itl.p50:+1ms", document)
    with pytest.raises(InputError, match="naming"):  # a foreign report is bad input: exit 3
        evaluate(analysis, "ttft.p99:+10%", {**document, "naming": "vllm"})


def test_usage_errors() -> None:
    a = synthetic(20, prompt_known=False)
    with pytest.raises(UsageError, match="no rules"):
        evaluate(a, [])
    with pytest.raises(UsageError, match="need a baseline"):
        evaluate(a, "ttft.p99:+10%")
    with pytest.raises(UsageError, match=r"goodput\.fraction needs per-request goodput targets"):
        evaluate(a, "goodput.fraction>=0.9, throughput.total_tokens_per_s>=1")


def test_goodput_rules_use_the_targets() -> None:
    a = synthetic(100)
    targets = parse_goodput_targets("ttft<=1ms")
    result = evaluate(a, "goodput.fraction>=0.95, goodput.count<=0", goodput=targets)
    fraction, count = result.results
    assert fraction.value == 0.0 and not fraction.passed
    assert count.passed


def test_check_through_the_pipeline() -> None:
    from servetrace.analysis.memory import analyze_events
    from tests.conftest import events, make_request

    requests = [
        make_request(
            f"q{i}",
            arrival=i * 50,
            admission=i * 50 + 10,
            first=i * 50 + 40,
            ticks=[i * 50 + 45, i * 50 + 50],
            complete=i * 50 + 50,
        )
        for i in range(30)
    ]
    analysis = analyze_events(events(*requests))
    result = evaluate(
        analysis, "ttft.p99<=40ms && tpot.p99<=5ms, queue_wait.p50<10ms", analysis, **FAST
    )
    # 30 requests cannot bound a p99 from above (0.99^30 > 0.025): INCONCLUSIVE
    assert [r.status.value for r in result.results] == ["inconclusive", "inconclusive", "fail"]
    assert rule_line(result.results[2]) == "FAIL queue_wait.p50: 10 ms >= 10 ms"


# --------------------------------------------------------------------------- render
@pytest.mark.parametrize("fmt", list(CheckFormat))
def test_every_check_format_renders(fmt: CheckFormat) -> None:
    result = evaluate(one_request(208), "ttft.p99<=200ms, e2e.p50<=1s")
    text = render_check(result, fmt)
    assert text.endswith("\n")
    assert "ttft.p99" in text


def test_check_json_contract() -> None:
    result = evaluate(one_request(208), "ttft.p99<=200ms")
    document = json.loads(render_check(result, CheckFormat.json, trace="t.parquet"))
    assert document["passed"] is False and document["trace"] == "t.parquet"
    (rule,) = document["rules"]
    assert {
        k: rule[k]
        for k in ("rule", "kind", "passed", "value", "limit", "unit", "baseline", "significant")
    } == {
        "rule": "ttft.p99<=200ms",
        "kind": "slo",
        "passed": False,
        "value": 208.0,
        "limit": 200.0,
        "unit": "ms",
        "baseline": None,
        "significant": None,
    }


def test_junit_has_one_case_per_rule() -> None:
    strict = evaluate(one_request(208), "ttft.p99<=200ms, e2e.p50<=1s")
    strict_suite = ET.fromstring(check_junit(strict)).find("testsuite")
    assert strict_suite is not None and strict_suite.get("failures") == "2"  # inconclusive
    result = evaluate(one_request(208), "ttft.p99<=200ms, e2e.p50<=1s", allow_inconclusive=True)
    root = ET.fromstring(check_junit(result))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["ttft.p99<=200ms", "e2e.p50<=1s"]
    failure = cases[0].find("failure")
    assert failure is not None
    assert failure.get("message") == "FAIL ttft.p99: 208 ms > 200 ms"
    assert cases[1].find("failure") is None


def test_check_text_golden() -> None:
    result = evaluate(one_request(208), "ttft.p99<=200ms, e2e.p50<=1s")
    assert render_check(result, "table") == (
        "FAIL ttft.p99: 208 ms > 200 ms\n"
        "INCONCLUSIVE e2e.p50: observed 208 ms meets 1000 ms, but 1 request cannot bound a "
        "p50 from above at 95% (that needs at least 6 requests; --gate point decides on the "
        "observed value)\n"
        "\n"
        "check failed: 1 of 2 rules, 1 inconclusive\n"
    )


def test_streamed_itl_comes_from_the_summary(tmp_path: Path) -> None:
    from servetrace.comparison.values import metric_value

    batched = streamed(synthetic_events(30), tmp_path)
    assert batched.gaps.height == 0  # a streamed analysis keeps a histogram, not gaps
    p50 = batched.summary.metrics["itl"]["p50"]
    assert p50 is not None
    assert metric_value(batched, "itl", "p50") == p50
    result = evaluate(batched, f"itl.p50<{p50 / MS + 1}ms")
    assert result.passed and result.results[0].value == pytest.approx(p50)
