"""servetrace.render.compare: every format, the JSON contract, collapsing, golden text."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from servetrace.comparison.attribution import Tradeoff, tradeoff
from servetrace.comparison.catalog import get_metric
from servetrace.comparison.compare import Comparison, compare
from servetrace.comparison.measure import Measured
from servetrace.comparison.workload import WorkloadMatch
from servetrace.render.compare import compare_dict, compare_text, render_compare
from servetrace.render.compare_markdown import compare_markdown
from servetrace.render.compare_words import (
    ROW_KEYS,
    change_words,
    comparison_notes,
    comparison_warnings,
    display_buckets,
    display_decomposition,
    display_rows,
    tradeoff_text,
)
from servetrace.render.format import display_unit, format_value, short_ms, signed, to_display
from servetrace.render.formats import CompareFormat
from servetrace.render.workload import workload_dict, workload_message
from servetrace.stats.ratio import RatioCI
from servetrace.stats.verdicts import assess_change
from tests.factories import MS, constant_trace, synthetic

CONTRACT_KEYS = {
    "candidate",
    "metric",
    "stat",
    "unit",
    "baseline",
    "candidate_value",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "significant",
    "better",
    "verdict",
}


def golden_comparison() -> Comparison:
    base = constant_trace(60)
    cand = constant_trace(80)
    return compare(
        base,
        cand,
        metrics=["queue_wait", "ttft"],
        stats=["mean", "p50"],
        resamples=200,
        baseline_label="base.parquet",
        candidate_label="new.parquet",
    )


@pytest.mark.parametrize("fmt", list(CompareFormat))
def test_every_compare_format_renders(fmt: CompareFormat) -> None:
    text = render_compare([golden_comparison()], fmt)
    assert text.endswith("\n") and "new.parquet" in text
    assert render_compare([golden_comparison()], fmt.value) == text


def test_json_rows_follow_the_contract() -> None:
    a = synthetic(60)
    first = compare(a, synthetic(60, queue_scale=1.5), resamples=200, candidate_label="b.pq")
    second = compare(
        a, synthetic(40, workload_seed=4, id_prefix="x"), resamples=200, candidate_label="c.pq"
    )
    text = render_compare([first, second], CompareFormat.json)
    document = json.loads(text)  # valid JSON: no NaN or Infinity
    assert document["baseline"] == "baseline" and document["candidates"] == ["b.pq", "c.pq"]
    assert document["method"]["seed"] == 0 and document["method"]["resamples"] == 200
    for row in document["rows"]:
        assert set(row) >= CONTRACT_KEYS
        assert row["better"] in ("lower", "higher")
        assert row["verdict"] in ("slower", "faster", "no significant change")
        assert isinstance(row["significant"], bool)
    assert {r["candidate"] for r in document["rows"]} == {"b.pq", "c.pq"}
    workload = document["workload"]
    assert workload["b.pq"]["verdict"] == "identical" and workload["b.pq"]["paired"] is True
    assert workload["c.pq"]["verdict"] == "different" and workload["c.pq"]["shared_requests"] == 0
    assert document["buckets"]["c.pq"] is None
    assert json.loads(render_compare([first, second], "json")) == document  # stable


def test_infinite_ratio_is_null_in_json() -> None:
    base = constant_trace(100, queue_ms=0)  # the same TTFT, none of it queued
    cand = constant_trace(60)
    comparison = compare(base, cand, metrics=["queue_wait"], stats=["p50"], resamples=200)
    assert math.isinf(comparison.rows["ratio"][0])
    row = compare_dict([comparison])["rows"][0]
    assert row["ratio"] is None and row["baseline"] == 0.0 and row["candidate_value"] == 40.0


def test_non_significant_rows_collapse_unless_verbose() -> None:
    comparison = golden_comparison()
    short = compare_text([comparison])
    assert "No significant change (2): queue_wait.mean, queue_wait.p50" in short
    assert "queue_wait  mean" not in short
    verbose = compare_text([comparison], verbose=True)
    assert "No significant change (" not in verbose
    assert "no significant change" in verbose
    assert "Distribution tests" in verbose


def test_nothing_significant_is_one_line() -> None:
    a = constant_trace(60)
    text = compare_text([compare(a, a, metrics=["ttft"], stats=["mean"], resamples=200)])
    assert "No significant change in any of the 1 statistics compared." in text


def test_table_golden() -> None:
    assert compare_text([golden_comparison()], width=100) == GOLDEN_TABLE


def test_markdown_golden() -> None:
    assert compare_markdown([golden_comparison()]) == GOLDEN_MARKDOWN


GOLDEN_TABLE = """\
baseline: base.parquet   candidate: new.parquet
workload: identical workload: 20 requests with the same arrival offsets (within 10 ms) and lengths;
paired by request_id

metric  stat  baseline  candidate  change        95% CI           p
ttft    mean    100 ms     120 ms  1.20x slower  1.200-1.200  0.010
ttft    p50     100 ms     120 ms  1.20x slower  1.200-1.200  0.010
No significant change (2): queue_wait.mean, queue_wait.p50

Where the e2e difference comes from (paired requests; mean deltas add up, p50 deltas do not):
component      baseline mean  candidate mean  delta mean  delta p50
queue_wait             40 ms           40 ms        0 ms       0 ms
prefill                60 ms           80 ms      +20 ms     +20 ms
decode                 90 ms           90 ms        0 ms       0 ms
delivery_tail           0 ms            0 ms        0 ms       0 ms
e2e                   190 ms          210 ms      +20 ms     +20 ms

Who gained or lost (mean per-request delta, candidate - baseline, by baseline length quartile):
length bucket   requests   Δttft  Δitl    Δe2e  e2e faster
prompt 100-140         5  +20 ms  0 ms  +20 ms          0%
prompt 150-190         5  +20 ms  0 ms  +20 ms          0%
prompt 200-240         5  +20 ms  0 ms  +20 ms          0%
prompt 250-290         5  +20 ms  0 ms  +20 ms          0%
output 10             20  +20 ms  0 ms  +20 ms          0%

method: paired bootstrap (ITL: independent, at its effective sample size), 200 resamples, seed 0,
95% CI of the ratio candidate/baseline; significant when the CI excludes 1 and the change exceeds
5%; percentiles: linear interpolation; rates: compound-Poisson interval
"""

GOLDEN_MARKDOWN = """\
### servetrace compare: `new.parquet` vs `base.parquet`

**Workload:** identical workload: 20 requests with the same arrival offsets (within 10 ms) and \
lengths; paired by request_id

| metric | baseline | candidate | change | 95% CI | p |
|---|---:|---:|---|---|---:|
| `ttft.mean` | 100 ms | 120 ms | **1.20x slower** | 1.200-1.200 | 0.010 |
| `ttft.p50` | 100 ms | 120 ms | **1.20x slower** | 1.200-1.200 | 0.010 |

No significant change (2): `queue_wait.mean`, `queue_wait.p50`

<details><summary>Where the e2e difference comes from</summary>

| component | baseline mean | candidate mean | Δ mean | Δ p50 |
|---|---:|---:|---:|---:|
| queue_wait | 40 ms | 40 ms | 0 ms | 0 ms |
| prefill | 60 ms | 80 ms | +20 ms | +20 ms |
| decode | 90 ms | 90 ms | 0 ms | 0 ms |
| delivery_tail | 0 ms | 0 ms | 0 ms | 0 ms |
| residual | 0 ms | 0 ms | 0 ms | 0 ms |
| e2e | 190 ms | 210 ms | +20 ms | +20 ms |

</details>

<sub>paired bootstrap (ITL: independent, at its effective sample size), 200 resamples, seed 0, \
95% CI of the ratio candidate/baseline; significant when the CI excludes 1 and the change exceeds \
5%; percentiles: linear interpolation; rates: compound-Poisson interval</sub>
"""


# --------------------------------------------------------------------------- by hand
def test_change_words_by_hand() -> None:
    assert change_words(1.14, "slower") == "1.14x slower"
    assert change_words(1 / 1.08, "faster") == "1.08x faster"  # max(r, 1/r) = 1.08
    assert change_words(1.5, "slower", speed=False) == "1.50x worse"
    assert change_words(0.5, "faster", speed=False) == "2.00x better"
    assert change_words(math.inf, "slower") == "slower (from or to zero)"
    assert change_words(1.3, "no significant change") == "no significant change"


def test_rows_leave_ns_for_ms_only_in_the_renderer() -> None:
    comparison = golden_comparison()
    # inside: ttft mean of the baseline is 40 ms queue + 60 ms prefill = 100_000_000 ns
    core = comparison.rows.filter(metric="ttft", stat="mean").row(0, named=True)
    assert (core["unit"], core["baseline"], core["candidate_value"]) == ("ns", 1e8, 1.2e8)
    assert "words" not in comparison.rows.columns
    # reported: 100 ms and 120 ms, ratio 120/100 = 1.2 worded as pyperf does
    (shown,) = [r for r in display_rows(comparison) if (r["metric"], r["stat"]) == ("ttft", "mean")]
    assert (shown["unit"], shown["baseline"], shown["candidate_value"]) == ("ms", 100.0, 120.0)
    assert shown["words"] == "1.20x slower" and list(shown) == list(ROW_KEYS)
    # the decomposition: prefill 60 → 80 ms is the whole +20 ms of e2e (share 1)
    parts = {r["component"]: r for r in display_decomposition(comparison)}
    assert parts["prefill"]["delta_mean_ms"] == 20.0 and parts["prefill"]["share"] == 1.0
    assert parts["e2e"]["baseline_mean_ms"] == 190.0  # 40 + 60 + 90 ms
    buckets = display_buckets(comparison)
    assert buckets is not None and buckets[0]["delta_ttft_ms"] == 20.0


def test_workload_words_by_hand() -> None:
    match = WorkloadMatch(
        verdict="same_requests",
        shared_requests=2,
        paired=True,
        paired_by="request_id",
        baseline_requests=2,
        candidate_requests=2,
        arrival_mismatches=1,
        max_arrival_offset_diff_ns=50 * MS,
        prompt_length_mismatches=0,
        output_length_mismatches=1,
        arrival_tolerance_ns=10 * MS,
        pairs=pl.DataFrame({"base_row": [0, 1], "cand_row": [0, 1]}),
    )
    assert workload_message(match) == (
        "same 2 requests, but 1 arrival offsets differ by more than 10 ms (at most 50 ms); "
        "1 output lengths differ; paired by request_id"
    )
    block = workload_dict(match)
    assert block["arrival_tolerance_ms"] == 10.0 and block["max_arrival_offset_diff_ms"] == 50.0
    assert block["message"] == workload_message(match)


def test_tradeoff_line_by_hand() -> None:
    def measured(metric: str, stat: str, base_ns: float, cand_ns: float) -> Measured:
        ratio = cand_ns / base_ns
        ci = RatioCI(
            stat, base_ns, cand_ns, ratio, ratio, ratio, 0.001, 0.95, "bootstrap", 2000, 0, 99, 99
        )
        return Measured(get_metric(metric), stat, ci, assess_change(ci, "lower"), True)

    # TTFT p50 92.1 → 119.4 ms (lost 27.3 ms), ITL p99 214 → 59 ms (gained 155 ms)
    lost = measured("ttft", "p50", 92.1 * MS, 119.4 * MS)
    gained = measured("itl", "p99", 214 * MS, 59 * MS)
    found = tradeoff([lost, gained])
    assert found == Tradeoff(lost, pytest.approx(27.3 * MS), gained, 155 * MS)
    assert tradeoff_text(found, "B") == "B trades 27.3 ms of TTFT p50 for 155 ms of ITL p99"
    assert tradeoff([lost]) is None and tradeoff_text(None, "B") is None


def test_caveats_are_worded_with_their_numbers() -> None:
    # 6 requests a side: fewer than MIN_SAMPLES = 10; a p50 needs 10 / (1 - 0.5) = 20
    # requests to have 10 above it, a p99 10 / 0.01 = 1000
    small = compare(
        constant_trace(60, n=6), constant_trace(80, n=6), stats=["p50", "p99"], resamples=200
    )
    assert comparison_warnings(small) == [
        "only 6 completed requests in baseline: too few to call any latency change "
        "significant (need 10)",
        "only 6 completed requests in candidate: too few to call any latency change "
        "significant (need 10)",
        "p50 rests on fewer than 10 requests above it (n=6); treat it as unreliable "
        "(it needs about 20 completed requests)",
        "p99 rests on fewer than 10 requests above it (n=6); treat it as unreliable "
        "(it needs about 1000 completed requests)",
    ]
    # goodput without targets is skipped statistic by statistic, and says why
    assert comparison_notes(small)[0] == (
        "goodput.requests_per_s skipped: goodput.requests_per_s needs per-request goodput targets"
    )


def test_values_are_formatted_by_hand() -> None:
    assert format_value(208.0, "ms") == "208 ms"
    assert format_value(2044.08, "ms") == "2044 ms"  # four digits and more: no decimals
    assert format_value(0.0123, "") == "0.0123"
    assert format_value(None, "ms") == "n/a" and format_value(math.inf, "") == "inf"
    assert short_ms(0.42) == "420 µs" and short_ms(27.31) == "27.3 ms"
    assert signed(-0.41, "ms") == "-0.41 ms" and signed(0.0, "ms") == "0 ms"
    ttft, throughput = get_metric("ttft"), get_metric("throughput")
    assert to_display(ttft, "p99", 208 * MS) == 208.0
    assert to_display(ttft, "count", 12.0) == 12.0  # a count is not a time
    assert display_unit(ttft, "p99") == "ms" and display_unit(ttft, "count") == ""
    assert display_unit(throughput, "output_tokens_per_s") == "tok/s"
