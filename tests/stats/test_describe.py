"""servetrace.stats.describe: statistics worked out by hand, and mean/std that depend on
the values only (not their order, container or dtype)."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from servetrace.stats.describe import describe, moments, statistic
from servetrace.stats.moments import integer_moments, integer_sums
from servetrace.stats.names import canonical_stat, is_statistic, percentile_of


def test_integer_moments_by_hand() -> None:
    # values 10, 11, 12, 13 around pivot 10: d = 0, 1, 2, 3, so Σd = 6 and Σd² = 14;
    # mean = (4·10 + 6) / 4 = 11.5; n²·var = 4·14 - 6² = 20, var = 20/16 = 1.25
    mean, std = integer_moments(4, 10, 6, 14)
    assert mean == 11.5
    assert std == math.sqrt(1.25)


def test_mean_and_std_of_one_two_four_are_correctly_rounded() -> None:
    # mean 7/3; var = ((1-7/3)² + (2-7/3)² + (4-7/3)²)/3 = (16/9 + 1/9 + 25/9)/3 = 14/9
    for values in ([1, 2, 4], pl.Series([4, 1, 2]), np.array([2.0, 4.0, 1.0])):
        d = describe(values)
        assert d["mean"] == 7 / 3
        assert d["std"] == math.sqrt(14 / 9)


def test_large_integers_are_summed_exactly() -> None:
    # 2^53, 2^53 + 2, 2^53 + 4: a float sum (3·2^53 + 6) is not representable, the
    # integer sum is. Mean 2^53 + 2 exactly; var = (4 + 0 + 4)/3 = 8/3.
    big = 2**53
    values = pl.Series([big, big + 2, big + 4], dtype=pl.Int64)
    d = describe(values)
    assert d["mean"] == float(big + 2)
    assert d["std"] == math.sqrt(8 / 3)
    assert statistic(values, "std") == math.sqrt(8 / 3)


def test_float_values_are_summed_in_sorted_order() -> None:
    # left to right, 0.3 + 0.2 + 0.1 = 0.6 but 0.1 + 0.2 + 0.3 = 0.6000000000000001: the
    # sum depends on the order. Sorted first, every order gives 0.6000000000000001 / 3.
    assert 0.3 + 0.2 + 0.1 != 0.1 + 0.2 + 0.3
    for order in ([0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [0.2, 0.3, 0.1]):
        assert describe(pl.Series(order))["mean"] == (0.1 + 0.2 + 0.3) / 3
        assert describe(np.array(order))["mean"] == (0.1 + 0.2 + 0.3) / 3


def test_integer_sums_split_and_wide_agree() -> None:
    # 3 = 0·2^21 + 3 and 2^21 + 5 = 1·2^21 + 5: Σd = 2^21 + 8, Σd² = 9 + (2^21 + 5)²
    values = np.array([3, 2**21 + 5, -7], dtype=np.int64)
    n, s1, s2 = integer_sums(values)
    assert (n, s1, s2) == (3, 2**21 + 1, 9 + (2**21 + 5) ** 2 + 49)
    # a range beyond 2^42 takes 128-bit sums, with the same meaning
    wide = np.array([0, 2**50, -(2**50)], dtype=np.int64)
    assert integer_sums(wide) == (3, 0, 2 * 2**100)
    # more than one block of 2^20 values
    many = np.full(3 * 2**20 + 1, 7, dtype=np.int64)
    assert integer_sums(many, pivot=2) == (many.size, 5 * many.size, 25 * many.size)


@settings(max_examples=40, deadline=None)
@given(
    values=hs.lists(hs.integers(-(10**12), 10**12), min_size=1, max_size=300),
    seed=hs.integers(0, 2**32 - 1),
)
def test_describe_is_the_same_in_any_order(values: list[int], seed: int) -> None:
    shuffled = list(np.random.default_rng(seed).permutation(values))
    first = json.dumps(describe(pl.Series(values, dtype=pl.Int64)))
    assert json.dumps(describe(pl.Series(shuffled, dtype=pl.Int64))) == first
    # an array or a list of the same whole numbers gives the same bits
    assert json.dumps(describe(np.array(shuffled, dtype=np.float64))) == first
    assert json.dumps(describe([float(v) for v in shuffled])) == first
    for name in ("p50", "p90", "p99_9", "mean", "std"):
        assert statistic(np.array(shuffled, dtype=np.float64), name) == json.loads(first)[name]


@settings(max_examples=40, deadline=None)
@given(
    values=hs.lists(
        hs.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False), min_size=1, max_size=300
    ),
    seed=hs.integers(0, 2**32 - 1),
)
def test_float_moments_are_the_same_in_any_order(values: list[float], seed: int) -> None:
    shuffled = list(np.random.default_rng(seed).permutation(values))
    assert moments(values) == moments(shuffled)
    reference = np.asarray(values)
    mean, std = moments(values) or (0.0, 0.0)
    assert mean == pytest.approx(reference.mean(), rel=1e-12, abs=1e-9)
    assert std == pytest.approx(reference.std(), rel=1e-9, abs=1e-6)


def test_pooled_gaps_are_described_identically_on_every_run() -> None:
    gaps = pl.Series(np.random.default_rng(7).integers(1, 10**9, 2_000_000))
    first = json.dumps(describe(gaps))
    for _ in range(3):
        assert json.dumps(describe(gaps.sample(fraction=1.0, shuffle=True, seed=3))) == first


def test_nulls_nans_and_empty() -> None:
    assert describe(pl.Series([None, 3, None], dtype=pl.Int64))["mean"] == 3.0
    assert describe(pl.Series([float("nan"), 1.0, 3.0]))["mean"] == 2.0
    empty = describe(pl.Series([], dtype=pl.Int64))
    assert empty["count"] == 0 and empty["mean"] is None and empty["p99"] is None
    assert moments([]) is None and statistic([], "mean") is None


def test_statistic_names() -> None:
    assert canonical_stat(" Median ") == "p50" and canonical_stat("p999") == "p99_9"
    assert percentile_of("p99_9") == 99.9 and percentile_of("min") == 0.0
    assert percentile_of("p101") is None and percentile_of("q50") is None
    assert is_statistic("p75") and is_statistic("std") and not is_statistic("fraction")
    # statistic() and describe() agree on every statistic they share
    values = pl.Series([5, 1, 9, 3, 7], dtype=pl.Int64)
    d = describe(values)
    for name in ("mean", "std", "min", "p50", "p90", "p99", "max"):
        assert statistic(values, name) == d[name], name


def test_streamed_and_in_memory_itl_mean_and_std_agree_exactly(tmp_path) -> None:
    """The streamed ITL keeps exact integer sums, so its mean and std are the bits the
    in-memory analysis gives (only its percentiles come from a histogram)."""
    from tests.factories import streamed, synthetic, synthetic_events

    memory = synthetic(300, cancelled=7).summary.metrics["itl"]
    batched = streamed(synthetic_events(300, cancelled=7), tmp_path).summary.metrics["itl"]
    assert batched["count"] == memory["count"]
    assert (batched["mean"], batched["std"]) == (memory["mean"], memory["std"])
    assert (batched["min"], batched["max"]) == (memory["min"], memory["max"])


def test_a_plain_list_with_nulls_drops_them() -> None:
    """Nulls are dropped from any container, a Python list with ``None`` too."""
    d = describe([1.0, None, 3.0])
    assert (d["count"], d["mean"], d["max"]) == (2, 2.0, 3.0)
    assert statistic([4, None, 1, 2], "count") == 3.0
    assert statistic([4, None, 1, 2], "p50") == 2.0


def test_count_is_a_statistic_and_an_unknown_one_is_named() -> None:
    assert is_statistic("count") and is_statistic(" COUNT ")
    with pytest.raises(ValueError, match="unknown statistic 'fraction'"):
        statistic([1.0], "fraction")


def test_whole_floats_beyond_int64_are_not_taken_as_integers() -> None:
    """1e19 and 3e19 are whole numbers but outside int64: their mean is 2e19, not the
    wrap-around of an integer cast."""
    d = describe([1e19, 3e19])
    assert (d["mean"], d["std"]) == (2e19, 1e19)


def test_nans_are_not_counted_nor_ranked() -> None:
    d = describe(pl.Series([float("nan"), 1.0, 3.0, float("nan")]))
    assert (d["count"], d["min"], d["p50"], d["max"]) == (2, 1.0, 2.0, 3.0)


def test_a_low_percentile_interpolates_and_only_p0_is_the_minimum() -> None:
    # 0 and 100: p1 sits at 1 % of the way, (2 - 1)·0.01 → 1.0; min is 0
    assert statistic([0, 100], "p1") == 1.0
    assert statistic([0, 100], "min") == 0.0
    assert percentile_of("p100_5") is None  # above 100 %


def test_an_integer_sample_of_nulls_has_no_mean() -> None:
    assert statistic(pl.Series([None, None], dtype=pl.Int64), "mean") is None
    assert moments(pl.Series([None], dtype=pl.Int64)) is None


def test_no_values_sum_to_nothing_so_batches_add_up() -> None:
    assert integer_sums(np.array([], dtype=np.int64)) == (0, 0, 0)
    assert integer_sums(np.array([], dtype=np.int64), pivot=7) == (0, 0, 0)


def test_a_million_deviations_of_two_to_the_44_ns_are_summed_exactly() -> None:
    """2^20 values ±2^43 ns (±2.4 h): deviations up to 2^44 from either end (the wide
    path; over all 2^20 values the split sums' Σhi² would reach 2^66).
    From +2^43: half the deviations are -2^44, half 0: Σd = -2^19·2^44, Σd² = 2^19·2^88."""
    big = 1 << 43
    values = np.tile(np.array([-big, big], dtype=np.int64), 1 << 19)
    assert integer_sums(values, pivot=big) == (1 << 20, -(1 << 63), 1 << 107)
    assert integer_sums(values, pivot=-big) == (1 << 20, 1 << 63, 1 << 107)
    assert moments(pl.Series(values)) == (0.0, float(big))


@pytest.mark.parametrize("pivot", [1 << 52, -(1 << 52)])
def test_a_deviation_is_measured_from_the_pivot_at_either_end(pivot: int) -> None:
    """Values ±2^52 (52 days in ns): from +2^52 the deviations are -2^53 and 0, from -2^52
    they are 0 and 2^53, so the wide path is needed by one end only, the far one
    (hi = ±2^32 in the split sums: hi² = 2^64 would wrap to 0 in int64)."""
    values = np.array([-(1 << 52), 1 << 52], dtype=np.int64)
    far = -(1 << 53) if pivot > 0 else 1 << 53
    assert integer_sums(values, pivot=pivot) == (2, far, 1 << 106)


def test_sums_of_more_than_one_block_keep_every_block() -> None:
    """2^20 + 2 values (two blocks of the split sums), the two 2^30 in the first:
    Σd = 2^31, Σd² = 2^61."""
    n = (1 << 20) + 2
    values = np.zeros(n, dtype=np.int64)
    values[:2] = 1 << 30
    assert integer_sums(values) == (n, 1 << 31, 1 << 61)
    mean, std = moments(pl.Series(values)) or (None, None)
    assert mean == (1 << 31) / n
    assert std == math.sqrt((n * (1 << 61) - (1 << 62)) / (n * n))
