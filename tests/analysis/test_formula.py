"""The decomposition check T ≈ TTFT + (N − 1)·ITL, hand-computed (times in ms).

```
a  arrival 0  first 10  ticks 20 30 (one token each)  complete 30   N = 3
b  arrival 0  first 10  tick 20 carrying 3 tokens      complete 20   N = 4
```
Per request: a: 30 − 10 − 2·10 = 0;  b: its own mean gap is 10, 20 − 10 − 3·10 = −20.
Fleet ITL = Σ decode / Σ (N − 1) = (20 + 10) / (2 + 3) = 6 ms:
a: 30 − 10 − 2·6 = +8;  b: 20 − 10 − 3·6 = −8.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.analysis.formula import FormulaReport, formula_by_group
from servetrace.analysis.groups import CODE, Groups
from servetrace.analysis.memory import analyze_events
from tests.conftest import MS, events, make_request


@pytest.fixture(scope="module")
def requests() -> pl.DataFrame:
    trace = events(
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30),
        make_request("b", admission=0, first=10, ticks=[20], tokens=[1, 3], complete=20),
        make_request("gone", admission=0, first=10, ticks=[50], cancel=60),  # not checked
    )
    return analyze_events(trace).per_request


def check_formula(
    requests: pl.DataFrame, abs_tol_ns: int = 1_000_000, rel_tol: float = 0.01
) -> FormulaReport:
    """The check of a whole trace: the formula of its one group."""
    whole = Groups.whole(requests)
    (report,) = formula_by_group(whole.coded(requests), whole, abs_tol_ns, rel_tol)
    return report


def test_per_request_residuals(requests: pl.DataFrame) -> None:
    residual = dict(zip(requests["request_id"], requests["formula_residual_ns"], strict=True))
    assert residual["a"] == 0 and residual["b"] == -20 * MS
    report = check_formula(requests)
    pr = report.per_request
    assert (pr.checked, pr.within_tolerance, pr.share_within) == (2, 1, 0.5)
    assert pr.residual_ns["min"] == -20 * MS and pr.residual_ns["mean"] == -10 * MS
    worst = pr.worst[0]
    assert (worst["request_id"], worst["residual_ns"], worst["cause"]) == (
        "b",
        -20 * MS,
        "multi-token chunks",
    )
    assert (worst["output_tokens"], worst["ticks"], worst["response_ns"]) == (4, 2, 20 * MS)


def test_fleet_itl_and_errors(requests: pl.DataFrame) -> None:
    report = check_formula(requests)
    assert report.fleet_itl_ns == pytest.approx(6 * MS)
    fleet = report.fleet
    assert (fleet.checked, fleet.within_tolerance) == (2, 0)  # |±8| > max(1 ms, 1 %)
    assert fleet.residual_ns["max"] == pytest.approx(8 * MS)
    assert fleet.residual_ns["min"] == pytest.approx(-8 * MS)
    assert report.notes == ()


def test_tolerance_edge_is_inclusive(requests: pl.DataFrame) -> None:
    at_edge = check_formula(requests, abs_tol_ns=8 * MS, rel_tol=0.0)
    assert at_edge.fleet.within_tolerance == 2  # |8 ms| ≤ 8 ms
    below = check_formula(requests, abs_tol_ns=8 * MS - 1, rel_tol=0.0)
    assert below.fleet.within_tolerance == 0
    assert below.per_request.within_tolerance == 1  # a's zero residual
    # relative: b misses by 8 of its 20 ms response (40 %), a by 8 of 30 (26.7 %)
    assert check_formula(requests, abs_tol_ns=0, rel_tol=0.4).fleet.within_tolerance == 2
    assert check_formula(requests, abs_tol_ns=0, rel_tol=0.39).fleet.within_tolerance == 1
    # the larger of the two tolerances applies: abs 1 ns, rel 40 %
    assert check_formula(requests, abs_tol_ns=1, rel_tol=0.4).fleet.within_tolerance == 2
    assert check_formula(requests, abs_tol_ns=8 * MS, rel_tol=0.01).fleet.within_tolerance == 2


def test_no_fleet_itl_without_multi_token_requests() -> None:
    trace = events(make_request("one", admission=0, first=10, complete=12))
    report = check_formula(analyze_events(trace).per_request)
    assert report.fleet_itl_ns is None and report.fleet.checked == 0
    assert report.notes == ("no completed request has 2 or more output tokens: no fleet ITL",)
    # one token: nothing to predict after the first, the residual is response − ttft = 0
    assert (report.per_request.checked, report.per_request.within_tolerance) == (1, 1)


def test_requests_without_tick_times_are_counted_apart() -> None:
    """A single tick carrying 5 tokens has no gap: no per-request mean ITL to check."""
    trace = events(
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30),
        make_request("bundle", admission=0, first=10, tokens=[5], complete=10),
    )
    report = check_formula(analyze_events(trace).per_request)
    assert report.per_request.checked == 1
    assert report.notes[-1].startswith("1 completed requests have no per-tick times")
    # the fleet check still covers both: ITL (20 + 0) / (2 + 4) = 3.33 ms
    assert report.fleet.checked == 2
    assert report.fleet_itl_ns == pytest.approx(20 * MS / 6)


def test_likely_causes() -> None:
    trace = events(
        # gaps 1 ms ×10 then 480 ms: mean 44.5, max 480 > 10 × mean
        make_request("stall", admission=0, first=10, ticks=[*range(11, 21), 500], complete=500),
        make_request(
            "preempted", admission=[0, 30], preempt=[20], first=10, ticks=[40, 41], complete=41
        ),
        make_request("steady", admission=0, first=10, ticks=[20, 30], complete=30),
    )
    report = check_formula(analyze_events(trace).per_request)
    causes = {w["request_id"]: w["cause"] for w in report.fleet.worst}
    assert causes == {"stall": "stall", "preempted": "preempted", "steady": ""}


def test_request_level_import_has_no_tick_times() -> None:
    """A request-level trace (ticks_available false): decode 40 ms over N − 1 = 4 tokens.
    Fleet ITL (20 + 40) / (2 + 4) = 10 ms predicts both exactly; no per-request check."""
    trace = events(
        make_request("level", admission=0, first=10, complete=50, output_tokens=5),
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30),
    ).with_columns((pl.col("request_id") == "a").alias("ticks_available"))
    report = check_formula(analyze_events(trace).per_request)
    assert report.fleet_itl_ns == pytest.approx(10 * MS)
    assert (report.per_request.checked, report.fleet.checked) == (1, 2)
    assert report.fleet.within_tolerance == 2
    causes = {w["request_id"]: w["cause"] for w in report.fleet.worst}
    assert causes == {"a": "", "level": "no tick times"}


def test_worst_lists_the_five_largest_misses_largest_first() -> None:
    """Seven one-chunk-of-k-tokens requests: residual −(k − 1)·10 ms grows with k."""
    trace = events(
        *[
            make_request(f"k{k}", admission=0, first=10, ticks=[20], tokens=[1, k], complete=20)
            for k in range(1, 8)
        ]
    )
    worst = check_formula(analyze_events(trace).per_request).per_request.worst
    assert [w["request_id"] for w in worst] == ["k7", "k6", "k5", "k4", "k3"]
    assert [w["residual_ns"] for w in worst] == [-k * 10 * MS + 10 * MS for k in (7, 6, 5, 4, 3)]


def test_no_tick_times_needs_two_tokens_to_miss() -> None:
    """A one-token answer has no gap and nothing to miss ("" cause); a two-token
    request-level answer has no tick times."""
    trace = events(
        make_request("one", admission=0, first=10, complete=10),
        make_request("two", admission=0, first=10, complete=40, output_tokens=2),
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30),
    ).with_columns((pl.col("request_id") != "two").alias("ticks_available"))
    report = check_formula(analyze_events(trace).per_request)
    causes = {w["request_id"]: w["cause"] for w in report.fleet.worst}
    assert causes == {"one": "", "two": "no tick times", "a": ""}


def test_a_stall_is_a_gap_of_more_than_ten_mean_gaps() -> None:
    """19 gaps of 1 ms and one of 19 ms: mean 1.9, max exactly 10 × mean: not a stall."""
    ticks = [*range(11, 30), 48]
    edge = make_request("edge", admission=0, first=10, ticks=ticks, complete=48)
    report = check_formula(analyze_events(events(edge)).per_request)
    assert report.fleet.worst[0]["cause"] == ""


def test_nothing_completed_checks_nothing() -> None:
    trace = events(make_request("gone", admission=0, first=10, ticks=[20], cancel=30))
    report = check_formula(analyze_events(trace).per_request)
    for check in (report.per_request, report.fleet):
        assert (check.checked, check.within_tolerance, check.share_within) == (0, 0, None)
        assert check.residual_ns["count"] == 0 and check.worst == ()
    assert report.fleet_itl_ns is None


def test_relative_tolerance_applies_per_request_too(requests: pl.DataFrame) -> None:
    """b misses by 20 ms of a 20 ms response: within at 100 %, not at 99 %."""
    assert check_formula(requests, abs_tol_ns=0, rel_tol=1.0).per_request.within_tolerance == 2
    assert check_formula(requests, abs_tol_ns=0, rel_tol=0.99).per_request.within_tolerance == 1


def test_two_tokens_are_enough_for_a_fleet_itl() -> None:
    trace = events(make_request("two", admission=0, first=10, ticks=[20], complete=20))
    report = check_formula(analyze_events(trace).per_request)
    assert report.fleet_itl_ns == 10 * MS  # decode 10 ms over N − 1 = 1
    assert report.fleet.checked == 1 and report.notes == ()


def _worst_by_full_sort(checked: pl.DataFrame, residual: str) -> list[object]:
    """The reference: every row sorted by |residual| (largest first), arrival, id."""
    from servetrace.analysis.formula import WORST_SHOWN

    ranked = checked.with_columns(pl.col(residual).abs().alias("_abs")).sort(
        "_abs", "arrival_ns", "request_id", descending=[True, False, False], nulls_last=True
    )
    return ranked.head(WORST_SHOWN)["request_id"].to_list()


@pytest.mark.parametrize("seed", range(6))
def test_worst_picks_what_a_full_sort_puts_first(seed: int) -> None:
    """Ties on |residual| (both signs) and on arrival, null arrivals and residuals: the
    arg-sort of the keys gives the head of the sorted frame."""
    from servetrace.analysis.formula import worst

    rng = np.random.default_rng(seed)
    n = 60
    residual = rng.integers(-4, 5, n).astype(np.float64)
    arrival = rng.integers(0, 3, n)
    frame = pl.DataFrame(
        {
            "request_id": [f"r{i:02d}" for i in rng.permutation(n)],
            "arrival_ns": pl.Series(arrival).cast(pl.Int64),
            "formula_residual_ns": residual,
            "response_ns": rng.integers(1, 10**6, n),
            "output_tokens": rng.integers(1, 9, n),
            "ticks": rng.integers(1, 9, n),
            "preemptions": rng.integers(0, 2, n),
            "itl_mean_ns": rng.random(n),
            "itl_max_ns": rng.integers(1, 10, n),
        }
    ).with_columns(
        pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise(pl.col("arrival_ns"))
    )
    frame = frame.with_columns(pl.lit(0, pl.Int64).alias(CODE))

    def ids(part: pl.DataFrame) -> list[object]:
        (found,) = worst(part, "formula_residual_ns", 1)
        return [row["request_id"] for row in found]

    assert ids(frame) == _worst_by_full_sort(frame, "formula_residual_ns")
    assert ids(frame.head(3)) == _worst_by_full_sort(frame.head(3), "formula_residual_ns")
    # in groups: each group's head is the full sort of its own rows
    two = frame.with_columns((pl.int_range(pl.len()) % 2).alias(CODE))
    for code, found in enumerate(worst(two, "formula_residual_ns", 2)):
        alone = two.filter(pl.col(CODE) == code)
        assert [r["request_id"] for r in found] == _worst_by_full_sort(alone, "formula_residual_ns")


def test_a_reported_zero_output_count_with_ticks_predicts_no_decode_steps() -> None:
    # N = 0 while ticks came: the fleet formula predicts TTFT + max(N - 1, 0) · ITL, so
    # the residual is response - TTFT, never credited with a negative step.
    trace = events(
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30),
        make_request("zero", admission=0, first=10, ticks=[40], complete=40, output_tokens=0),
    )
    report = check_formula(analyze_events(trace).per_request)
    assert report.fleet_itl_ns == pytest.approx(10 * MS)  # from "a" alone
    residual = {w["request_id"]: w["residual_ns"] for w in report.fleet.worst}
    assert residual["zero"] == pytest.approx(30 * MS)
