"""The binomial distribution without SciPy: the pmf and the window of its tail sums.

``analyze`` puts an order-statistic interval beside every percentile
(``stats.order_ci``), so the binomial CDF is on the start-up path of every analysis;
importing ``scipy.stats`` for it cost more than the rest of the command. This module
computes the same numbers with NumPy only.

**pmf** — Loader's saddle-point form ("Fast and accurate computation of binomial
probabilities", 2000; R's ``dbinom``)::

    pmf(x; n, p) = exp(stirlerr(n) − stirlerr(x) − stirlerr(n − x)
                       − bd0(x, np) − bd0(n − x, nq)) · sqrt(n / (2π x (n − x)))

with ``stirlerr(k) = ln k! − ln(sqrt(2πk) (k/e)^k)`` (a table below 16, its Stirling
series above) and the deviance ``bd0(x, m) = x ln(x/m) + m − x`` summed as a series when
``x ≈ m``. No term is a difference of large logarithms, so the relative error stays near
1e-15 for every n (the naive ``lgamma`` form loses ~n·ε: 1e-8 at n = 1e7).

**Tails** — ``P(B ≤ k)`` and ``P(B ≥ k)`` are sums of the pmf over a window
``[⌊np⌋ − W, ⌈np⌉ + W]`` with ``W = ⌈12σ + 40⌉``, ``σ² = npq``: Bernstein's inequality
bounds the mass outside it by ``2·exp(−t²/(2(σ² + t/3))) < 1e-25`` (t = W), far below
the 1e-12 the tests demand. The sums (``stats.order_ci``) run in extended precision
(``np.longdouble``).
Cost: O(σ) per (n, p), e.g. 0.4 M terms at n = 1e9, p = 0.5 — milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

_LN_2PI = math.log(2.0 * math.pi)
# stirlerr(k) for k = 0..15 (stirlerr(0) = 0 by convention, as in R).
_STIRLERR_SMALL = np.array(
    [0.0]
    + [math.lgamma(k + 1.0) - (k + 0.5) * math.log(k) + k - 0.5 * _LN_2PI for k in range(1, 16)]
)
_BD0_TERMS = 24  # |v| < 0.1 there, so v^(2j) < 1e-48 after 24 terms
_NEGLIGIBLE = 2.0**-55  # a term this small relative to bd0's sum cannot change its bits
# stirlerr: the table up to 15, then Stirling's series with fewer terms as k grows
_STIRLING_FROM = np.array([15.0, 35.0, 80.0, 500.0])


def stirlerr(k: npt.ArrayLike) -> FloatArray:
    """``ln k! − ln(sqrt(2πk)(k/e)^k)`` for whole k ≥ 0 (Loader; R ``stirlerr``).

    Each branch of the series is evaluated on its own elements only (the same
    operations on each element as evaluating every branch everywhere)."""
    k = np.asarray(k, dtype=np.float64)
    branch = np.searchsorted(_STIRLING_FROM, k, side="left")  # 0: k ≤ 15, the table
    if k.size == 0:
        return np.empty_like(k)
    first, last = int(branch.min()), int(branch.max())
    if first == last:  # the usual case: one branch for all, no indexing
        return _stirling_branch(k, first)
    out = np.empty_like(k)
    for b in range(first, last + 1):
        where = branch == b
        out[where] = _stirling_branch(k[where], b)
    return out


def _stirling_branch(k: FloatArray, branch: int) -> FloatArray:
    if branch == 0:
        return np.asarray(_STIRLERR_SMALL[k.astype(np.int64)], dtype=np.float64)
    return _stirling_series(k, branch)


def _stirling_series(big: FloatArray, branch: int) -> FloatArray:
    """Stirling's series of stirlerr, fewer terms as k grows (branch 1: 15 < k ≤ 35, 2:
    ≤ 80, 3: ≤ 500, 4: above)."""
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    nn = big * big
    if branch == 4:
        return np.asarray((s0 - s1 / nn) / big)
    if branch == 3:
        return np.asarray((s0 - (s1 - s2 / nn) / nn) / big)
    if branch == 2:
        return np.asarray((s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / big)
    return np.asarray((s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / big)


def bd0(x: npt.ArrayLike, m: npt.ArrayLike) -> FloatArray:
    """The deviance ``x ln(x/m) + m − x`` (x ≥ 0, m > 0) without cancellation.

    Near ``m`` it is the series ``(x − m)v + Σ_j 2x v^(2j+1)/(2j+1)``, v = (x−m)/(x+m),
    |v| < 0.1. Term j is at most ``2|v|^(2j−1)/(2j+1)`` of the sum; once that is below
    2^-55 for the largest |v|, it and every later term are under half an ulp of the sum
    and adding them would not change a bit, so the series stops there."""
    x = np.asarray(x, dtype=np.float64)
    m = np.broadcast_to(np.asarray(m, dtype=np.float64), x.shape)
    near = np.abs(x - m) < 0.1 * (x + m)
    every = bool(near.all())
    if every:
        out = np.empty(x.shape, dtype=np.float64)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(x > 0, x * np.log(x / m), 0.0) + m - x
    if near.any():
        xn, mn = (x, m) if every else (x[near], m[near])
        v = (xn - mn) / (xn + mn)
        s = (xn - mn) * v
        ej = 2.0 * xn * v
        v2 = v * v
        widest = float(np.abs(v).max())
        for j in range(1, _BD0_TERMS + 1):
            if 2.0 * widest ** (2 * j - 1) / (2 * j + 1) < _NEGLIGIBLE:
                break
            ej = ej * v2
            s = s + ej / (2 * j + 1)
        if every:
            return np.asarray(s, dtype=np.float64).reshape(x.shape)
        out[near] = s
    return out


def pmf_pairs(x: npt.ArrayLike, n: npt.ArrayLike, p: float) -> FloatArray:
    """``P(B_i = x_i)`` for ``B_i ~ Binomial(n_i, p)``, elementwise: ``pmf`` of many sizes
    in one pass (``order_ci.ranks`` asks for the windows of every ``--by`` group at once)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n = np.ascontiguousarray(np.broadcast_to(np.asarray(n, dtype=np.float64), x.shape))
    q = 1.0 - p
    out = np.zeros_like(x)
    if p == 0.0 or q == 0.0:
        out[x == (0.0 if p == 0.0 else n)] = 1.0
        return out
    inner = (x > 0) & (x < n)
    xi, ni = x[inner], n[inner]
    lc = stirlerr(ni) - stirlerr(xi) - stirlerr(ni - xi)
    lc = lc - bd0(xi, ni * p) - bd0(ni - xi, ni * q)
    lf = _LN_2PI + np.log(xi) + np.log1p(-xi / ni)
    out[inner] = np.exp(lc - 0.5 * lf)
    zero, full = x == 0, x == n
    n0, nn = n[zero], n[full]
    at0 = (-bd0(n0, n0 * q) - n0 * p) if p < 0.1 else n0 * math.log(q)
    atn = (-bd0(nn, nn * p) - nn * q) if q < 0.1 else nn * math.log(p)
    out[zero] = np.exp(at0)
    out[full] = np.exp(atn)
    return out


def windows(n: npt.ArrayLike, p: float) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(lo, hi)`` of each size: the window ``[⌊np⌋ − W, ⌈np⌉ + W]`` its tail sums run
    over (module docstring), clipped to ``0..n``."""
    n = np.asarray(n, dtype=np.int64)
    mean = n * p
    width = np.ceil(12.0 * np.sqrt(n * p * (1.0 - p)) + 40.0).astype(np.int64)
    lo = np.maximum(0, np.floor(mean).astype(np.int64) - width)
    return lo, np.minimum(n, np.ceil(mean).astype(np.int64) + width)


CELLS = 1 << 20  # matrix cells per block of stacked windows: memory stays a few MB
# Windows up to this wide share one class: padding a row with under 128 zeros costs less
# than the pmf call and the dozen NumPy passes of a block of its own (``--by``'s group
# sizes below 100 have windows 2..101 wide, five classes that each paid them).
NARROW = 1 << 7


def width_blocks(width: npt.NDArray[np.int64]) -> Iterator[npt.NDArray[np.int64]]:
    """Row indices in blocks whose windows are about as wide (one power of two of
    ``width``; every width up to ``NARROW`` in one), at most ~``CELLS`` window points per
    block: one padded matrix per block, not one pass per row."""
    width_class = np.ceil(np.log2(np.maximum(width, NARROW))).astype(np.int64)
    for cls in np.unique(width_class):
        of_class = np.flatnonzero(width_class == cls)
        block = max(1, CELLS >> int(cls))
        for start in range(0, of_class.size, block):
            yield of_class[start : start + block]
