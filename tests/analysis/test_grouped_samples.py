"""The bulk builders of ``--by`` samples equal their one-query-per-column references:
``samples_of`` (one select), ``gap_sample`` (keys looked up in NumPy, not joined) and
``float_moments_of`` (moments from the already sorted sample)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.analysis.grouped_gaps import CODE, gap_sample, samples_of
from servetrace.analysis.lifecycle import KEY
from servetrace.stats.grouped_moments import float_moments_by, float_moments_of
from servetrace.stats.grouped_order import GroupedSample, sort_by_group


def _reference(frame: pl.DataFrame, column: str, groups: int) -> GroupedSample:
    """One filter query per column, as ``sample_of`` was."""
    value = pl.col(column)
    keep = value.is_not_null()
    if frame.schema[column].is_float():
        keep = keep & ~value.is_nan()
    part = frame.select(CODE, column).filter(keep)
    return sort_by_group(part[CODE].to_numpy(), part[column].to_numpy(), groups)


def _same(a: GroupedSample, b: GroupedSample) -> None:
    assert a.sizes.tolist() == b.sizes.tolist()
    assert a.offsets.tolist() == b.offsets.tolist()
    assert a.ordered.dtype == b.ordered.dtype
    assert a.ordered.tolist() == b.ordered.tolist()


def test_samples_of_hand_computed() -> None:
    frame = pl.DataFrame(
        {
            CODE: [1, 0, 1, 0, 2],
            "n": [5, None, 3, 7, 1],
            "f": [0.5, 2.5, float("nan"), None, 1.5],
        }
    )
    got = samples_of(frame, ["n", "f"], 4)
    assert got["n"].ordered.tolist() == [7, 3, 5, 1] and got["n"].sizes.tolist() == [1, 2, 1, 0]
    assert got["f"].ordered.tolist() == [2.5, 0.5, 1.5] and got["f"].sizes.tolist() == [1, 1, 1, 0]


def test_samples_of_equal_a_query_per_column() -> None:
    rng = np.random.default_rng(4)
    n = 5000
    ints = rng.integers(0, 10**9, n)
    floats = rng.lognormal(10, 1, n)
    frame = pl.DataFrame({CODE: rng.integers(0, 37, n), "i": ints, "f": floats}).with_columns(
        pl.when(pl.col("i") % 7 == 0).then(None).otherwise(pl.col("i")).alias("i"),
        pl.when(pl.col("i") % 5 == 0).then(float("nan")).otherwise(pl.col("f")).alias("f"),
        pl.col("i").alias("full"),
    )
    frame = frame.with_columns(
        pl.col("full").fill_null(3),
        # beyond 2^53 with nulls: must stay int64 (a float detour would round them)
        (pl.col("i") + 2**60).alias("huge"),
    )
    got = samples_of(frame, ["i", "f", "full", "huge"], 40)
    for column in ("i", "f", "full", "huge"):
        _same(got[column], _reference(frame, column, 40))


@pytest.mark.parametrize("widest", [10**8, 2**61], ids=["packed key", "too wide to pack"])
@pytest.mark.parametrize("spread", [1, 10**12], ids=["dense keys", "sparse keys"])
def test_gap_sample_equals_the_join(spread: int, widest: int) -> None:
    """Each gap's group from its request, as the inner join gives it: with the codes
    looked up pre-shifted into the packed sort key, and (gaps too wide for 9 codes beside
    them) by the two stable sorts."""
    rng = np.random.default_rng(spread % 97)
    keys = np.arange(400, dtype=np.int64) * spread + 11
    requests = pl.DataFrame({KEY: keys[50:], CODE: rng.integers(0, 9, keys.size - 50)})
    gap_keys = np.sort(rng.choice(np.concatenate([keys, [-5, 10**15]]), 20_000))
    itl = rng.integers(1, widest, gap_keys.size)
    gaps = pl.DataFrame({KEY: gap_keys, "itl_ns": itl}).with_columns(
        pl.when(pl.int_range(pl.len()) % 101 == 0).then(None).otherwise("itl_ns").alias("itl_ns")
    )  # keys 0..49 and two strangers belong to no request: left out, as by the inner join
    joined = gaps.join(requests, on=KEY, how="inner")
    _same(gap_sample(gaps, requests, 9), _reference(joined, "itl_ns", 9))
    strangers = gaps.drop_nulls()  # none null, some of no request
    _same(gap_sample(strangers, requests, 9), _reference(joined.drop_nulls(), "itl_ns", 9))
    kept = joined.drop(CODE).drop_nulls()  # every gap of a known request, none null
    _same(gap_sample(kept, requests, 9), _reference(joined.drop_nulls(), "itl_ns", 9))


def test_gap_sample_of_no_gaps() -> None:
    requests = pl.DataFrame({KEY: [1, 2], CODE: [0, 1]})
    gaps = pl.DataFrame({KEY: [], "itl_ns": []}, schema={KEY: pl.Int64, "itl_ns": pl.Int64})
    got = gap_sample(gaps, requests, 2)
    assert got.sizes.tolist() == [0, 0] and got.ordered.size == 0


def test_float_moments_of_the_sorted_sample_equal_float_moments_by() -> None:
    rng = np.random.default_rng(8)
    sizes = [1, 2, 9, 9, 9, 130, 1, 2000, 0, 3]
    codes = np.repeat(np.arange(len(sizes)), sizes)
    values = rng.lognormal(3, 1.5, codes.size)
    values[codes == 2] = np.round(values[codes == 2])  # whole numbers: the exact path
    values[codes == 9] = [2.0**54, 2.0**54 + 2, 3.0]  # whole, beyond 2^53: floats (not exact)
    frame = pl.DataFrame({"g": codes, "v": values})
    want = float_moments_by(frame, "g", "v")
    got = float_moments_of(sort_by_group(codes, values, len(sizes)))
    assert got[8] is None  # an empty group
    assert {g: m for g, m in enumerate(got) if m is not None} == want
    assert got[2] == (float(np.mean(values[codes == 2])), pytest.approx(np.std(values[codes == 2])))
