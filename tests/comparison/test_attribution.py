"""Attribution of an e2e difference: hand-computed decomposition of paired requests."""

from __future__ import annotations

import polars as pl
import pytest

from servetrace.comparison.attribution import decompose
from tests.conftest import MS


def _requests(queue: list[int], prefill: list[int], decode: list[int], tail: list[int]):
    """Per-request frame in ns from per-component times in ms; e2e is their sum."""
    frame = pl.DataFrame(
        {
            "queue_wait_ns": [q * MS for q in queue],
            "prefill_ns": [p * MS for p in prefill],
            "decode_ns": [d * MS for d in decode],
            "delivery_tail_ns": [t * MS for t in tail],
        }
    )
    return frame.with_columns(
        (pl.col("queue_wait_ns") + pl.col("prefill_ns")).alias("ttft_ns"),
        pl.sum_horizontal(pl.all()).alias("e2e_ns"),
    )


def test_decompose_means_add_up_and_shares_are_parts_of_the_e2e_delta() -> None:
    # baseline e2e 115, 125 ms (mean 120); candidate 91, 91 ms (mean 91): delta −29 ms
    base = _requests([10, 20], [5, 5], [100, 100], [0, 0])
    cand = _requests([0, 0], [10, 10], [80, 80], [1, 1])
    table = {row["component"]: row for row in decompose(base, cand).iter_rows(named=True)}
    assert list(table) == ["queue_wait", "prefill", "decode", "delivery_tail", "residual", "e2e"]
    expected = {  # component: (baseline mean, candidate mean, delta, share of −29)
        "queue_wait": (15.0, 0.0, -15.0, 15 / 29),
        "prefill": (5.0, 10.0, 5.0, -5 / 29),
        "decode": (100.0, 80.0, -20.0, 20 / 29),
        "delivery_tail": (0.0, 1.0, 1.0, -1 / 29),
        "residual": (0.0, 0.0, 0.0, 0.0),
        "e2e": (120.0, 91.0, -29.0, 1.0),
    }
    for name, (mb, mc, delta, share) in expected.items():
        row = table[name]
        assert row["baseline_mean_ns"] == pytest.approx(mb * MS), name
        assert row["candidate_mean_ns"] == pytest.approx(mc * MS), name
        assert row["delta_mean_ns"] == pytest.approx(delta * MS), name
        assert row["share"] == pytest.approx(share), name
    parts = ("queue_wait", "prefill", "decode", "delivery_tail")
    assert sum(table[n]["share"] for n in parts) == pytest.approx(1.0)
    # medians: baseline queue 15, e2e 120; candidate queue 0, e2e 91
    assert table["queue_wait"]["delta_p50_ns"] == pytest.approx(-15.0 * MS)
    assert table["e2e"]["delta_p50_ns"] == pytest.approx(-29.0 * MS)


def test_decompose_share_is_unknown_when_e2e_does_not_change() -> None:
    same = _requests([10], [5], [100], [0])
    shifted = _requests([5], [10], [100], [0])  # −5 ms queue, +5 ms prefill: e2e equal
    table = {row["component"]: row for row in decompose(same, shifted).iter_rows(named=True)}
    assert table["queue_wait"]["delta_mean_ns"] == pytest.approx(-5.0 * MS)
    assert table["queue_wait"]["share"] is None and table["e2e"]["share"] is None


def test_length_buckets_are_the_same_bits_every_time() -> None:
    """A mean summed across threads in whatever order they finish changes its last digit
    from run to run; the buckets' means must not, or two runs of compare differ."""
    import numpy as np

    from servetrace.comparison.attribution import length_buckets

    rng = np.random.default_rng(7)
    n = 200_000

    def side() -> pl.DataFrame:
        return pl.DataFrame(
            {
                "ttft_ns": rng.integers(1, 10**9, n),
                "itl_mean_ns": rng.random(n) * 1e8,
                "tpot_ns": rng.random(n) * 1e8,
                "e2e_ns": rng.integers(1, 10**10, n),
                "prompt_tokens": rng.integers(1, 4000, n),
                "output_tokens": rng.integers(1, 1000, n),
            }
        )

    base, cand = side(), side()
    first = length_buckets(base, cand)
    for _ in range(15):
        assert length_buckets(base, cand).equals(first)
