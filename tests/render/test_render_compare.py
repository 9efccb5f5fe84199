"""servetrace.render.compare: every format, the JSON contract, collapsing, golden text."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from servetrace.compare.measure import Comparison, compare
from servetrace.render.compare import (
    CompareFormat,
    compare_dict,
    compare_markdown,
    compare_text,
    render_compare,
)
from tests.analysis_stub import MS, from_frames, synthetic

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


def constant_trace(prefill_ms: float, n: int = 20) -> pl.DataFrame:
    """n requests with the same latencies: every bootstrap interval collapses."""
    queue, prefill, decode = 40 * MS, round(prefill_ms * MS), 90 * MS
    return pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(n)],
            "outcome": ["completed"] * n,
            "arrival_ns": [i * 100 * MS for i in range(n)],
            "queue_wait_ns": [queue] * n,
            "prefill_ns": [prefill] * n,
            "ttft_ns": [queue + prefill] * n,
            "decode_ns": [decode] * n,
            "response_ns": [queue + prefill + decode] * n,
            "e2e_ns": [queue + prefill + decode] * n,
            "delivery_tail_ns": [0] * n,
            "itl_mean_ns": [10.0 * MS] * n,
            "tpot_ns": [10.0 * MS] * n,
            "output_tokens": [10] * n,
            "preemptions": [0] * n,
            "prompt_tokens": [100 + 10 * i for i in range(n)],
        }
    )


def golden_comparison() -> Comparison:
    base = from_frames(constant_trace(60))
    cand = from_frames(constant_trace(80))
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
    base = from_frames(constant_trace(60).with_columns(queue_wait_ns=pl.lit(0, pl.Int64)))
    cand = from_frames(constant_trace(60))
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
    a = from_frames(constant_trace(60))
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
