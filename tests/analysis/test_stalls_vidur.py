"""The join and the attribution on Vidur's own steps (an independent simulator): each
gap's covering steps against the batch membership Vidur recorded (the ground truth)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import servetrace
from servetrace.analysis.stalls import Stalls

VIDUR = Path(__file__).parent.parent / "data" / "vidur"
RUN = "synthetic_arxiv_poisson_qps2.0_n1000__{}"


def _stalls(policy: str) -> Stalls:
    name = RUN.format(policy)
    analysis = servetrace.analyze(
        VIDUR / f"{name}.parquet", steps=VIDUR / "steps" / f"{name}_batches.csv.gz"
    )
    assert analysis.stalls is not None
    return analysis.stalls


def _truth(policy: str) -> pl.DataFrame:
    """Per request, the batch of each of its output ticks, in order: a batch in which the
    request's prompt was done afterwards emitted one of its tokens."""
    members = pl.read_parquet(VIDUR / "steps" / f"{RUN.format(policy)}_iterations.parquet")
    return (
        members.filter(pl.col("prefill_done_after") == 1)
        .sort("request_id", "batch_id")
        .select(
            pl.col("request_id").cast(pl.String),
            pl.col("batch_id").cast(pl.Int64),
            pl.int_range(pl.len(), dtype=pl.Int64).over("request_id").alias("tick"),
        )
    )


@pytest.fixture(scope="module", params=["vllm", "sarathi"])
def run(request: pytest.FixtureRequest) -> tuple[str, Stalls]:
    return request.param, _stalls(request.param)


def test_join_agrees_with_the_batch_membership(run: tuple[str, Stalls]) -> None:
    policy, stalls = run
    gaps = stalls.gaps.with_columns(
        tick=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("request_id")
    )
    assert gaps.height == 296_602 and stalls.unjoined == {}
    truth = _truth(policy)
    checked = gaps.join(truth, on=["request_id", "tick"], how="left").join(
        truth.rename({"batch_id": "previous"}).with_columns(pl.col("tick") + 1),
        on=["request_id", "tick"],
        how="left",
    )
    # the step that emitted each tick is the batch Vidur says produced it...
    assert (checked["last_step"] == checked["batch_id"]).all()
    # ...the covering steps are every batch after the one of the previous tick...
    assert (checked["steps"] == checked["batch_id"] - checked["previous"]).all()
    # ...and the request ran in exactly one of them
    assert (checked["member_steps"] == 1).all()


def test_sarathi_stalls_are_shared_prefill_chunks() -> None:
    stalls = _stalls("sarathi")
    overall, tail = stalls.shares(), stalls.tail_shares()
    assert overall["prefill_share"] == pytest.approx(0.69512, abs=1e-5)
    # chunked prefill never leaves a decoder out
    assert overall["skipped_share"] == overall["paused_for_prefill_share"] == 0.0
    assert (tail["tail_gaps"], tail["prefill_fraction"]) == (3_000, 1.0)
    assert tail["prefill_share"] == pytest.approx(0.68370, abs=1e-5)
    assert stalls.fit.n == 10_241 and stalls.fit.usual_batch == 17.0
    assert stalls.findings == ()


def test_vllm_stalls_are_decoders_waiting_out_prefill_steps() -> None:
    stalls = _stalls("vllm")
    tail = stalls.tail_shares()
    # prefill-first: a decoder sits out each prefill batch, which carries the work: the
    # time is the prefill's (paused for it), not a generic skip
    assert (tail["tail_gaps"], tail["prefill_fraction"]) == (2_986, 1.0)
    assert tail["paused_for_prefill_share"] == pytest.approx(0.98960, abs=1e-5)
    assert tail["skipped_share"] == 0.0
    worst = stalls.worst(1).row(0, named=True)
    assert worst["cause"] == "paused_for_prefill"
    assert (worst["steps"], worst["first_step"], worst["last_step"]) == (13, 89, 101)
    assert worst["prefill_tokens"] == 32_151
    # two recompute prefills after preemption emit a token no decode step accounts for
    assert [(f.name, f.steps) for f in stalls.findings] == [("ticks_above_decode_tokens", 2)]
