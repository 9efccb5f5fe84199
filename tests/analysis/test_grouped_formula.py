"""The formula check of every group over flat arrays equals the Polars reference
(``grouped_figures.formula``), report for report, on real analyses and on edge rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import servetrace
from servetrace.analysis.grouped_figures import G, formula
from servetrace.analysis.grouped_formula import formula_of_groups
from servetrace.analysis.grouped_gaps import CODE, codes

VIDUR = Path(__file__).parent.parent / "data" / "vidur"


def _both(completed: pl.DataFrame, column: str, tolerance: tuple[int, float]) -> None:
    frame = completed.with_columns(pl.col(column).alias(G))
    values = frame[G].unique().sort(nulls_last=True).to_list()
    frame = codes(frame, G, values)
    got = formula_of_groups(frame, values, *tolerance)
    want = formula(frame, values, *tolerance)
    assert list(got) == list(want) == values
    for value in values:
        assert got[value] == want[value], value


@pytest.mark.parametrize("tolerance", [(1_000_000, 0.01), (0, 0.0), (10**9, 0.5)])
def test_a_real_trace_in_many_groups(tolerance: tuple[int, float]) -> None:
    requests = servetrace.analyze(
        VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet"
    ).requests
    completed = requests.filter(pl.col("outcome") == "completed").with_columns(
        (pl.col("request_id") % 37).alias("g"), (pl.col("request_id") % 3 == 0).alias("b")
    )
    _both(completed, "g", tolerance)
    _both(completed, "b", tolerance)


def test_edge_rows_equal_the_reference() -> None:
    """Unknown output counts, unknown TTFT and residuals, a NaN residual, string ids
    tied on |residual| and arrival, unknown arrivals, a group of one-token answers (no
    fleet ITL), a group with no response time, and a null group."""
    rng = np.random.default_rng(11)
    n = 400
    response = rng.integers(10**6, 10**9, n)
    ttft = response // rng.integers(2, 10, n)
    tokens = rng.integers(1, 300, n)
    residual = rng.normal(0, 3e6, n).round(-5)  # many ties on |residual|
    group = rng.choice(["a", "b", "c", "one-token", "no-response"], n).tolist()
    group[:7] = [None] * 7
    frame = pl.DataFrame(
        {
            "request_id": [f"r{i % 150:03d}" for i in range(n)],
            "outcome": ["completed"] * n,
            "arrival_ns": rng.integers(0, 50, n) * 10**6,
            "response_ns": response,
            "ttft_ns": ttft,
            "decode_ns": response - ttft,
            "output_tokens": tokens,
            "ticks": tokens - rng.integers(0, 2, n),
            "preemptions": rng.integers(0, 2, n),
            "itl_mean_ns": rng.normal(3e6, 1e6, n),
            "itl_max_ns": rng.integers(10**6, 10**8, n),
            "formula_residual_ns": residual,
            "g": group,
        }
    )
    is_ = pl.col("g")
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) % 9 == 0)
        .then(None)
        .otherwise("output_tokens")
        .alias("output_tokens"),
        pl.when(pl.int_range(pl.len()) % 11 == 0).then(None).otherwise("ttft_ns").alias("ttft_ns"),
        pl.when(pl.int_range(pl.len()) % 5 == 0)
        .then(None)
        .when(pl.int_range(pl.len()) == 12)
        .then(float("nan"))
        .otherwise("formula_residual_ns")
        .alias("formula_residual_ns"),
        pl.when(pl.int_range(pl.len()) % 13 == 0)
        .then(None)
        .otherwise("arrival_ns")
        .alias("arrival_ns"),
    ).with_columns(
        # one-token answers (with a decode time) in every group stay out of the fleet ITL
        pl.when((is_ == "one-token") | (pl.int_range(pl.len()) % 19 == 3))
        .then(1)
        .otherwise("output_tokens")
        .alias("output_tokens"),
        pl.when(is_ == "no-response").then(None).otherwise("response_ns").alias("response_ns"),
    )
    _both(frame, "g", (1_000_000, 0.01))
    ints = pl.col("formula_residual_ns").fill_nan(None).cast(pl.Int64)
    _both(frame.with_columns(ints), "g", (0, 0.001))


def test_hand_computed_group() -> None:
    """One group of two requests: fleet ITL = (90 + 40) / (10 − 1 + 5 − 1) = 10 ns;
    fleet errors 100 − 10 − 9·10 = 0 and 50 − 10 − 4·10 = 0, both within tolerance."""
    frame = pl.DataFrame(
        {
            "request_id": [1, 2],
            "outcome": ["completed"] * 2,
            "arrival_ns": [0, 5],
            "response_ns": [100, 50],
            "ttft_ns": [10, 10],
            "decode_ns": [90, 40],
            "output_tokens": [10, 5],
            "ticks": [10, 5],
            "preemptions": [0, 0],
            "itl_mean_ns": [10.0, 10.0],
            "itl_max_ns": [10, 10],
            "formula_residual_ns": [0.0, 3.0],
            G: ["x", "x"],
        }
    )
    frame = codes(frame, G, ["x"])
    report = formula_of_groups(frame, ["x"], 1, 0.0)["x"]
    assert report.fleet_itl_ns == 10.0
    assert report.fleet.checked == 2 and report.fleet.within_tolerance == 2
    assert report.per_request.checked == 2 and report.per_request.within_tolerance == 1
    assert [w["request_id"] for w in report.per_request.worst] == [2, 1]
    assert report.per_request.residual_ns["mean"] == 1.5
    assert CODE in frame.columns
