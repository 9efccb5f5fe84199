"""Kish design effect of clustered values, hand-computed (mutmut left its edges alive)."""

from __future__ import annotations

import pytest

from servetrace.stats.clusters import design_effect


def test_fewer_than_two_values_are_independent() -> None:
    assert design_effect([5.0], [0]) == 1.0
    assert design_effect([], []) == 1.0


def test_one_cluster_holds_every_value() -> None:
    """Two values in one cluster: effectively one observation, design effect n = 2."""
    assert design_effect([0.0, 1.0], [0, 0]) == 2.0


def test_clusters_that_differ_inflate_the_variance() -> None:
    """[0, 0 | 1, 1]: centred −.5 −.5 | .5 .5, total 1; cluster sums −1, 1; robust
    2/(2 − 1) · (1 + 1) = 4; ratio 4, capped at n = 4."""
    assert design_effect([0, 0, 1, 1], [0, 0, 1, 1]) == pytest.approx(4.0)


def test_clusters_alike_are_no_worse_than_independent() -> None:
    """[0, 1 | 0, 1]: cluster sums 0, 0: the robust variance is 0, floored at 1."""
    assert design_effect([0, 1, 0, 1], [0, 0, 1, 1]) == 1.0
    assert design_effect([3.0, 3.0, 3.0], [0, 1, 2]) == 1.0  # no variance at all
