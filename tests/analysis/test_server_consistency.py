"""The simulator's trace and its metrics series agree exactly (every finding zero); each
injected disagreement is found with its size; clocks that cannot be aligned are an error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import servetrace
from servetrace.analysis.result import Analysis
from servetrace.analysis.server_metrics import FINDINGS, compare
from servetrace.errors import InputError
from servetrace.sim.config import EngineConfig
from servetrace.sim.simulate import simulate
from servetrace.sim.synthetic import synthetic_workload
from servetrace.sources.server_metrics import read
from tests.analysis.server_fixtures import S, simulated_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, pl.DataFrame]:
    return simulated_pair(tmp_path_factory.mktemp("sim"))


def _compare(analysis: Analysis, metrics: pl.DataFrame):  # type: ignore[no-untyped-def]
    return compare(metrics, analysis, analysis.events("test"), "m.prom")


def test_the_simulators_series_agree_exactly(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    found = _compare(analysis, metrics)
    assert found.alignment.method == "same_clock" and found.alignment.offset_ns == 0
    assert set(found.findings) == set(FINDINGS)
    for name, f in found.findings.items():
        assert f.unavailable is None, name
        assert f.max_abs == 0, name
        assert f.compared > 10, name
    preempted = int(analysis.per_request["preemptions"].sum())
    assert preempted > 0
    assert found.findings["preemption_counter"].server_total == preempted
    assert found.findings["success_counter"].trace_total == 150


def test_a_shifted_gauge_is_found_with_its_size(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    at = 5 * S
    shifted = metrics.with_columns(
        pl.when((pl.col("family") == "vllm:num_requests_waiting") & (pl.col("ts") == at))
        .then(pl.col("value") + 3)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    f = _compare(analysis, shifted).findings["waiting_gauge"]
    assert f.max_abs == 3 and f.worst_at_ns == at
    assert f.mean_abs == pytest.approx(3 / f.compared)
    assert f.cause is not None and "other clients" in f.cause


def test_a_dropped_counter_increment_is_found(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    # One completion lost in the interval (6 s, 7 s]: the counter is 1 lower from 7 s on.
    dropped = metrics.with_columns(
        pl.when((pl.col("family") == "vllm:request_success_total") & (pl.col("ts") >= 7 * S))
        .then(pl.col("value") - 1)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    before = _compare(analysis, metrics).findings["success_counter"]
    assert before.server_total is not None and before.server_total > 0
    f = _compare(analysis, dropped).findings["success_counter"]
    assert f.max_abs == 1 and f.worst_at_ns == 7 * S
    assert f.server_total == before.server_total - 1 == (f.trace_total or 0) - 1
    assert f.cause is not None and "did not count" in f.cause


def test_an_offset_clock_is_estimated_and_undone(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    late = metrics.with_columns(pl.col("ts") + 2_500_000_000)
    found = _compare(analysis, late)
    assert found.alignment.method == "estimated"
    assert found.alignment.offset_ns == 2_500_000_000
    assert found.findings["clock_offset"].max_abs == 2_500_000_000
    assert all(f.max_abs == 0 for n, f in found.findings.items() if n != "clock_offset")


def test_epoch_metrics_against_a_relative_trace_are_aligned(
    pair: tuple[Analysis, pl.DataFrame],
) -> None:
    analysis, metrics = pair
    epoch = 1_733_238_000 * S
    found = _compare(analysis, metrics.with_columns(pl.col("ts") + epoch))
    assert found.alignment.offset_ns == epoch
    assert found.findings["running_gauge"].max_abs == 0


def test_clocks_that_cannot_be_aligned_stop(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    no_running = metrics.filter(pl.col("family") != "vllm:num_requests_running")
    far = no_running.with_columns(pl.col("ts") + 1_733_238_000 * S)
    with pytest.raises(InputError, match="cannot be aligned"):
        _compare(analysis, far)


def test_ttft_percentile_error_of_the_buckets(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    f = _compare(analysis, metrics).findings["ttft_histogram"]
    ttft = analysis.per_request["ttft_ns"].drop_nulls().to_numpy()
    for q, v in f.extra["quantiles"].items():
        exact = np.quantile(ttft / 1e9, int(q[1:]) / 100)
        assert v["trace_ns"] == round(exact * 1e9)
        lo, hi = v["bucket_ns"]
        # histogram_quantile interpolates inside the bucket holding the rank
        assert lo <= v["histogram_ns"] <= hi
        assert lo <= v["trace_ns"] <= hi
        assert v["error_ns"] == v["histogram_ns"] - v["trace_ns"]


def test_levels_at_is_the_level_after_each_transition() -> None:
    from servetrace.analysis.concurrency import levels_at

    t = pl.DataFrame(
        {
            "ts": [10, 10, 20, 30],
            "d_queued": [1, 1, -1, -1],
            "d_running": [0, 0, 1, 1],
            "d_in_system": [1, 1, 0, 0],
        }
    )
    got = levels_at(t, np.array([0, 10, 15, 20, 30, 99]))
    assert got["queued"].tolist() == [0, 2, 2, 1, 0, 0]
    assert got["running"].tolist() == [0, 0, 0, 1, 2, 2]


def test_no_server_metrics_no_keys(tmp_path: Path, pair: tuple[Analysis, pl.DataFrame]) -> None:
    from servetrace.render.results_json import analysis_dict

    analysis, _ = pair
    assert "consistency" not in analysis_dict(analysis)


def _aiperf_export(events: pl.DataFrame, folder: Path) -> int:
    """The simulator's series as AIPerf writes them (docs/tutorials/server-metrics.md):
    one record per scrape, identical consecutive scrapes dropped but the first and last."""
    import json

    from servetrace.sim.metrics import HELP, HISTOGRAMS, series

    got = series(events, S)
    labels = {"model_name": "sim"}
    records = []
    for k, t in enumerate(got["t"]):
        metrics: dict[str, list[dict[str, object]]] = {
            family: [{"labels": labels, "value": float(got[family][k])}] for family in HELP
        }
        for family, (_, bounds) in HISTOGRAMS.items():
            buckets = {str(b): float(got[f"{family}_bucket:{b!r}"][k]) for b in bounds}
            buckets["+Inf"] = float(got[f"{family}_bucket:inf"][k])
            metrics[family] = [
                {
                    "labels": labels,
                    "histogram": buckets,
                    "sum": float(got[f"{family}_sum"][k]),
                    "count": float(got[f"{family}_count"][k]),
                }
            ]
        records.append(
            {
                "endpoint_url": "http://sim/metrics",
                "timestamp_ns": int(t),
                "endpoint_latency_ns": 1000,
                "metrics": metrics,
            }
        )
    kept = [
        r
        for i, r in enumerate(records)
        if not (0 < i < len(records) - 1)
        or r["metrics"] != records[i - 1]["metrics"]
        or r["metrics"] != records[i + 1]["metrics"]
    ]
    (folder / "server_metrics_export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    schemas = {f: {"type": kind, "help": text} for f, (kind, text) in HELP.items()}
    schemas.update({f: {"type": "histogram", "help": text} for f, (text, _) in HISTOGRAMS.items()})
    meta = {"endpoints": {"http://sim/metrics": {"metric_schemas": schemas}}}
    (folder / "server_metrics_metadata.json").write_text(json.dumps(meta))
    return len(records) - len(kept)


def test_aiperf_deduplicated_export_agrees_exactly(tmp_path: Path) -> None:
    # An idle gap between two bursts: its scrapes are identical and AIPerf drops them.
    first = synthetic_workload(40, 20.0, seed=5)
    later = first.with_columns(pl.col("arrival_ns") + 30 * S, pl.col("request_id") + "b")
    events = simulate(pl.concat([first, later]), EngineConfig(seed=5))
    trace = tmp_path / "t.parquet"
    events.write_parquet(trace)
    dropped = _aiperf_export(events, tmp_path)
    assert dropped > 5
    analysis = servetrace.analyze(trace)
    found = compare(read(tmp_path), analysis, analysis.events("test"), "aiperf")
    assert found.alignment.offset_ns == 0
    for name, f in found.findings.items():
        assert f.unavailable is None and f.max_abs == 0, name
    assert found.findings["success_counter"].server_total == 80


def test_a_counter_reset_is_handled(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    family = "vllm:generation_tokens_total"
    series = metrics.filter(family=family).sort("ts")
    # The server restarts just after the 10 s scrape: from 11 s on it counts from zero.
    at_10 = series.filter(ts=10 * S)["value"][0]
    reset = metrics.with_columns(
        pl.when((pl.col("family") == family) & (pl.col("ts") >= 11 * S))
        .then(pl.col("value") - at_10)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    before = _compare(analysis, metrics).findings["generation_tokens_counter"]
    f = _compare(analysis, reset).findings["generation_tokens_counter"]
    assert f.extra["resets"] == 1
    assert f.max_abs == 0 and f.server_total == before.server_total
    assert f.cause is not None and "reset 1 time" in f.cause


def test_a_nan_counter_sample_is_named(pair: tuple[Analysis, pl.DataFrame]) -> None:
    analysis, metrics = pair
    broken = metrics.with_columns(
        pl.when((pl.col("family") == "vllm:num_preemptions_total") & (pl.col("ts") == 3 * S))
        .then(float("nan"))
        .otherwise(pl.col("value"))
        .alias("value")
    )
    with pytest.raises(InputError, match="vllm:num_preemptions_total has a non-finite sample"):
        _compare(analysis, broken)


@pytest.mark.parametrize("shift_ns", [0, 2_500_000_000])
def test_a_trace_of_half_the_servers_requests_aligns_at_the_true_offset(
    tmp_path: Path, pair: tuple[Analysis, pl.DataFrame], shift_ns: int
) -> None:
    # One client among two: its running count is about half the gauge at every scrape.
    # Scored only where the trace is, an offset that slid the busy scrapes out of it won
    # (-42.8 s here); the scaled match lines the shapes up instead.
    analysis, metrics = pair
    events = analysis.events("test").collect()
    ids = events["request_id"].unique().sort()
    half = tmp_path / "half.parquet"
    kept = ids.gather(range(0, ids.len(), 2)).implode()
    events.filter(pl.col("request_id").is_in(kept)).write_parquet(half)
    part = servetrace.analyze(half)
    found = compare(metrics.with_columns(pl.col("ts") + shift_ns), part, part.events("t"), "m")
    assert abs(found.alignment.offset_ns - shift_ns) <= 100_000_000
    assert found.findings["success_counter"].server_total == 150
