"""The decode-step baseline and the split of each gap's excess by cause: hand-made steps
with hand-computed parts, and the simulator's run with injected long prefills."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import servetrace
from servetrace.analysis.result import Analysis
from servetrace.analysis.stalls_attribution import (
    attribute,
    fit_baseline,
    with_step_baseline,
)
from servetrace.api._stalls import with_stalls
from servetrace.sources.steps.schema import conform
from tests.analysis.stall_fixtures import CONFIG, LONG_IDS, write_injected
from tests.analysis.test_stalls_join import _join

# Ten decode-only steps back to back (batch 2 → 12 µs, batch 4 → 14 µs: 10 µs + 1 µs per
# request), then P: a 500-token prefill beside 4 decoders (40 µs), S: a step without "a",
# 5 µs of nothing, T: a decode step with "a".
_FIT = [(i * 12_000, (i + 1) * 12_000, 0, 2, ["x"]) for i in range(5)] + [
    (60_000 + i * 14_000, 60_000 + (i + 1) * 14_000, 0, 4, ["x"]) for i in range(5)
]
_ROWS = [
    *_FIT,
    (200_000, 240_000, 500, 4, ["a", "p"]),
    (240_000, 252_000, 0, 2, ["x", "y"]),
    (257_000, 271_000, 0, 4, ["a", "x"]),
]


def _steps(rows: list[tuple[int, int, int, int, list[str]]]) -> pl.DataFrame:
    return conform(
        pl.DataFrame(
            {
                "step": list(range(len(rows))),
                "ts_start": [r[0] for r in rows],
                "ts_end": [r[1] for r in rows],
                "prefill_requests": [1 if r[2] else 0 for r in rows],
                "prefill_tokens": [r[2] for r in rows],
                "decode_requests": [r[3] for r in rows],
                "decode_tokens": [r[3] for r in rows],
                "request_ids": [r[4] for r in rows],
            }
        )
    )


HAND = _steps(_ROWS)
PARTS = ("excess_ns", "prefill_ns", "skipped_ns", "between_steps_ns", "large_batch_ns", "other_ns")


def test_hand_made_parts_add_up() -> None:
    fit = fit_baseline(HAND)
    assert (fit.n, fit.usual_batch, fit.per_kv_token_ns) == (12, 3.0, None)
    assert fit.intercept_ns == pytest.approx(10_000)
    assert fit.per_request_ns == pytest.approx(1_000)
    assert fit.residual_ns == pytest.approx(0, abs=1e-6)
    gaps = pl.DataFrame(
        {
            "request_id": ["a", "a"],
            "replica": ["", ""],
            "gap_start_ns": [200_000, 240_000],
            "gap_end_ns": [240_000, 271_000],
            "tokens": [1, 1],
        }
    )
    out = attribute(_join(gaps, with_step_baseline(HAND, fit)), fit)
    # usual step: 13 µs. Gap 1 (40 µs in P): its batch of 4 costs 14 µs decode-only (+1 µs
    # large batch), the other 26 µs are P's prefill. Gap 2 (31 µs): 12 µs in S without
    # "a", 5 µs in no step, T at batch 4 (+1 µs).
    assert out.select(*PARTS, "baseline_ns", "cause").rows() == [
        (27_000, 26_000, 0, 0, 1_000, 0, 13_000, "prefill"),
        (18_000, 0, 12_000, 5_000, 1_000, 0, 13_000, "skipped"),
    ]


@pytest.mark.parametrize("membership", [True, False])
def test_a_prefill_only_step_sat_out_is_paused_for_prefill(membership: bool) -> None:
    # R: a 300-token prompt prefilled alone (no decoder in it, 30 µs), which "a" sits out;
    # then T: "a" decodes at batch 4 (14 µs).
    steps = _steps([*_FIT, (200_000, 230_000, 300, 0, ["p"]), (230_000, 244_000, 0, 4, ["a", "x"])])
    if not membership:
        steps = conform(steps.drop("request_ids"))
    fit = fit_baseline(steps)
    gaps = pl.DataFrame(
        {
            "request_id": ["a"],
            "replica": [""],
            "gap_start_ns": [200_000],
            "gap_end_ns": [244_000],
            "tokens": [1],
        }
    )
    out = attribute(_join(gaps, with_step_baseline(steps, fit)), fit)
    # usual step 14 µs (median batch 4, as T's): the excess is R's 30 µs, the prefill "a"
    # waited for, none of it a generic skip
    assert out.select(*PARTS, "paused_for_prefill_ns", "cause").rows() == [
        (30_000, 0, 0, 0, 0, 0, 30_000, "paused_for_prefill")
    ]


def test_no_baseline_without_enough_decode_steps() -> None:
    fit = fit_baseline(HAND.tail(3))
    assert fit.unavailable == "only 2 decode-only steps (need 10)"
    gaps = pl.DataFrame(
        {
            "request_id": ["a"],
            "replica": [""],
            "gap_start_ns": [240_000],
            "gap_end_ns": [271_000],
            "tokens": [1],
        }
    )
    out = attribute(_join(gaps, with_step_baseline(HAND, fit)), fit)
    assert out["excess_ns"].to_list() == [None] and out["cause"].to_list() == [None]
    assert out["steps"].to_list() == [2]  # the join itself needs no baseline


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, Path, Path]:
    trace, steps = write_injected(tmp_path_factory.mktemp("injected"))
    return with_stalls(servetrace.analyze(trace), steps), trace, steps


def test_fit_recovers_the_simulator_step_model(injected: tuple[Analysis, Path, Path]) -> None:
    fit = injected[0].stalls.fit  # type: ignore[union-attr]
    assert (fit.n, fit.usual_batch, fit.usual_kv_tokens) == (228, 22.0, 2180.5)
    assert fit.intercept_ns == pytest.approx(CONFIG.step_base_ns, abs=1e-3)
    assert fit.per_request_ns == pytest.approx(CONFIG.step_decode_seq_ns, abs=1e-6)
    assert fit.per_kv_token_ns == pytest.approx(CONFIG.step_context_token_ns, abs=1e-6)
    assert fit.residual_ns == pytest.approx(0, abs=1e-3)


def test_injected_prefills_are_the_cause_of_the_tail(
    injected: tuple[Analysis, Path, Path],
) -> None:
    analysis, _, steps_path = injected
    stalls = analysis.stalls
    assert stalls is not None
    assert stalls.gaps.height == stalls.joined.height == 10_086
    assert stalls.unjoined == {}
    overall = stalls.shares()
    assert overall["gaps"] == 8_648
    assert overall["prefill_share"] == pytest.approx(0.75958, abs=1e-5)
    assert overall["large_batch_share"] == pytest.approx(0.24042, abs=1e-5)
    assert overall["skipped_share"] == overall["between_steps_share"] == 0.0
    tail = stalls.tail_shares()
    assert (tail["threshold_ns"], tail["tail_gaps"], tail["prefill_fraction"]) == (
        53_974_500,
        120,
        1.0,
    )
    assert tail["prefill_share"] == pytest.approx(0.92441, abs=1e-5)
    assert stalls.tail["cause"].unique().to_list() == ["prefill"]
    # ...and the prefill in each tail gap's step is an injected long prompt's
    steps = pl.read_parquet(steps_path).select(pl.col("step").alias("last_step"), "request_ids")
    carried = stalls.tail.join(steps, on="last_step")["request_ids"]
    long = carried.list.eval(pl.element().is_in(list(LONG_IDS))).list.any()
    assert long.all()
    worst = stalls.worst(1).row(0, named=True)
    assert (worst["request_id"], worst["gap_ns"], worst["excess_ns"]) == (
        "long-1",
        54_479_500,
        41_734_375,
    )
    per = stalls.per_request()
    assert (per["requests_with_tail_stalls"], per["max_tail_stalls"]) == (68, 3)


def test_membership_is_not_needed_for_one_token_steps(
    injected: tuple[Analysis, Path, Path], tmp_path: Path
) -> None:
    analysis, trace, steps_path = injected
    bare = tmp_path / "bare.parquet"
    pl.read_parquet(steps_path).drop("request_ids").write_parquet(bare)
    without = with_stalls(servetrace.analyze(trace), bare).stalls
    assert without is not None and analysis.stalls is not None
    assert without.gaps["member_steps"].null_count() == without.gaps.height
    assert without.gaps["excess_ns"].equals(analysis.stalls.gaps["excess_ns"])
