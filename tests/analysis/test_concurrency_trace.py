"""The whole trace's concurrency over flat arrays equals ``concurrency_by`` for one group."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servetrace.analysis.concurrency import concurrency, concurrency_by, no_concurrency

_ALL = "_all"  # the one group of a whole trace


def concurrency_grouped(
    transitions: pl.DataFrame, start: int | None, end: int | None, has_admissions: bool
) -> dict[str, float | int | None]:
    """The whole trace as one group of ``concurrency_by``: the reference ``concurrency``
    must equal."""
    if start is None or end is None:
        return no_concurrency()
    one = transitions.with_columns(pl.lit(0, pl.Int8).alias(_ALL))
    spans = {0: {"start": start, "end": end}}
    return concurrency_by(one, _ALL, spans, {0: has_admissions}).get(0, no_concurrency())


def _transitions(
    ts: list[int], deltas: list[tuple[int, int, int]], dtype: pl.DataType
) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "ts": pl.Series(ts, dtype=pl.Int64),
            "d_queued": pl.Series([d[0] for d in deltas], dtype=dtype),
            "d_running": pl.Series([d[1] for d in deltas], dtype=dtype),
            "d_in_system": pl.Series([d[2] for d in deltas], dtype=dtype),
            "_key": pl.Series(range(len(ts)), dtype=pl.Int64),
        }
    )


step = st.sampled_from([(1, 0, 1), (-1, 1, 0), (0, -1, -1), (-1, 0, -1), (0, 0, 0)])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(-50, 1_000), step), max_size=60),
    start=st.integers(-20, 600),
    length=st.integers(-5, 700),
    admissions=st.booleans(),
    narrow=st.booleans(),
)
def test_flat_arrays_equal_the_grouped_definition(
    rows: list, start: int, length: int, admissions: bool, narrow: bool
) -> None:
    frame = _transitions(
        [r[0] for r in rows], [r[1] for r in rows], pl.Int8 if narrow else pl.Int64
    )
    end = start + length
    assert concurrency(frame, start, end, admissions) == concurrency_grouped(
        frame, start, end, admissions
    )


def test_bit_identical_on_sums_beyond_float_precision() -> None:
    # 200 k transitions over 2e14 ns: Σ level · held passes 2^53, so the order of the
    # float additions shows in the last bits; both must add in time order.
    rng = np.random.default_rng(7)
    n = 200_000
    ts = np.sort(rng.integers(0, 2 * 10**14, n))
    up = rng.random(n) < 0.55
    deltas = np.where(up, 1, -1)
    frame = pl.DataFrame(
        {
            "ts": ts,
            "d_queued": deltas,
            "d_running": -deltas,
            "d_in_system": deltas,
        }
    ).sample(fraction=1.0, shuffle=True, seed=1)
    got = concurrency(frame, 10**9, 2 * 10**14 - 5, True)
    assert got == concurrency_grouped(frame, 10**9, 2 * 10**14 - 5, True)
    assert got["in_system_mean"] is not None and got["in_system_mean"] > 2**53 / 2e14


def test_hand_computed_levels() -> None:
    # in system: +1 at 0, +1 at 10, -1 at 20, -1 at 40; window [5, 30]
    frame = _transitions([0, 10, 20, 40], [(0, 0, 1), (0, 0, 1), (0, 0, -1), (0, 0, -1)], pl.Int64)
    got = concurrency(frame, 5, 30, False)
    # level 1 on [5,10), 2 on [10,20), 1 on [20,30]: (5 + 20 + 10) / 25
    assert got["in_system_mean"] == pytest.approx(35 / 25)
    assert got["in_system_peak"] == 2
    assert got["queued_mean"] is None and got["running_peak"] is None
    assert concurrency(frame, 50, 50, True) == no_concurrency()
    assert concurrency(frame.head(0), 0, 10, True) == no_concurrency()
