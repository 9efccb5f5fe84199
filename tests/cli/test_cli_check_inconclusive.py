"""``check`` on a percentile SLO judged by its order-statistic interval, through the CLI.

The trace: 100 completed requests with TTFT 1, 2, …, 100 ms. For p50 at 95 % the
ranks are l = 40, u = 61 (P(B ≤ 39) = 0.018 ≤ 0.025 < P(B ≤ 40) = 0.028, and by
symmetry P(B ≥ 61) = 0.018), so the interval is [40 ms, 61 ms].
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.conftest import events, make_request
from tests.stats.test_order_ci import brute_ranks

runner = CliRunner()


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    rows = [
        make_request(f"r{i:03d}", arrival=0, admission=0, first=i, complete=i + 1)
        for i in range(1, 101)
    ]
    path = tmp_path_factory.mktemp("inconclusive") / "ttft.parquet"
    events(*rows).write_parquet(path)
    return str(path)


def _check(trace: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["check", trace, *args])
    return result.exit_code, result.stdout


def test_brute_force_ranks_of_the_fixture() -> None:
    assert brute_ranks(100, 0.5, 0.95) == (40, 61)


def test_pass_when_the_whole_interval_meets_the_limit(trace: str) -> None:
    code, out = _check(trace, "--slo", "ttft.p50<=62ms")
    assert code == 0
    assert out.splitlines()[0] == "PASS ttft.p50: 50.5 ms <= 62 ms"
    assert "check passed: 1 of 1 rules" in out


def test_fail_when_the_whole_interval_breaks_it(trace: str) -> None:
    code, out = _check(trace, "--slo", "ttft.p50<=39ms")
    assert code == 1
    assert out.splitlines()[0] == "FAIL ttft.p50: 50.5 ms > 39 ms"


def test_inconclusive_fails_unless_allowed(trace: str) -> None:
    code, out = _check(trace, "--slo", "ttft.p50<=55ms")
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith(
        "INCONCLUSIVE ttft.p50: observed 50.5 ms meets 55 ms, but its 95% interval 40 ms "
        "to 61 ms contains the limit (100 requests); about "
    )
    assert "check failed: 1 of 1 rules inconclusive" in out
    code, out = _check(trace, "--slo", "ttft.p50<=55ms", "--allow-inconclusive")
    assert code == 0 and "1 inconclusive" in out


def test_the_point_estimate_meets_it_but_the_interval_does_not_decide(trace: str) -> None:
    # p50 = 50.5 ms <= 60 ms, yet X_(61) = 61 ms > 60 ms: not shown to hold
    code, out = _check(trace, "--slo", "ttft.p50<=60ms")
    assert code == 1 and out.startswith("INCONCLUSIVE ttft.p50: observed 50.5 ms meets 60 ms")
    # Gated on the point estimate, as the benchmark tools gate: a PASS, the interval beside.
    code, out = _check(trace, "--slo", "ttft.p50<=60ms", "--gate", "point")
    assert code == 0 and out.startswith(
        "PASS ttft.p50: 50.5 ms <= 60 ms (the observed value; 95% interval 40 ms to 61 ms, "
        "100 requests)"
    )
    code, out = _check(trace, "--slo", "ttft.p50<=45ms", "--gate", "point")
    assert code == 1 and out.startswith("FAIL ttft.p50: 50.5 ms > 45 ms (the observed value")


def test_more_requests_is_the_smallest_decisive_size(trace: str) -> None:
    code, out = _check(trace, "--slo", "ttft.p50<=55ms", "-f", "json", "--allow-inconclusive")
    assert code == 0
    (rule,) = json.loads(out)["rules"]
    assert rule["status"] == "inconclusive" and rule["reason"] == "undecided"
    assert rule["passed"] is False
    assert rule["interval"] == [40.0, 61.0] and rule["interval_samples"] == 100
    # 55 of 100 samples lie at or below 55 ms: the limit keeps 55 % below it; the first
    # n' with u(n') <= floor(0.55 n') is found by trying every n'
    expected = next(
        size
        for size in range(100, 5000)
        if brute_ranks(size, 0.5, 0.95)[1] <= math.floor(size * 0.55)
    )
    assert rule["more_samples"] == expected - 100
    assert f"about {expected - 100:,} more requests would decide it" in rule["message"]


def test_confidence_changes_the_interval(trace: str) -> None:
    # At 50 % confidence the interval of p50 narrows to about [47, 54]: 55 ms passes.
    _, high = brute_ranks(100, 0.5, 0.5)
    assert high <= 55
    code, out = _check(trace, "--slo", "ttft.p50<=55ms", "--confidence", "0.5")
    assert code == 0 and out.startswith("PASS ttft.p50")
    code, _ = _check(trace, "--slo", "ttft.p50<=55ms", "--confidence", "1.5")
    assert code == 2


def test_small_sample_can_fail_but_not_pass(tmp_path: Path) -> None:
    rows = [
        make_request(f"r{i}", arrival=0, admission=0, first=100 + i, complete=101 + i)
        for i in range(5)
    ]
    path = tmp_path / "five.parquet"
    events(*rows).write_parquet(path)
    # p99 of 5: no upper bound (0.99^5 > 0.025) but a lower one: 100 ms > 50 ms decides
    code, out = _check(str(path), "--slo", "ttft.p99<=50ms")
    assert code == 1 and out.startswith("FAIL ttft.p99")
    code, out = _check(str(path), "--slo", "ttft.p99<=500ms")
    # l = 4: P(B <= 3) = 0.001 <= 0.025 < P(B <= 4) = 1 - 0.99^5 = 0.049; X_(4) = 103 ms.
    # Every sample is below 500 ms: n' = 368 gives the upper bound (0.99^368 <= 0.025).
    assert code == 1 and out.startswith(
        "INCONCLUSIVE ttft.p99: observed 104 ms meets 500 ms, but 5 requests cannot bound a "
        "p99 from above at 95% (that needs at least 368 requests"
    )
