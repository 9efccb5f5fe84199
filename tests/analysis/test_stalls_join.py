"""The join of inter-token gaps to the steps that cover them: hand-made steps, and the
simulator's steps as the oracle (every gap covered by exactly its own step)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import servetrace
from servetrace.analysis.stalls import Stalls, _members
from servetrace.analysis.stalls_join import join_gaps, prepare_steps
from servetrace.errors import InputError
from servetrace.sim.steps_record import canonical_steps
from servetrace.sources.steps.schema import conform
from tests.analysis.stall_fixtures import injected_run, write_injected
from tests.conftest import events, make_request

STEPS = conform(
    pl.DataFrame(
        {
            "step": [0, 1, 2, 3],
            "ts_start": [0, 10, 20, 40],
            "ts_end": [10, 20, 30, 50],
            "prefill_requests": [0, 1, 0, 0],
            "prefill_tokens": [0, 500, 0, 0],
            "decode_requests": [2, 1, 2, 2],
            "decode_tokens": [2, 1, 2, 2],
            "request_ids": [["a", "b"], ["b", "c"], ["a", "b"], ["a", "b"]],
        }
    )
)


CODES = pl.DataFrame({"_rk": [0, 1, 2], "request_id": ["a", "b", "c"]})


def _join(gaps: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The join as the stall analysis calls it: requests by key, membership as pairs."""
    keyed = gaps.join(CODES, on="request_id", how="left", maintain_order="left")
    return join_gaps(keyed, steps, _members(steps, CODES))


def _gaps(rows: list[tuple[str, str, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "request_id": pl.String,
            "replica": pl.String,
            "gap_start_ns": pl.Int64,
            "gap_end_ns": pl.Int64,
        },
        orient="row",
    ).with_columns(tokens=pl.lit(1, pl.Int64))


def test_covering_steps_and_sums() -> None:
    gaps = _gaps([("a", "", 10, 30), ("a", "", 30, 50), ("b", "", 10, 20)])
    out = _join(gaps, STEPS).select(
        "steps",
        "prefill_tokens",
        "decode_requests",
        "steps_with_prefill",
        "covered_ns",
        "between_ns",
        "first_step",
        "last_step",
        "member_steps",
        "member_ns",
        "unjoined",
    )
    assert out.rows() == [
        # (10, 30]: steps 1 and 2 end in it; a ran only in step 2 (skipped step 1's prefill)
        (2, 500, 3, 1, 20, 0, 1, 2, 1, 10, None),
        # (30, 50]: step 3 (40–50); 30–40 is inside no step
        (1, 0, 2, 0, 10, 10, 3, 3, 1, 10, None),
        (1, 500, 1, 1, 10, 0, 1, 1, 1, 10, None),
    ]


def test_first_step_straddling_the_previous_tick() -> None:
    # (15, 30]: step 1 (10–20) ends in it but started before the tick: 5 ns of it count
    out = _join(_gaps([("a", "", 15, 30)]), STEPS).row(0, named=True)
    assert (out["steps"], out["step_ns"], out["covered_ns"], out["between_ns"]) == (2, 20, 15, 0)


def test_unjoined_reasons() -> None:
    steps = STEPS.with_columns(replica=pl.lit("0"))
    gaps = _gaps(
        [
            ("a", "1", 10, 30),  # replica 1 has no steps
            ("a", "0", 60, 70),  # after the last step
            ("a", "0", 30, 30),  # two ticks at one instant
            ("a", "0", 31, 35),  # inside the span, no step ends in it
        ]
    )
    out = _join(gaps, steps)
    assert out["unjoined"].to_list() == [
        "replica_without_steps",
        "outside_steps",
        "zero_length",
        "no_step_ends_in_gap",
    ]
    assert out["steps"].to_list() == [0, 0, 0, 0]
    assert out["last_step"].null_count() == 4  # no covering step: none named


def test_unknown_composition_stays_unknown() -> None:
    steps = STEPS.with_columns(
        prefill_tokens=pl.Series([0, None, 0, 0], dtype=pl.Int64), request_ids=None
    )
    out = _join(_gaps([("a", "", 10, 30), ("a", "", 30, 50)]), conform(steps))
    assert out["prefill_tokens"].to_list() == [None, 0]
    assert out["member_steps"].to_list() == [None, None]


def test_overlapping_steps_are_named() -> None:
    steps = STEPS.with_columns(ts_start=pl.Series([0, 5, 20, 40], dtype=pl.Int64))
    out = _join(_gaps([("a", "", 0, 30)]), steps).row(0, named=True)
    assert out["overlapping_steps"] == 1
    assert out["covered_ns"] == 30  # clipped to the gap: overlapping steps' time counts once


@pytest.fixture(scope="module")
def oracle() -> tuple[pl.DataFrame, pl.DataFrame]:
    sim = injected_run()
    ticks = sim.events.filter(pl.col("event").is_in(["first_token", "token"]))
    gaps = (
        ticks.sort("request_id", "ts")
        .with_columns(gap_start_ns=pl.col("ts").shift(1).over("request_id"))
        .drop_nulls("gap_start_ns")
        .select(
            "request_id",
            pl.lit("").alias("replica"),
            "gap_start_ns",
            pl.col("ts").alias("gap_end_ns"),
            "tokens",
        )
    )
    return gaps, canonical_steps(sim)


def test_simulator_join_is_exact(oracle: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    gaps, steps = oracle
    codes = gaps.select("request_id").unique(maintain_order=True)
    codes = codes.with_columns(_rk=pl.int_range(pl.len(), dtype=pl.Int64))
    keyed = gaps.join(codes, on="request_id", maintain_order="left")
    out = join_gaps(keyed, steps, _members(steps, codes))
    assert out.height == 10_086
    assert out["unjoined"].null_count() == out.height
    # one token per step: each gap is covered by exactly one step, which ran the request
    assert (out["steps"] == 1).all() and (out["member_steps"] == 1).all()
    own = steps.select(
        pl.col("step").alias("last_step"), "ts_end", pl.col("request_ids").alias("ids")
    )
    checked = out.join(own, on="last_step")
    assert (checked["ts_end"] == checked["gap_end_ns"]).all()
    assert checked.select(pl.col("ids").list.contains(pl.col("request_id")).all()).item()
    assert (out["between_ns"] == 0).all()  # the engine runs steps back to back


def _two_replicas(tmp_path: Path, last_decodes: int) -> Stalls | None:
    """a on replica 0 and b on replica 1 (``t.parquet``), each with three steps of its own
    (``s.parquet``); replica 0's last step decodes ``last_decodes`` tokens."""
    trace = events(
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30, replica="0"),
        make_request("b", admission=0, first=12, ticks=[24, 36], complete=36, replica="1"),
    )
    path, steps_path = tmp_path / "t.parquet", tmp_path / "s.parquet"
    trace.write_parquet(path)
    ms = 1_000_000
    conform(
        pl.DataFrame(
            {
                "replica": ["0", "0", "0", "1", "1", "1"],
                "ts_start": [0, 10 * ms, 20 * ms, 0, 12 * ms, 24 * ms],
                "ts_end": [10 * ms, 20 * ms, 30 * ms, 12 * ms, 24 * ms, 36 * ms],
                "prefill_requests": [1, 0, 0, 1, 0, 1],
                "prefill_tokens": [100, 0, 0, 100, 0, 300],
                "decode_requests": [0, 1, last_decodes, 0, 1, 1],
                "decode_tokens": [0, 1, last_decodes, 0, 1, 1],
            }
        )
    ).write_parquet(steps_path)
    return servetrace.analyze(path, steps=steps_path).stalls


def test_gaps_join_only_their_own_replica(tmp_path: Path) -> None:
    stalls = _two_replicas(tmp_path, last_decodes=1)
    assert stalls is not None and stalls.replicas == 2
    got = stalls.gaps.sort("request_id", "gap_start_ns").select(
        "request_id", "replica", "steps", "prefill_tokens"
    )
    # b's (12, 24] would also hold replica 0's step ending at 20 ms if replicas mixed
    assert got.rows() == [
        ("a", "0", 1, 0),
        ("a", "0", 1, 0),
        ("b", "1", 1, 0),
        ("b", "1", 1, 300),
    ]
    assert stalls.fit.unavailable == "only 3 decode-only steps (need 10)"
    unnamed = tmp_path / "unnamed.parquet"
    pl.read_parquet(tmp_path / "t.parquet").drop("replica").write_parquet(unnamed)
    with pytest.raises(InputError, match="rule replica_unknown"):
        servetrace.analyze(unnamed, steps=tmp_path / "s.parquet")


def test_overlapping_steps_are_said_once(tmp_path: Path) -> None:
    trace = events(make_request("a", admission=0, first=10, ticks=[20, 30], complete=30))
    path, steps_path = tmp_path / "t.parquet", tmp_path / "s.parquet"
    trace.write_parquet(path)
    ms = 1_000_000
    conform(
        pl.DataFrame(
            {
                "ts_start": [0, 5 * ms, 20 * ms],  # the second starts before the first ends
                "ts_end": [10 * ms, 20 * ms, 30 * ms],
                "prefill_requests": [1, 0, 0],
                "prefill_tokens": [100, 0, 0],
                "decode_requests": [0, 1, 1],
                "decode_tokens": [0, 1, 1],
            }
        )
    ).write_parquet(steps_path)
    stalls = servetrace.analyze(path, steps=steps_path).stalls
    assert stalls is not None
    assert [(f.name, f.steps) for f in stalls.findings if "overlap" in f.name] == [
        ("overlapping_steps", 1)
    ]
    assert not [note for note in stalls.notes if "overlapping" in note]


def test_every_engine_joins_the_same_gaps(tmp_path: Path) -> None:
    """The in-memory engine keeps its sorted ticks under --steps; the batched one makes
    them again from the events (keys renumbered per batch): one stall frame."""
    trace, steps = write_injected(tmp_path)
    kept = servetrace.analyze(trace, steps=steps, streaming=False).stalls
    again = servetrace.analyze(trace, steps=steps, streaming=True, batch_rows=1000).stalls
    assert kept is not None and again is not None
    assert kept.gaps.height == 10_086
    assert kept.gaps.equals(again.gaps)
    assert kept.findings == again.findings


def test_findings_count_each_replica_on_its_own(tmp_path: Path) -> None:
    stalls = _two_replicas(tmp_path, last_decodes=2)
    assert stalls is not None
    # Replica 0's last step decodes 2 tokens where a alone ticks (1 token) at 30 ms; its
    # batch of 2, and replica 1's last (1 prefill + 1 decode), each hold more than the one
    # request running on their replica (mixing the replicas, a and b both run at 25 ms).
    assert [(f.name, f.steps) for f in stalls.findings] == [
        ("ticks_below_decode_tokens", 1),
        ("batch_above_running", 2),
    ]


def test_steps_of_interleaved_replicas_are_sorted_and_overlaps_kept_per_replica() -> None:
    steps = conform(
        pl.DataFrame(
            {
                "replica": ["1", "0", "1", "0"],
                "ts_start": [0, 0, 5, 20],
                "ts_end": [10, 30, 20, 40],  # 1's second starts before its first ends
                "prefill_requests": [0] * 4,
                "prefill_tokens": [0] * 4,
                "decode_requests": [1] * 4,
                "decode_tokens": [1] * 4,
            }
        )
    )
    out = prepare_steps(steps)
    assert out.select("replica", "ts_end", "_row", "overlaps").rows() == [
        ("0", 30, 1, False),
        ("0", 40, 3, True),  # starts at 20, before 0's step ending at 30
        ("1", 10, 0, False),
        ("1", 20, 2, True),
    ]
    in_order = prepare_steps(steps.sort("replica", "ts_end"))
    assert in_order["overlaps"].to_list() == [False, True, False, True]


def test_ticks_that_end_no_gap_count_at_step_ends(tmp_path: Path) -> None:
    """The gaps' ticks are read off the join's search; the others (b never completes, so
    it has no gap) are searched on their own, and count the same."""
    trace = events(
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30),
        make_request("b", admission=0, first=10, ticks=[20]),
    )
    path, steps_path = tmp_path / "t.parquet", tmp_path / "s.parquet"
    trace.write_parquet(path)
    ms = 1_000_000
    conform(
        pl.DataFrame(
            {
                "ts_start": [0, 10 * ms, 20 * ms],
                "ts_end": [10 * ms, 20 * ms, 30 * ms],
                "prefill_requests": [2, 0, 0],
                "prefill_tokens": [200, 0, 0],
                "decode_requests": [0, 2, 1],
                "decode_tokens": [0, 1, 1],  # two tokens at 20 ms (a's and b's), one decoded
            }
        )
    ).write_parquet(steps_path)
    stalls = servetrace.analyze(path, steps=steps_path).stalls
    assert stalls is not None and stalls.gap_count == 2  # a's two: b has none
    assert [(f.name, f.steps) for f in stalls.findings if f.name.startswith("ticks")] == [
        ("ticks_above_decode_tokens", 1)
    ]
