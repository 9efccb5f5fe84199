"""The SciPy-free binomial (stats/binomial.py) against scipy.stats.binom, to 1e-12."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

from servetrace.stats import binomial
from servetrace.stats.order_ci import ranks, scan_ranks

SIZES = [1, 2, 3, 7, 10, 15, 16, 35, 36, 80, 81, 500, 501, 1000, 4097, 10**5, 10**6, 10**7]
QUANTILES = [0.001, 0.01, 0.05, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999]


def _grid(n: int, q: float) -> np.ndarray:
    """Every k for small n; for large n the body and both tails, where the ranks live."""
    if n <= 5000:
        return np.arange(-1, n + 2)
    sd = math.sqrt(n * q * (1 - q))
    centre = np.round(n * q + sd * np.linspace(-9, 9, 721)).astype(np.int64)
    return np.unique(np.clip(np.concatenate([centre, [0, 1, n - 1, n]]), 0, n))


@pytest.mark.parametrize("q", QUANTILES)
def test_pmf_relative_error_is_tiny(q: float) -> None:
    for n in SIZES:
        k = _grid(n, q)
        k = k[(k >= 0) & (k <= n)]
        want = binom.pmf(k, n, q)
        got = binomial.pmf_pairs(k, n, q)
        big = want > 1e-300
        assert np.max(np.abs(got[big] / want[big] - 1)) <= 1e-11, n


def test_hand_computed_pmf() -> None:
    # Binomial(10, 1/2): P(B = 5) = 252/1024, P(B <= 1) = 11/1024
    assert binomial.pmf_pairs([5], 10, 0.5)[0] == pytest.approx(252 / 1024, rel=1e-14)
    assert binomial.pmf_pairs([0, 1], 10, 0.5).sum() == pytest.approx(11 / 1024, rel=1e-14)
    assert binomial.pmf_pairs([0, 3], 3, 1.0).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99, 0.999])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_exact_ranks_equal_scipy_ranks_up_to_1e7(q: float, confidence: float) -> None:
    sizes = np.array([*range(1, 60), 367, 368, 2995, 2996, 10**4 + 7, 123_457, 10**6, 10**7])
    got = ranks(sizes, q, confidence)
    want = scan_ranks(sizes, q, confidence)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tolist() == want[1].tolist()


def test_analyze_needs_no_scipy() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from servetrace.stats.order_ci import ranks\n"
        "ranks(10**6, 0.99, 0.95)\n"
        "print('scipy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# Bernoulli numbers B_2 .. B_20: stirlerr(k) = Σ_j B_2j / (2j (2j − 1) k^(2j − 1)), exact in
# rationals; ten terms leave < 1e-19 out from k = 16 on (an independent reference).
_BERNOULLI = [
    Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
    Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
    Fraction(-174611, 330),
]  # fmt: skip


def _stirlerr_exact(k: int) -> float:
    total = sum(
        b / (2 * j * (2 * j - 1) * Fraction(k) ** (2 * j - 1))
        for j, b in enumerate(_BERNOULLI, start=1)
    )
    return float(total)


def test_stirlerr_equals_its_bernoulli_series_to_2e_16() -> None:
    """Every branch of the series (16..35, 36..80, 81..500, above) and its edges: an
    absolute error in stirlerr is the relative error it gives the pmf."""
    ks = [16, 17, 20, 35, 36, 50, 80, 81, 200, 500, 501, 10**4, 10**7]
    got = binomial.stirlerr(ks)  # a list of ints, as a caller may pass
    assert got.dtype == np.float64
    want = np.array([_stirlerr_exact(k) for k in ks])
    assert np.max(np.abs(got - want)) <= 2e-16
    # the table below 16: ln k! − ln(sqrt(2πk)(k/e)^k); stirlerr(0) = 0 by convention
    small = binomial.stirlerr([0, 1, 15])
    assert small[0] == 0.0
    assert small[1] == pytest.approx(1 - 0.5 * math.log(2 * math.pi), rel=1e-14)


def test_bd0_equals_the_deviance_to_the_last_bits() -> None:
    """``x ln(x/m) + m − x`` at 50 digits (``decimal``), on both sides of the series'
    |v| < 0.1 and at x = 0 (where it is m, with no warning)."""
    m = 1000.0
    x = np.concatenate([m * (1 + np.linspace(-0.2, 0.2, 401)), [m, 0.0]])
    with np.errstate(all="raise"):
        got = binomial.bd0(x, m)
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        dm = decimal.Decimal(m)
        want = [
            float(decimal.Decimal(xi) * (decimal.Decimal(xi) / dm).ln() + dm - decimal.Decimal(xi))
            if xi > 0
            else m
            for xi in x.tolist()
        ]
    want_ = np.array(want)
    v = np.abs(x - m) / (x + m)
    series = (v < 0.1) & (want_ > 0)  # the series: a few ulps
    assert np.max(np.abs(got[series] / want_[series] - 1)) <= 8 * 2.0**-53
    direct = v >= 0.1  # x ln(x/m) + m − x with mild cancellation (|v| ≥ 0.1)
    assert np.max(np.abs(got[direct] / want_[direct] - 1)) <= 2e-14
    assert got[-2] == 0.0 and got[-1] == 1000.0
    assert binomial.bd0([0.0, 5.0], 3.0).tolist() == [3.0, pytest.approx(5 * math.log(5 / 3) - 2)]


def test_pmf_of_a_certain_outcome() -> None:
    """p = 0: all mass at 0; p = 1: all at n — for one size and for many."""
    x = np.arange(4.0)
    assert binomial.pmf_pairs(x, np.full(4, 3), 0.0).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert binomial.pmf_pairs(x, np.full(4, 3), 1.0).tolist() == [0.0, 0.0, 0.0, 1.0]
    pairs = binomial.pmf_pairs(np.array([0.0, 2.0, 2.0]), np.array([2, 2, 5]), 1.0)
    assert pairs.tolist() == [0.0, 1.0, 0.0]


def test_windows_by_hand() -> None:
    """W = ⌈12σ + 40⌉: n = 10^6, p = 1/2: σ = 500, W = 6040 around 500000; n = 10^4,
    p = 0.9: σ = 30, W = 400 around 9000; clipped to 0..n."""
    lo, hi = binomial.windows(np.array([10**6, 10**4, 10]), 0.5)
    assert lo.tolist() == [493_960, 5000 - 640, 0] and hi.tolist() == [506_040, 5640, 10]
    assert lo.dtype == hi.dtype == np.dtype(np.int64)
    lo, hi = binomial.windows(np.array([10**4]), 0.9)
    assert (int(lo[0]), int(hi[0])) == (8600, 9400)


def test_width_blocks_partition_the_rows_at_most_cells_per_block() -> None:
    widths = np.array([1000] * 2500 + [2**20 + 1] * 3 + [3, 1000])
    blocks = list(binomial.width_blocks(widths))
    assert sorted(np.concatenate(blocks).tolist()) == list(range(widths.size))  # each once
    for rows in blocks:
        cls = int(np.ceil(np.log2(widths[rows].max())))
        assert np.all(np.ceil(np.log2(widths[rows])) == cls)  # one width class per block
        assert rows.size <= max(1, binomial.CELLS >> cls)
    assert sorted(rows.size for rows in blocks) == [1, 1, 1, 1, 453, 1024, 1024]


def test_narrow_windows_share_one_block() -> None:
    """Widths 1..128 are one class (128): one matrix, not one per power of two; wider
    ones keep their own class."""
    widths = np.array([1, 2, 3, 5, 9, 17, 33, 65, 128, 129, 300])
    blocks = [rows.tolist() for rows in binomial.width_blocks(widths)]
    assert blocks == [list(range(9)), [9], [10]]


def test_exact_ranks_of_sizes_in_one_block_equal_each_size_alone() -> None:
    """Sizes 1..99 (windows 2..100 wide, one block now) get the ranks each gets alone,
    at every percentile of the report and a few confidences."""
    from servetrace.stats.order_ci import _check, _exact_ranks

    sizes = np.arange(1, 100, dtype=np.int64)
    for q in (0.5, 0.9, 0.95, 0.99, 0.999, 0.01):
        for confidence in (0.9, 0.95, 0.99):
            tail = _check(q, confidence)
            low, high = _exact_ranks(sizes, q, tail)
            alone = [_exact_ranks(np.array([n]), q, tail) for n in sizes.tolist()]
            assert low.tolist() == [int(a[0][0]) for a in alone]
            assert high.tolist() == [int(a[1][0]) for a in alone]
