"""The SciPy-free binomial (stats/binomial.py) against scipy.stats.binom, to 1e-12."""

from __future__ import annotations

import math

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
def test_cdf_and_sf_equal_scipy(q: float) -> None:
    for n in SIZES:
        k = _grid(n, q)
        assert np.max(np.abs(binomial.cdf(k, n, q) - binom.cdf(k, n, q))) <= 1e-12, n
        assert np.max(np.abs(binomial.sf(k, n, q) - binom.sf(k, n, q))) <= 1e-12, n


@pytest.mark.parametrize("q", QUANTILES)
def test_pmf_relative_error_is_tiny(q: float) -> None:
    for n in SIZES:
        k = _grid(n, q)
        k = k[(k >= 0) & (k <= n)]
        want = binom.pmf(k, n, q)
        got = binomial.pmf(k, n, q)
        big = want > 1e-300
        assert np.max(np.abs(got[big] / want[big] - 1)) <= 1e-11, n


def test_hand_computed_pmf_and_cdf() -> None:
    # Binomial(10, 1/2): P(B = 5) = 252/1024, P(B <= 1) = 11/1024, P(B > 8) = 11/1024
    assert binomial.pmf([5], 10, 0.5)[0] == pytest.approx(252 / 1024, rel=1e-14)
    assert binomial.cdf([1], 10, 0.5)[0] == pytest.approx(11 / 1024, rel=1e-14)
    assert binomial.sf([8], 10, 0.5)[0] == pytest.approx(11 / 1024, rel=1e-14)
    assert binomial.cdf([-1, 10, 11], 10, 0.5).tolist() == [0.0, 1.0, 1.0]
    assert binomial.pmf([0, 3], 3, 1.0).tolist() == [0.0, 1.0]


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
