"""Edges of the all-groups-at-once statistics of ``--by`` (``grouped_km``,
``grouped_moments``, ``grouped_order``): refusals, the null group, one-value, empty and
last-empty groups, 2^53, extreme integer keys — each against the one-sample function of
``stats`` or by hand. Written to kill the surviving mutants of benchmarks/mutation.md's
Run 6; the bulk comparisons are in ``test_grouped_stats.py``."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.stats.describe import moments
from servetrace.stats.grouped_km import kaplan_meier_by, kaplan_meier_codes
from servetrace.stats.grouped_moments import float_moments_by, float_moments_of
from servetrace.stats.grouped_order import percentiles, sort_by_group
from servetrace.stats.survival import kaplan_meier

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _km_alone(durations: np.ndarray, observed: np.ndarray) -> dict[str, float | None]:
    fit = kaplan_meier(durations, observed)
    return {"floor": fit.floor, **{k: fit.quantile(q) for k, q in QUANTILES.items()}}


@pytest.mark.parametrize("q", [0.0, 1.0, 1.5, -0.5])
def test_grouped_kaplan_meier_refuses_a_quantile_outside_0_1(q: float) -> None:
    samples = pl.DataFrame({"g": [0], "duration_ns": [5], "observed": [True]})
    with pytest.raises(ValueError, match=r"quantile must be in \(0, 1\), got"):
        kaplan_meier_by(samples, "g", {"p": q})


@pytest.mark.parametrize("q", [0.0, 1.0, 1.5, -0.5])
def test_kaplan_meier_over_codes_refuses_a_quantile_outside_0_1(q: float) -> None:
    with pytest.raises(ValueError, match=r"quantile must be in \(0, 1\), got"):
        kaplan_meier_codes(np.array([0]), np.array([5]), np.array([True]), 1, {"p": q})


def test_kaplan_meier_over_codes_of_a_single_death() -> None:
    # Two requests, one ends at 5 (observed), one is censored at 10: S(5) = 1 - 1/2.
    got = kaplan_meier_codes(
        np.array([0, 0]), np.array([5, 10]), np.array([True, False]), 1, {"p50": 0.5}
    )
    assert got == {0: {"floor": 0.5, "p50": 5.0}}


def test_grouped_kaplan_meier_of_the_null_group_equals_it_alone() -> None:
    """Requests without the ``--by`` attribute form the null group: it is fitted too."""
    samples = pl.DataFrame(
        {
            "g": [None, None, None, "a", "a"],
            "duration_ns": [10, 20, 30, 5, 6],
            "observed": [True, False, True, True, True],
        }
    )
    got = kaplan_meier_by(samples, "g", QUANTILES)
    # null group: S = 2/3 at 10, 0 at 30 (20 censored) -> p50 = 30, floor 0
    assert got[None] == {"floor": 0.0, "p50": 30.0, "p90": 30.0, "p99": 30.0}
    assert got[None] == _km_alone(np.array([10, 20, 30]), np.array([True, False, True]))
    assert got["a"] == {"floor": 0.0, "p50": 5.0, "p90": 6.0, "p99": 6.0}


def test_float_moments_of_the_null_group_and_of_a_single_value() -> None:
    frame = pl.DataFrame({"g": [None, None, 1], "v": [0.5, 1.5, 2.5]})
    assert float_moments_by(frame, "g", "v") == {None: (1.0, 0.5), 1: (2.5, 0.0)}
    # one non-whole value in the whole frame: still described (mean 0.5, std 0)
    assert float_moments_by(pl.DataFrame({"g": [3], "v": [0.5]}), "g", "v") == {3: (0.5, 0.0)}


def test_whole_numbers_from_2_53_take_the_float_path_as_moments_does() -> None:
    """2^53 itself is beyond the exact integer path of ``moments``: the grouped path must
    agree (the integer path would round the exact mean 3002399751580331.67 differently)."""
    values = [2.0**53, 1.0, 2.0]
    frame = pl.DataFrame({"g": [0, 0, 0], "v": values})
    want = moments(pl.Series(values))
    assert want == (3002399751580332.0, 4246034448350514.5)
    assert float_moments_by(frame, "g", "v") == {0: want}
    assert float_moments_of(sort_by_group([0, 0, 0], values, 1)) == [want]


def test_float_moments_of_one_group_empty_groups_and_large_whole_numbers() -> None:
    # one group only
    assert float_moments_of(sort_by_group([0, 0], [0.5, 1.5], 1)) == [(1.0, 0.5)]
    # empty groups before and after a group (the last one at the end of the array)
    assert float_moments_of(sort_by_group([1, 1], [0.5, 1.5], 3)) == [None, (1.0, 0.5), None]
    # whole numbers below 2^53 whose float sums round: the exact integer moments
    big = [2.0**53 - 1, 2.0**53 - 3, 1.0]
    want = moments(pl.Series(big))
    assert want == (6004799503160660.0, 4246034448350513.5)  # the float path: ...514.0
    got = float_moments_of(sort_by_group([0, 0, 0, 1, 1], [*big, 0.25, 0.75], 2))
    assert got == [want, (0.5, 0.25)]


def test_order_statistics_are_clipped_into_each_groups_own_sample() -> None:
    """Group 0: 1, 2; group 1: 10 (one value); group 2: 20, 30; group 3: empty, last."""
    sample = sort_by_group([2, 0, 1, 2, 0], [30, 2, 10, 20, 1], 4)
    assert sample.ordered.dtype == np.int64  # the values' own type, not floats
    assert sample.at(np.array([1, 1, 1, 1]))[:3].tolist() == [1.0, 10.0, 20.0]
    # rank 0 (no lower bound) reads X_(1); rank n + 1 (no upper bound) reads X_(n) —
    # never a neighbouring group's value; an empty last group reads something, no error
    assert sample.at(np.array([0, 2, 0, 1]))[:3].tolist() == [1.0, 10.0, 20.0]
    assert sample.at(np.array([3, 2, 3, 5]))[:3].tolist() == [2.0, 10.0, 30.0]
    one = sort_by_group([0], [7.5], 1)
    assert one.at(np.array([1])).tolist() == [7.5]
    empty = sort_by_group(np.array([], dtype=np.int64), np.array([]), 3)
    assert empty.at(np.array([1, 1, 1])).tolist() == [0.0, 0.0, 0.0]
    assert empty.offsets.tolist() == [0, 0, 0] and empty.sizes.tolist() == [0, 0, 0]


def test_integer_sort_keys_keep_groups_apart_at_the_extremes() -> None:
    """Each group holds the smallest and the largest value: the key span must be the
    whole range plus one, or the groups' keys overlap."""
    sample = sort_by_group([0, 1, 0, 1, 2], [10, 0, 0, 10, 5], 3)
    assert sample.ordered.tolist() == [0, 10, 0, 10, 5]
    # int32 codes with a span that overflows int32 products: the same as int64 codes
    codes = np.array([2, 0, 1, 2, 1], dtype=np.int32)
    values = np.array([2**30, 0, 2**30, 0, 5], dtype=np.int64)
    got = sort_by_group(codes, values, 3)
    want = sort_by_group(codes.astype(np.int64), values, 3)
    assert got.ordered.tolist() == want.ordered.tolist() == [0, 5, 2**30, 0, 2**30]


def test_percentiles_of_one_value_no_values_and_an_empty_last_group() -> None:
    assert percentiles(sort_by_group([0], [4.0], 1), 0.5).tolist() == [4.0]
    empty = percentiles(sort_by_group(np.array([], dtype=np.int64), np.array([]), 3), 0.9)
    assert empty.dtype == np.float64 and np.isnan(empty).all() and empty.size == 3
    last_empty = percentiles(sort_by_group([0, 0, 1], [1.0, 3.0, 5.0], 3), 0.5)
    assert last_empty[:2].tolist() == [2.0, 5.0] and np.isnan(last_empty[2])


def test_float_moments_of_many_groups_equal_each_group_alone() -> None:
    """Hundreds of groups (``--by`` over request attributes), sizes 1..7 in random order."""
    rng = np.random.default_rng(12)
    sizes = rng.integers(1, 8, 600)
    groups = np.repeat(rng.permutation(600) * 7 - 1000, sizes)  # keys not in size order
    values = rng.lognormal(2, 1, groups.size)
    frame = pl.DataFrame({"g": groups, "v": values}).sample(fraction=1.0, shuffle=True, seed=3)
    got = float_moments_by(frame, "g", "v")
    assert len(got) == 600
    for (key,), part in frame.group_by("g"):
        assert got[key] == moments(part["v"]), key


def test_first_of_each_group_and_group_sums_by_hand() -> None:
    from servetrace.stats.grouped_order import first_of_each_group, group_sums

    code = np.array([1, 0, 1, 1, 0, 2])
    order = np.array([4, 1, 3, 0, 2, 5])  # rows by code: 0 0 | 1 1 1 | 2
    assert first_of_each_group(order, code, 3, 2).tolist() == [4, 1, 3, 0, 5]
    assert first_of_each_group(order, code, 4, 1).tolist() == [4, 3, 5]
    values = np.array([10, 20, 30, 2**62, 50, 60])
    keep = np.array([True, True, False, True, True, False])
    assert group_sums(code, values, keep, 4).tolist() == [70, 10 + 2**62, 0, 0]
