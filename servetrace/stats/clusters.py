"""Clustered samples: how much less information correlated values carry.

ITL gaps of one request are correlated (a slow step delays every gap of the batch), so
pooled gaps are not independent samples. ``design_effect`` measures by how much, and
``n / design_effect`` is the effective sample size the bootstrap resamples at.
"""

from __future__ import annotations

import numpy as np

from servetrace.stats.describe import ArrayLike


def design_effect(values: ArrayLike, clusters: ArrayLike) -> float:
    """Kish design effect of the mean of clustered values (at least 1).

    Ratio of the cluster-robust variance of the mean (clusters resampled whole) to the
    variance it would have if every value were independent. ``clusters`` are integer
    codes ``0..k-1`` aligned with ``values``. Use on indicators ``value <= q`` for the
    design effect of a percentile.
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    codes = np.asarray(clusters, dtype=np.int64).ravel()
    if y.size < 2:
        return 1.0
    centred = y - y.mean()
    total = float(np.dot(centred, centred))
    if total <= 0.0:
        return 1.0
    per_cluster = np.bincount(codes, weights=centred)
    k = int(np.count_nonzero(np.bincount(codes)))
    if k < 2:
        return float(y.size)
    robust = k / (k - 1) * float(np.dot(per_cluster, per_cluster))
    return float(min(max(robust / total, 1.0), y.size))
