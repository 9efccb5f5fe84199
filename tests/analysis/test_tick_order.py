"""The packed sort of ticks (``analysis/tick_order``) against the grouping it replaces."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from servetrace.analysis.lifecycle import KEY, with_request_key
from servetrace.analysis.tick_order import grouped_ticks, packed_ticks
from servetrace.dtypes import EVENT_DTYPE
from tests.conftest import MS


def _frame(
    rows: list[tuple[object, str, int, int | None]], id_type: type = pl.Int64
) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "request_id": [r[0] for r in rows],
            "event": [r[1] for r in rows],
            "ts": [r[2] for r in rows],
            "tokens": [r[3] for r in rows],
        },
        schema={"request_id": id_type, "event": pl.String, "ts": pl.Int64, "tokens": pl.Int64},
    )
    return with_request_key(frame.with_columns(pl.col("event").cast(EVENT_DTYPE)))


# Request 7: first_token and a token at 2 ms, then 5 ms (3 tokens). Request 9: one tick.
# Written out of order, with a control row between, which is not a tick.
ROWS = [
    (7, "token", 5 * MS, 3),
    (9, "first_token", 4 * MS, None),
    (7, "arrival", 0, None),
    (7, "token", 2 * MS, None),
    (7, "first_token", 2 * MS, 1),
]


def _agree(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The packed frames, checked equal (values and types) to the grouping's."""
    packed = packed_ticks(frame)
    assert packed is not None
    for got, want in zip(packed, grouped_ticks(frame), strict=True):
        assert_frame_equal(got, want)
    return packed


def test_ticks_and_aggregates_by_hand() -> None:
    packed = packed_ticks(_frame(ROWS))
    assert packed is not None
    ticks, aggregates = packed
    assert ticks.rows() == [
        # _key, ts, tokens (null read as 1), is_first, gap_ns
        (7, 2 * MS, 1, True, None),
        (7, 2 * MS, 1, False, 0),
        (7, 5 * MS, 3, False, 3 * MS),
        (9, 4 * MS, 1, True, None),
    ]
    assert aggregates.rows(named=True) == [
        {
            KEY: 7,
            "ticks": 3,
            "tokens_sum": 5,
            "min_chunk_tokens": 1,
            "first_tick_ns": 2 * MS,
            "last_tick_ns": 5 * MS,
            "itl_max_ns": 3 * MS,
            "n_first": 1,
            "first_is_first": True,
        },
        {
            KEY: 9,
            "ticks": 1,
            "tokens_sum": 1,
            "min_chunk_tokens": 1,
            "first_tick_ns": 4 * MS,
            "last_tick_ns": 4 * MS,
            "itl_max_ns": None,  # one tick: no gap
            "n_first": 1,
            "first_is_first": True,
        },
    ]


def test_equal_to_the_grouping_in_values_and_types() -> None:
    frame = _frame(ROWS)
    _agree(frame)


def test_string_ids_pack_by_their_codes() -> None:
    frame = _frame([(f"r{rid}", kind, ts, tokens) for rid, kind, ts, tokens in ROWS], pl.String)
    packed = packed_ticks(frame)
    assert packed is not None
    assert_frame_equal(packed[0], grouped_ticks(frame)[0])


def test_spans_that_do_not_fit_64_bits_take_the_grouping() -> None:
    # Keys 2^62 apart need 63 bits, the times 2^20 ns: 84 bits in all.
    rows = [(0, "first_token", 0, None), (2**62, "first_token", 2**20, None)]
    assert packed_ticks(_frame(rows)) is None
    ticks, _ = grouped_ticks(_frame(rows))
    assert ticks[KEY].to_list() == [0, 2**62]


@pytest.mark.parametrize(
    ("ts_span_bits", "tokens", "packs"),
    [(22, 1, True), (23, 1, False), (21, 2, True), (22, 2, False)],
)
def test_the_packed_key_may_use_all_64_bits(ts_span_bits: int, tokens: int, packs: bool) -> None:
    # Keys 0 and 2^40 (41 bits), times 0 .. 2^k - 1 (k bits), the first-token bit, and
    # token counts 1 .. tokens (0 or 1 bit): 41 + 22 + 1 + 0 and 41 + 21 + 1 + 1 fit in 64
    # bits exactly; one more bit of time does not.
    last = (1 << ts_span_bits) - 1
    rows = [
        (0, "first_token", 0, None),
        (0, "token", 5, tokens),
        (1 << 40, "first_token", last - 1, None),
        (1 << 40, "token", last, None),
    ]
    packed = packed_ticks(_frame(rows))
    assert (packed is not None) == packs
    if packed is not None:
        _agree(_frame(rows))


def test_tied_ticks_of_different_sizes_keep_the_written_order() -> None:
    # Two tokens of one request at one time, 2 then 1 tokens as written: the packed key
    # would order them 1, 2, so the grouping keeps the log's order instead.
    rows = [(1, "first_token", 0, None), (1, "token", MS, 2), (1, "token", MS, 1)]
    assert packed_ticks(_frame(rows)) is None
    ticks, _ = grouped_ticks(_frame(rows))
    assert ticks["tokens"].to_list() == [1, 2, 1]


def test_tied_ticks_of_equal_size_pack() -> None:
    rows = [(1, "first_token", 0, None), (1, "token", MS, 2), (1, "token", MS, 2)]
    packed = packed_ticks(_frame(rows))
    assert packed is not None
    assert packed[0]["gap_ns"].to_list() == [None, MS, 0]


def test_a_trace_without_ticks_takes_the_grouping() -> None:
    assert packed_ticks(_frame([(1, "arrival", 0, None)])) is None


def test_without_a_tokens_column_every_tick_is_one_token() -> None:
    packed = _agree(_frame(ROWS).drop("tokens"))
    assert packed[0]["tokens"].to_list() == [1, 1, 1, 1]


_row = st.tuples(
    st.integers(-3, 3),  # request id, negative too
    st.sampled_from(["first_token", "token", "token", "arrival"]),
    st.integers(-5, 5),  # times with many ties, negative too
    st.one_of(st.none(), st.integers(1, 3)),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_row, min_size=1, max_size=40))
def test_any_rows_give_the_grouping_s_frames(rows: list[tuple[int, str, int, int | None]]) -> None:
    frame = _frame(rows)
    packed = packed_ticks(frame)
    if packed is None:  # no ticks, or ties of different sizes: the grouping's case
        ticks = frame.filter(pl.col("event") != "arrival").with_columns(
            pl.col("tokens").fill_null(1), (pl.col("event") == "first_token").alias("first")
        )
        ties = ticks.group_by(KEY, "ts", "first").agg(pl.col("tokens").n_unique().alias("n"))
        assert ticks.height == 0 or ties["n"].max() > 1  # type: ignore[operator]
        return
    _agree(frame)


@pytest.mark.parametrize("shift", [0, 2**40, -(2**40)])
def test_offsets_of_keys_and_times_are_restored(shift: int) -> None:
    rows = [(rid + shift, kind, ts + shift, tokens) for rid, kind, ts, tokens in ROWS]
    frame = _frame(rows)
    _agree(frame)


@pytest.mark.parametrize("ts_bits", [62, 61])
def test_a_key_in_the_top_bits_is_restored(ts_bits: int) -> None:
    # Keys 0 and 1 (1 bit) over times 0 .. 2^62 - 1 (62 bits): the key's field is bit 63,
    # whose factor 2^63 wraps to Int64's minimum; over 61 bits of time it is bit 62.
    last = (1 << ts_bits) - 1
    rows = [(0, "first_token", last, None), (1, "first_token", 0, None), (1, "token", last, None)]
    assert _agree(_frame(rows))[0].rows() == [
        (0, last, 1, True, None),
        (1, 0, 1, True, None),
        (1, last, 1, False, last),
    ]
