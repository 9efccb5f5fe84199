"""The all-groups-at-once statistics of ``--by`` equal the one-sample functions per group.

Kaplan–Meier (``grouped_km``), order statistics and percentiles (``grouped_order``), float
moments (``grouped_moments``) and binomial ranks of many sizes (``order_ci.ranks``): each
group's numbers are compared, bit for bit, with the function of ``stats`` applied to that
group alone, and hand-computed where the sample is small.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.stats import binomial, grouped_km, grouped_order, order_ci
from servetrace.stats.describe import describe, moments
from servetrace.stats.grouped_km import kaplan_meier_by
from servetrace.stats.grouped_moments import float_moments_by
from servetrace.stats.grouped_order import percentiles, sort_by_group
from servetrace.stats.survival import kaplan_meier

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _km_alone(durations: np.ndarray, observed: np.ndarray) -> dict[str, float | None]:
    fit = kaplan_meier(durations, observed)
    return {"floor": fit.floor, **{k: fit.quantile(q) for k, q in QUANTILES.items()}}


def test_grouped_kaplan_meier_hand_computed() -> None:
    """ties: 10, 10 (events), 15 (censored), 20, 30 → S = 0.6 at 10, 0.3 at 20, 0 at 30;
    solo: one event at 5 → S = 0; censored: nothing observed → no quantile, floor 1."""
    samples = pl.DataFrame(
        {
            "g": ["ties"] * 5 + ["solo"] + ["censored"] * 2,
            "duration_ns": [10, 20, 15, 10, 30, 5, 7, 3],
            "observed": [True, True, False, True, True, True, False, False],
        }
    )
    got = kaplan_meier_by(samples, "g", QUANTILES)
    assert got["ties"] == {"floor": 0.0, "p50": 20.0, "p90": 30.0, "p99": 30.0}
    assert got["solo"] == {"floor": 0.0, "p50": 5.0, "p90": 5.0, "p99": 5.0}
    assert got["censored"] == {"floor": 1.0, "p50": None, "p90": None, "p99": None}


def test_grouped_kaplan_meier_equals_each_group_alone() -> None:
    rng = np.random.default_rng(3)
    sizes = [1, 2, 3, 17, 40, 250, 1000]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    durations = rng.integers(1, 60, groups.size)  # few distinct times: many ties
    observed = rng.random(groups.size) < 0.7
    observed[groups == 3] = False  # one group with every sample censored
    observed[groups == 5] = durations[groups == 5] < 40  # the largest censored: unreached
    frame = pl.DataFrame({"g": groups, "duration_ns": durations, "observed": observed}).sample(
        fraction=1.0, shuffle=True, seed=1
    )
    got = kaplan_meier_by(frame, "g", QUANTILES)
    assert set(got) == set(range(len(sizes)))
    for g in range(len(sizes)):
        part = frame.filter(pl.col("g") == g)
        want = _km_alone(part["duration_ns"].to_numpy(), part["observed"].to_numpy())
        assert got[g] == want, g
    assert got[3]["p50"] is None and got[5]["p99"] is None and got[5]["floor"] > 0


def test_sorted_groups_give_each_groups_order_statistics_and_percentiles() -> None:
    rng = np.random.default_rng(5)
    sizes = np.array([0, 1, 2, 5, 101, 3000, 0, 7])
    codes = np.repeat(np.arange(sizes.size), sizes)
    cases = {
        "narrow ints": rng.integers(0, 10**6, codes.size),  # one int64 key
        "wide ints": rng.integers(-(2**62), 2**62, codes.size),  # too wide: two sorts
        "floats": rng.lognormal(10, 2, codes.size),
    }
    for name, values in cases.items():
        order = rng.permutation(codes.size)
        sample = sort_by_group(codes[order], values[order], sizes.size)
        assert sample.sizes.tolist() == sizes.tolist(), name
        for q in (0.5, 0.9, 0.99, 0.999):
            got = percentiles(sample, q)
            for g, n in enumerate(sizes.tolist()):
                alone = np.sort(values[codes == g])
                if n == 0:
                    assert np.isnan(got[g])
                    continue
                # the same bits as Polars' (describe's) linear interpolation of the group
                want = pl.Series(alone).quantile(q, interpolation="linear")
                assert got[g] == want, (name, q, g)
        ranks = np.array([1, 1, 2, 3, 50, 2999, 1, 7])
        picked = sample.at(ranks)
        for g, n in enumerate(sizes.tolist()):
            if n:
                assert picked[g] == float(np.sort(values[codes == g])[ranks[g] - 1]), name


def test_percentiles_hand_computed() -> None:
    """Group 0: 1, 2, 3, 4 → p50 at h = 1.5: 2.5; p90 at h = 2.7: 3.7. Group 1: 10 → 10."""
    sample = sort_by_group([0, 1, 0, 0, 0], [4, 10, 1, 3, 2], 2)
    assert sample.ordered.tolist() == [1, 2, 3, 4, 10]
    assert percentiles(sample, 0.5).tolist() == [2.5, 10.0]
    assert percentiles(sample, 0.9).tolist() == pytest.approx([3.7, 10.0], rel=1e-15)


def test_float_moments_by_group_equal_moments_alone() -> None:
    rng = np.random.default_rng(8)
    sizes = [1, 2, 9, 9, 9, 130, 1, 2000]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    values = rng.lognormal(3, 1.5, groups.size)
    values[groups == 2] = np.round(values[groups == 2])  # whole numbers: the exact path
    values[:1] = np.nan  # a NaN and a null are left out, as describe does
    frame = pl.DataFrame({"g": groups, "v": values}).with_columns(
        pl.when(pl.int_range(pl.len()) == 5).then(None).otherwise(pl.col("v")).alias("v")
    )
    got = float_moments_by(frame.sample(fraction=1.0, shuffle=True, seed=2), "g", "v")
    assert 0 not in got  # its only value was NaN
    for g in range(1, len(sizes)):
        want = moments(frame.filter(pl.col("g") == g)["v"].drop_nulls().drop_nans())
        assert got[g] == want, g
    assert got[2] == moments(frame.filter(pl.col("g") == 2)["v"].cast(pl.Int64))


def test_describe_of_a_sorted_group_equals_describe_alone() -> None:
    from servetrace.analysis.grouped_gaps import describe_sample

    rng = np.random.default_rng(9)
    sizes = np.array([3, 0, 1, 500])
    codes = np.repeat(np.arange(sizes.size), sizes)
    values = rng.integers(0, 5 * 10**9, codes.size)  # gaps up to 5 s: d² needs the split
    sample = sort_by_group(codes, values, sizes.size)
    got = describe_sample(sample, ["a", "b", "c", "d"])
    for g, name in enumerate("abcd"):
        assert got[name] == describe(pl.Series(values[codes == g])), name


@pytest.mark.parametrize(
    ("sizes", "high"),
    [
        # groups that start and end inside 32,768-value blocks and span several of them
        ([70_000, 1, 0, 130_001, 65_535, 2], 5 * 10**9),
        # gaps of hours (beyond 2^42 ns): the Int128 path
        ([40_000, 3, 90_000], 2**43),
    ],
)
def test_describe_of_groups_across_sum_blocks_equals_describe_alone(
    sizes: list[int], high: int
) -> None:
    from servetrace.analysis.grouped_gaps import describe_sample

    rng = np.random.default_rng(len(sizes))
    counts = np.array(sizes)
    codes = np.repeat(np.arange(counts.size), counts)
    values = rng.integers(10**6, high, codes.size)
    sample = sort_by_group(codes, values, counts.size)
    names = [f"g{i}" for i in range(counts.size)]
    got = describe_sample(sample, names)
    for g, name in enumerate(names):
        assert got[name] == describe(pl.Series(values[codes == g], dtype=pl.Int64)), name


def test_ranks_of_many_sizes_equal_each_size_alone() -> None:
    sizes = np.array([1, 2, 3, 7, 25, 26, 100, 3000, 3001, 50_000, 25])
    for q in (0.5, 0.9, 0.99, 0.999):
        low, high = order_ci.ranks(sizes, q, 0.95)
        tail = (1 - 0.95) / 2 + order_ci.TIE_TOLERANCE
        for n, lo, hi in zip(sizes.tolist(), low.tolist(), high.tolist(), strict=True):
            # one size at a time, from the single-size tail sums of stats.binomial
            start, cdf, sf = binomial.tails(n, q)
            below = int(np.searchsorted(cdf, tail, side="right"))
            above = sf.size - int(np.searchsorted(sf[::-1], tail, side="right"))
            u = max(start + above, 1)
            assert (lo, hi) == (min(start + below, n), u if u <= n else n + 1), (n, q)
    low, high = order_ci.ranks(np.array([0, 10]), 0.5, 0.95)  # no sample: neither bound
    assert (low.tolist(), high.tolist()) == ([0, 2], [1, 9])


def test_pmf_of_many_sizes_equals_pmf_of_each() -> None:
    for n in (1, 2, 30, 31, 1000, 123_457):
        for p in (0.5, 0.9, 0.999, 0.01):
            lo, hi = binomial.windows(np.array([n]), p)
            x = np.arange(lo[0], hi[0] + 1)
            got = binomial.pmf_pairs(x, np.full(x.size, n), p)
            want = binomial.pmf(x, n, p)
            inner = (x > 0) & (x < n)
            assert np.array_equal(got[inner], want[inner]), (n, p)
            # the end masses take NumPy's exp, math.exp's at most an ulp away
            assert got[~inner] == pytest.approx(want[~inner], rel=4e-16, abs=0), (n, p)


def _lexsorted(codes: np.ndarray, values: np.ndarray, groups: int) -> tuple[list, list]:
    order = np.lexsort((values, codes))
    return values[order].tolist(), np.bincount(codes, minlength=groups).tolist()


@pytest.mark.parametrize(
    ("dtype", "low", "high", "groups", "packed"),
    [
        (np.int64, 0, 3_465_847_626, 300, True),  # ns gaps, 300 groups: one packed key
        (np.int64, 631_661, 2_958_255_313, 300, True),  # fits as it is: no offset
        (np.int64, 10**9, 10**9 + 1000, 300, True),  # 10 bits of range: offset by the minimum
        (np.int64, -(10**12), 10**12, 7, True),  # negative values: shifted by the minimum
        (np.int32, -5, 2**31 - 1, 1, True),  # a narrower type comes back as it went in
        (np.uint64, 2**63 - 2**40, 2**63 - 1, 3, True),  # near the top of int64
        (np.uint64, 2**63, 2**64 - 1, 3, False),  # beyond int64: the two stable sorts
        (np.int64, 0, 2**61, 3, False),  # 61 value bits leave no room for 3 codes
        (np.int64, 0, 2**60 - 1, 4, True),  # exactly fits: codes 0..3 in 2 bits
        (np.uint64, 2**63, 2**64 - 1, 40_000, False),  # codes past int16: the wide radix
        (np.uint64, 2**63, 2**64 - 1, 2**15, False),  # the last count int16 holds
    ],
)
def test_packed_key_sort_equals_a_lexsort(
    dtype: type, low: int, high: int, groups: int, packed: bool
) -> None:
    """The packed ``code << bits | (v − min)`` sort and its fallback give the order a
    lexsort by (group, value) gives, values in their own type, at the edges of the key."""
    rng = np.random.default_rng(groups)
    n = 4000
    values = rng.integers(low, high, n, dtype=dtype, endpoint=True)
    values[:2] = [low, high]
    codes = rng.integers(0, groups, n)
    codes[-1] = groups - 1
    assert (grouped_order.packed_bits(groups, high - low) is not None and high < 2**63) is packed
    sample = sort_by_group(codes, values, groups)
    assert sample.ordered.dtype == values.dtype
    ordered, sizes = _lexsorted(codes, values, groups)
    assert sample.ordered.tolist() == ordered
    assert sample.sizes.tolist() == sizes
    assert sample.offsets.tolist() == (np.cumsum(sizes) - sizes).tolist()
    assert codes.tolist() == codes.tolist()  # the caller's codes are left as they were


def test_key_offset_is_zero_only_when_the_values_fit_as_they_are() -> None:
    """5..1000 has a range of 10 bits and fits them as it is (no passes to subtract and
    add back an offset); 10^9..10^9 + 1000 and negative values need their minimum."""
    assert grouped_order.key_offset(5, 1000, 10) == 0
    assert grouped_order.key_offset(5, 1024, 10) == 5  # 1024 needs an 11th bit
    assert grouped_order.key_offset(10**9, 10**9 + 1000, 10) == 10**9
    assert grouped_order.key_offset(-3, 100, 7) == -3


def test_packed_sort_leaves_the_callers_codes_alone() -> None:
    codes = np.array([2, 0, 1, 0], dtype=np.int64)
    sample = sort_by_group(codes, np.array([5, 9, 1, 3]), 3)
    assert codes.tolist() == [2, 0, 1, 0]
    assert sample.ordered.tolist() == [3, 9, 1, 5] and sample.sizes.tolist() == [2, 1, 1]


@pytest.mark.parametrize("wide", [False, True], ids=["packed key", "lexsort"])
def test_flat_kaplan_meier_equals_each_group_alone_and_the_polars_one(wide: bool) -> None:
    """``kaplan_meier_codes`` gives each group ``kaplan_meier`` of the group alone, and
    ``kaplan_meier_by``'s dict, bit for bit: many ties, a group with every sample censored,
    one never reaching p99, one of a single sample, lengths across several powers of two
    (the stacked running products), and durations too wide to pack (2^61 apart)."""
    rng = np.random.default_rng(21 + wide)
    sizes = [1, 2, 3, 17, 40, 250, 1000, 0, 5, 4096]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    step = 2**55 if wide else 1
    durations = rng.integers(1, 60, groups.size) * step  # few distinct times: many ties
    if wide:
        durations[::7] = -(2**60)  # negative and far: 2^61 wide with 10 codes does not fit
    observed = rng.random(groups.size) < 0.7
    observed[groups == 3] = False
    observed[groups == 5] = durations[groups == 5] < 40 * step
    shuffle = rng.permutation(groups.size)
    codes, durations, observed = groups[shuffle], durations[shuffle], observed[shuffle]
    got = grouped_km.kaplan_meier_codes(codes, durations, observed, len(sizes), QUANTILES)
    assert set(got) == {g for g, n in enumerate(sizes) if n}
    frame = pl.DataFrame({"g": codes, "duration_ns": durations, "observed": observed})
    assert got == kaplan_meier_by(frame, "g", QUANTILES)
    for g in got:
        mine = codes == g
        assert got[g] == _km_alone(durations[mine], observed[mine]), g
    assert got[3]["p50"] is None and got[3]["floor"] == 1.0
    assert grouped_km.kaplan_meier_codes(codes[:0], durations[:0], observed[:0], 3, QUANTILES) == {}


def test_percentiles_at_several_quantiles_equal_each_alone() -> None:
    """Row k of ``percentiles_at`` is ``percentiles`` at ``qs[k]``, bit for bit, for
    integers and floats, empty and single-value groups included."""
    from servetrace.stats.grouped_order import percentiles_at

    rng = np.random.default_rng(12)
    sizes = np.array([0, 1, 2, 9, 400, 0])
    codes = np.repeat(np.arange(sizes.size), sizes)
    qs = [0.5, 0.9, 0.95, 0.99, 0.999, 0.0, 1.0]
    for values in (rng.integers(0, 10**10, codes.size), rng.lognormal(8, 3, codes.size)):
        sample = sort_by_group(codes, values, sizes.size)
        together = percentiles_at(sample, qs)
        assert together.shape == (len(qs), sizes.size)
        for k, q in enumerate(qs):
            alone = []  # the definition, one group at a time (Polars' linear quantile)
            for g in range(sizes.size):
                part = pl.Series(values[codes == g])
                alone.append(part.quantile(q, interpolation="linear") if part.len() else None)
            got = [None if v != v else v for v in together[k].tolist()]
            assert got == alone, q


def test_order_statistics_of_rows_of_ranks_equal_each_row_alone() -> None:
    """``at`` of a (percentile × group) matrix of ranks is ``at`` of each row, also for a
    sample with no values at all (zeros of the ranks' shape)."""
    ranks = np.array([[0, 1, 3], [2, 5, 1]])
    for values, codes in (([4, 1, 9, 7, 2], [0, 0, 1, 2, 2]), ([], [])):
        sample = sort_by_group(np.array(codes, dtype=np.int64), np.array(values), 3)
        together = sample.at(ranks)
        assert together.shape == ranks.shape
        assert together.tolist() == [sample.at(row).tolist() for row in ranks]
