"""``sorted_series``: the same order as Polars' sort, and flagged sorted."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.stats.sorting import sorted_series


@pytest.mark.parametrize(
    "values",
    [
        pl.Series("itl_ns", [5, -3, 5, 0, 2**62, -(2**62)], dtype=pl.Int64),  # NumPy's path
        # 32-bit offsets from the minimum: a span of 2^32 - 1 fits, 2^32 does not
        pl.Series("itl_ns", [7 - 2**40, -(2**40), 2**32 - 1 - 2**40, 3 - 2**40], dtype=pl.Int64),
        pl.Series("itl_ns", [2**32, 5, 0, 9], dtype=pl.Int64),
        # offsets near 2^62: widened and shifted back in int64 (a double would round them)
        pl.Series("itl_ns", [2**62 + 7, 2**62 + 2**32 - 1, 2**62 + 1, 2**62], dtype=pl.Int64),
        # unsigned above Int64's maximum, a span of 8: NumPy's path (no int64 offsets)
        pl.Series("n", [2**64 - 1, 2**64 - 9, 2**64 - 4], dtype=pl.UInt64),
        pl.Series("n", [3, 1, 2], dtype=pl.UInt32),
        pl.Series("itl_ns", [5, None, 1], dtype=pl.Int64),  # nulls: Polars' (nulls first)
        pl.Series("x", [2.5, float("nan"), -1.0]),  # floats: Polars' NaN order
        pl.Series("itl_ns", [], dtype=pl.Int64),
    ],
)
def test_the_order_of_polars_sort_with_its_dtype_and_name(values: pl.Series) -> None:
    got = sorted_series(values)
    assert got.to_list() == values.sort().to_list() or got.equals(values.sort())
    assert got.dtype == values.dtype and got.name == values.name


def test_integers_come_back_flagged_sorted() -> None:
    got = sorted_series(pl.Series("itl_ns", [9, 1, 4], dtype=pl.Int64))
    assert got.to_list() == [1, 4, 9]
    assert got.flags["SORTED_ASC"]
