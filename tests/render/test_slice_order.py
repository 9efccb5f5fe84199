"""The timeline's and the waterfall's phase rows follow the order of the requests they
are given, never the requests' internal keys: string ids' keys are category codes that
differ from one process to the next, and the same trace must give the same file."""

from __future__ import annotations

import polars as pl

from servetrace.analysis.lifecycle import KEY
from servetrace.render.slices import phase_slices, requeued_slices

MS = 1_000_000


def test_phase_rows_follow_the_given_request_order_not_the_keys() -> None:
    # Two requests whose keys run against the order they are drawn in.
    bounds = pl.DataFrame(
        {
            KEY: [7, 3],
            "request_id": ["a", "b"],
            "outcome": ["completed", "completed"],
            "cancelled_in": [None, None],
            "start": [0, 5 * MS],
            "end": [40 * MS, 30 * MS],
            "admitted": [2 * MS, 6 * MS],
            "first": [10 * MS, 12 * MS],
            "last": [35 * MS, 25 * MS],
        },
        schema_overrides={"cancelled_in": pl.String},
    )
    rows = phase_slices(bounds, has_admissions=True)
    assert rows[KEY].to_list() == [7, 7, 7, 7, 3, 3, 3, 3]
    assert rows["name"].to_list() == ["queued", "prefill", "decode", "delivery_tail"] * 2
    assert rows["lo"].to_list()[:4] == [0, 2 * MS, 10 * MS, 35 * MS]


def test_requeued_rows_follow_the_given_request_order_not_the_keys() -> None:
    control = pl.DataFrame(
        {
            "request_id": ["a", "a", "b", "b"],
            "event": ["preemption", "admission", "preemption", "admission"],
            "ts": [10 * MS, 14 * MS, 20 * MS, 21 * MS],
        }
    )
    keys = pl.DataFrame({KEY: [9, 1], "request_id": ["a", "b"]})
    rows = requeued_slices(control, keys, trace_end=100 * MS)
    assert rows.rows() == [(9, 10 * MS, 14 * MS), (1, 20 * MS, 21 * MS)]
