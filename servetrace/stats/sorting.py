"""One sort of a large numeric column, at the cheapest engine's price.

NumPy's sort of 64-bit integers is a vectorised (SIMD) sort, several times faster than
Polars' sort of the same column on a 2-core machine (``benchmarks/HISTORY.md``). The
values are the same; only integers without nulls take this path (Polars places nulls
first and orders NaNs its own way; NumPy would not).
"""

from __future__ import annotations

import numpy as np
import polars as pl


def sorted_series(values: pl.Series) -> pl.Series:
    """``values`` in ascending order, flagged sorted (so Polars' quantiles are an index)."""
    if values.dtype.is_integer() and values.null_count() == 0 and values.len() > 0:
        ordered = np.sort(values.to_numpy())
        return pl.Series(values.name, ordered, dtype=values.dtype).set_sorted()
    return values.sort()
