"""Every group's concurrency from flat arrays equals ``concurrency_by`` (the Polars
reference: join, group-by, windows), figure for figure and key for key."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from servetrace.analysis.concurrency import concurrency_by
from servetrace.analysis.concurrency_groups import concurrency_of_groups
from servetrace.analysis.lifecycle import KEY

CODE = "_code"


def _requests(groups: list[int]) -> pl.DataFrame:
    return pl.DataFrame({KEY: np.arange(len(groups)) * 3 + 1, CODE: groups})


def test_hand_computed_groups_equal_the_reference() -> None:
    """Group 0: request queued at 0, running at 10, done at 40, span 0-40.
    Group 1: two requests in the system 100-110, one until 130, span cut at 120.
    Group 2: a span of no length; group 3: no span; key 99 belongs to no group."""
    requests = _requests([0, 1, 1, 2, 3])
    keys = requests[KEY].to_list()
    rows = [
        (keys[0], 0, 1, 0, 1),
        (keys[0], 10, -1, 1, 0),
        (keys[0], 40, 0, -1, -1),
        (keys[1], 100, 0, 1, 1),
        (keys[2], 100, 0, 1, 1),
        (keys[2], 110, 0, -1, -1),
        (keys[1], 130, 0, -1, -1),
        (keys[3], 7, 0, 1, 1),
        (keys[4], 7, 0, 1, 1),
        (99, 5, 1, 1, 1),
    ]
    transitions = pl.DataFrame(
        rows, schema=[KEY, "ts", "d_queued", "d_running", "d_in_system"], orient="row"
    )
    spans = {
        "a": {"start": 0, "end": 40},
        "b": {"start": 100, "end": 120},
        "c": {"start": 7, "end": 7},
    }
    admissions = {"a": True, "b": False, "c": True, "d": True}
    got = concurrency_of_groups(transitions, requests, list("abcd"), spans, admissions, CODE)
    assert got["a"] == {
        "queued_mean": 10 / 40,
        "queued_peak": 1,
        "running_mean": 30 / 40,
        "running_peak": 1,
        "in_system_mean": 1.0,
        "in_system_peak": 1,
    }
    # b: 2 in the system 100-110, 1 for 110-120: 30 / 20; no admissions: in_system only
    assert got["b"]["in_system_mean"] == 30 / 20 and got["b"]["in_system_peak"] == 2
    assert got["b"]["running_mean"] is None and got["b"]["queued_peak"] is None
    assert set(got) == {"a", "b"}  # c: no length; d: no span
    joined = transitions.join(
        requests.with_columns(pl.col(CODE).replace_strict(range(4), list("abcd"))),
        on=KEY,
        how="inner",
    )
    assert got == concurrency_by(joined, CODE, spans, admissions)


@pytest.mark.parametrize("wide", [False, True], ids=["packed key", "lexsort"])
def test_random_groups_equal_the_reference(wide: bool) -> None:
    rng = np.random.default_rng(17 + wide)
    n_requests, n_groups = 900, 37
    groups = rng.integers(0, n_groups, n_requests).tolist()
    requests = _requests(groups)
    key_of = requests[KEY].to_numpy()
    n = 6000
    owner = rng.integers(0, n_requests, n)
    scale = 2**58 if wide else 10**12  # 2^58-wide times leave no room for 37 codes
    stamps = rng.integers(0, 50, n) * (scale // 50)  # few distinct times: many ties
    deltas = rng.integers(-2, 3, (n, 3))
    transitions = pl.DataFrame(
        {
            KEY: np.where(rng.random(n) < 0.02, 10**9, key_of[owner]),  # 2 % in no group
            "ts": stamps,
            "d_queued": deltas[:, 0],
            "d_running": deltas[:, 1],
            "d_in_system": deltas[:, 2],
        }
    )
    values = [f"g{i:02d}" for i in range(n_groups)]
    spans = {}
    for i, value in enumerate(values):
        if i % 11 == 5:
            continue  # no span
        low, high = sorted(rng.integers(0, scale, 2).tolist())
        spans[value] = {"start": low, "end": high if i % 13 else low}  # some of no length
    admissions = {v: i % 3 != 0 for i, v in enumerate(values)}
    got = concurrency_of_groups(transitions, requests, values, spans, admissions, CODE)
    joined = transitions.join(
        requests.with_columns(pl.col(CODE).replace_strict(range(n_groups), values)),
        on=KEY,
        how="inner",
    )
    want = concurrency_by(joined, CODE, spans, admissions)
    assert len(want) > n_groups // 2
    assert got.keys() == want.keys()
    for value in want:
        assert list(got[value]) == list(want[value])  # the same keys in the same order
        if wide:  # level · held beyond 2^53: sums in another order, to the last bits
            for name, figure in want[value].items():
                assert got[value][name] == (
                    figure if figure is None else pytest.approx(figure, rel=1e-12)
                ), (value, name)
        else:  # whole-number products below 2^53: exact sums, the same bits
            assert got[value] == want[value], value
