"""The what-if model against exact ground truth: the simulator's own runs of each policy,
and Vidur's runs of the same 1000 requests under vLLM-style and Sarathi scheduling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from servetrace.analysis.memory import analyze_events
from servetrace.errors import InputError, UsageError
from servetrace.sim.config import EngineConfig
from servetrace.sim.simulate import simulate
from servetrace.sim.synthetic import synthetic_workload
from servetrace.whatif.calibration import Calibration
from servetrace.whatif.model import calibrate, whatif
from servetrace.whatif.replay import METRICS, STATS, agreement
from servetrace.whatif.steps import implied_steps

VIDUR = Path(__file__).parents[1] / "data" / "vidur"
MS = 1_000_000


@pytest.fixture(scope="module")
def fcfs() -> tuple[pl.DataFrame, pl.DataFrame]:
    workload = synthetic_workload(n=400, rate_per_s=5.0, seed=3)
    return workload, simulate(workload, EngineConfig(policy="fcfs"))


def assert_within_band(predicted: Any, truth: Any) -> None:
    """Every statistic of ``predicted`` lands within its band of the simulator's own run."""
    versus = agreement(truth, predicted.analysis)
    for metric in METRICS:
        for stat in STATS:
            figure = predicted.figures[metric][stat]
            real = versus[metric]["stats"][stat]["real_ns"]
            assert abs(figure["predicted_ns"] - real) <= (figure["band_ns"] or 0) + 1e-6 * real


def test_the_implied_steps_are_the_simulators_own(fcfs: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    from servetrace.sim.simulate import run_simulation

    workload, events = fcfs
    truth = run_simulation(workload, EngineConfig(policy="fcfs")).steps
    implied = implied_steps(events, "sim")
    assert implied.height == truth.height
    assert implied["ts_end"].to_list() == truth["end_ns"].to_list()
    assert implied["ts_start"].to_list() == truth["start_ns"].to_list()
    assert implied["prefill_tokens"].to_list() == truth["prefill_tokens"].to_list()
    assert implied["decode_requests"].to_list() == truth["decode_seqs"].to_list()


def test_calibration_recovers_the_simulators_costs(fcfs: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    _, events = fcfs
    model = calibrate(analyze_events(events), events)
    # EngineConfig's defaults: 10 ms a step, 80 µs a prompt token, 0.1 ms a decoding
    # request, 250 ns a context token.
    assert model.costs == pytest.approx(
        {
            "base_ns": 10e6,
            "prefill_token_ns": 80e3,
            "decode_seq_ns": 100e3,
            "context_token_ns": 250,
        },
        rel=1e-9,
    )
    assert model.policy == "fcfs"
    assert model.limits["kv_tokens"].value is None  # never preempted: no budget known
    assert model.limits["max_running"].value is None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("policy", "limits"), [("chunked", {"max_batch_tokens": 512}), ("sjf", {})]
)
def test_prediction_lands_on_the_simulators_run_of_that_policy(
    fcfs: tuple[pl.DataFrame, pl.DataFrame], policy: str, limits: dict[str, int]
) -> None:
    workload, events = fcfs
    result = whatif(analyze_events(events), events, [(policy, limits)], extrapolate=True)
    assert result.trusted and result.missed == ()
    truth = analyze_events(
        simulate(
            workload,
            EngineConfig(policy=policy, max_batch_tokens=limits.get("max_batch_tokens", 3936)),
        )
    )
    predicted = result.predictions[0]
    assert_within_band(predicted, truth)


@pytest.mark.slow
def test_chunked_prefill_from_a_prefill_first_trace_is_an_extrapolation(
    fcfs: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    _, events = fcfs
    with pytest.raises(UsageError, match="extrapolated"):
        whatif(analyze_events(events), events, [("chunked", {"max_batch_tokens": 512})])
    with pytest.raises(UsageError, match="beyond the calibrated range"):
        whatif(analyze_events(events), events, [("fcfs", {"max_running": 10_000})])


def test_a_replay_that_misses_predicts_nothing(fcfs: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    _, events = fcfs
    model = calibrate(analyze_events(events), events)
    slow = Calibration(**{**model.__dict__, "costs": {k: 2 * v for k, v in model.costs.items()}})
    result = whatif(analyze_events(events), events, [("sjf", {})], calibration=slow)
    assert not result.trusted and result.predictions == ()
    assert "e2e p50" in result.missed
    forced = whatif(analyze_events(events), events, [("sjf", {})], calibration=slow, force=True)
    assert len(forced.predictions) == 1


def test_a_client_trace_has_no_engine_steps_to_fit() -> None:
    events = pl.DataFrame(
        {
            "request_id": ["a", "a", "a"],
            "event": ["arrival", "first_token", "completion"],
            "ts": [0, 10, 20],
            "prompt_tokens": [5, None, None],
            "output_tokens": [None, None, 1],
        }
    )
    with pytest.raises(InputError, match="no admission events"):
        implied_steps(events, "client.parquet")


def test_calibration_file_round_trips(
    fcfs: tuple[pl.DataFrame, pl.DataFrame], tmp_path: Path
) -> None:
    _, events = fcfs
    model = calibrate(analyze_events(events), events)
    path = tmp_path / "model.json"
    path.write_text(model.to_json())
    assert Calibration.read(path) == model
    path.write_text(model.to_json().replace('"version": 1', '"version": 9'))
    with pytest.raises(InputError, match="version 9"):
        Calibration.read(path)


def _vidur(policy: str) -> pl.DataFrame:
    return pl.read_parquet(
        VIDUR / f"synthetic_arxiv_poisson_qps2.0_n1000__{policy}.parquet"
    ).with_columns(pl.col("request_id").cast(pl.String))


# The statistics the README reports for Vidur, with their relative errors.
README_STATS = [
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("queue_wait", "p50"),
    ("e2e", "p50"),
    ("e2e", "p99"),
]


def _readme_errors(agreed: dict[str, dict[str, Any]]) -> dict[tuple[str, str], Any]:
    return {(m, s): agreed[m]["stats"][s]["relative_error"] for m, s in README_STATS}


@pytest.mark.slow
def test_vidur_vllm_replays_within_tolerance_and_sarathi_is_missed_as_the_readme_says() -> None:
    events = _vidur("vllm")
    real = analyze_events(events)
    result = whatif(
        real,
        events,
        [("chunked", {"max_batch_tokens": 512})],
        own_limits={"max_running": 128},  # Vidur's batch cap (its README)
        extrapolate=True,
    )
    assert result.trusted
    error = _readme_errors(result.validation)
    assert error == pytest.approx(
        {
            ("ttft", "p50"): -0.0063,
            ("ttft", "p99"): -0.0185,
            ("queue_wait", "p50"): -0.0465,
            ("e2e", "p50"): -0.0017,
            ("e2e", "p99"): 0.0164,
        },
        abs=5e-4,
    )
    # Against Vidur's own Sarathi run: the additive step model prices a mixed step as the
    # sum of its parts, so chunked prefill comes out far slower than Vidur has it.
    versus = agreement(analyze_events(_vidur("sarathi")), result.predictions[0].analysis)
    missed = _readme_errors(versus)
    assert missed == pytest.approx(
        {
            ("ttft", "p50"): 0.732,
            ("ttft", "p99"): 1.019,
            ("queue_wait", "p50"): 3.555,
            ("e2e", "p50"): 0.429,
            ("e2e", "p99"): 0.356,
        },
        abs=5e-3,
    )


@pytest.mark.slow
def test_vidur_step_records_calibrate_like_the_implied_steps() -> None:
    from servetrace.api._whatif import whatif as api_whatif

    trace = VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet"
    records = VIDUR / "steps" / "synthetic_arxiv_poisson_qps2.0_n1000__vllm_batches.csv.gz"
    result = api_whatif(trace, [("sjf", {})], steps=records, trace_limits={"max_running": 128})
    model = result.calibration
    assert model.source == "step records" and model.fit["steps"] == 12_283
    # Detected as Vidur's batches, which have no KV size: the context comes from the ticks.
    assert model.costs["prefill_token_ns"] == pytest.approx(77_934, rel=0.01)
    assert model.costs["context_token_ns"] == pytest.approx(288, rel=0.01)
    assert result.trusted
