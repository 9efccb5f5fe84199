"""describe per group is describe of the group alone, bit for bit, in any row order."""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.analysis.grouped_figures import G, describe_groups
from servetrace.stats.describe import describe


def _frame(seed: int = 1, n: int = 20_000) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame(
        {
            G: rng.integers(0, 7, n),
            "ns": rng.integers(0, 10**12, n),  # Int64 times: the exact integer path
            "mean_ns": rng.normal(5e6, 1e6, n),  # Float64 per-request means
            "whole": rng.integers(0, 100, n).astype(float),  # floats holding whole numbers
        }
    )
    return frame.with_columns(
        pl.when(pl.col("ns") % 13 == 0).then(None).otherwise(pl.col("mean_ns")).alias("mean_ns"),
        pl.when(pl.col("ns") % 17 == 0)
        .then(float("nan"))
        .otherwise(pl.col("whole"))
        .alias("whole"),
    )


def test_each_group_is_described_as_if_alone() -> None:
    frame = _frame()
    grouped = describe_groups(frame, ["ns", "mean_ns", "whole"])
    for column in ("ns", "mean_ns", "whole"):
        for group in range(7):
            alone = describe(frame.filter(pl.col(G) == group)[column])
            assert grouped[column][group] == alone, (column, group)


def test_row_order_does_not_change_a_bit() -> None:
    frame = _frame(seed=2)
    first = describe_groups(frame, ["ns", "mean_ns"])
    for seed in range(3):
        assert (
            describe_groups(frame.sample(fraction=1.0, shuffle=True, seed=seed), ["ns", "mean_ns"])
            == first
        )


def test_a_group_without_values_is_empty() -> None:
    frame = pl.DataFrame({G: [0, 0, 1], "ns": [5, 7, None]}, schema={G: pl.Int64, "ns": pl.Int64})
    out = describe_groups(frame, ["ns"])["ns"]
    assert out[0]["count"] == 2 and out[0]["mean"] == 6.0 and out[0]["std"] == 1.0
    assert out[1]["count"] == 0 and out[1]["mean"] is None and out[1]["p50"] is None
