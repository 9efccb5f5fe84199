"""The server's series on the trace's time axis (``server_series``) and per slice
(``server_slices``): a hand-made trace and series with every number worked out below, and
the simulator's pair, whose trace side equals the server's exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import servetrace
from servetrace.analysis.result import Analysis
from servetrace.analysis.server_histograms import HISTOGRAM_CHECKS
from servetrace.analysis.server_series import FamilySeries, family_series
from servetrace.api import with_server_metrics
from servetrace.sim.config import EngineConfig
from servetrace.sim.metrics import exposition
from servetrace.sim.simulate import simulate
from servetrace.sim.synthetic import synthetic_workload
from tests.conftest import events, make_request

S, MS = 1_000_000_000, 1_000_000

# Scrapes at 0, 1, 2, 3 s (integer ms timestamps). The trace (below) runs 0 → 2.7 s.
#   waiting   1 1 0 0   trace queued at the same instants: 1 1 0
#   running   0 1 2 0   trace running: 0 1 1 (the server counts one more at 2 s)
#   successes 0 0 1 2   per interval (0,1] (1,2] (2,3]: 0 1 1; trace completions 0 1 1
#   prompt    0 0 10 40 per interval: 0 10 30; trace prompts at the first token: 0 10 20
#   TTFT      count 0 0 1 2, sum 0 0 1.2 3.1: means -, 1.2 s, 1.9 s; trace: -, 1.2 s, 1.9 s
PROM = """\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 1 0
vllm:num_requests_waiting{engine="0"} 1 1000
vllm:num_requests_waiting{engine="0"} 0 2000
vllm:num_requests_waiting{engine="0"} 0 3000
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 0 0
vllm:num_requests_running{engine="0"} 1 1000
vllm:num_requests_running{engine="0"} 2 2000
vllm:num_requests_running{engine="0"} 0 3000
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop"} 0 0
vllm:request_success_total{engine="0",finished_reason="stop"} 0 1000
vllm:request_success_total{engine="0",finished_reason="stop"} 1 2000
vllm:request_success_total{engine="0",finished_reason="stop"} 2 3000
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0"} 0 0
vllm:prompt_tokens_total{engine="0"} 0 1000
vllm:prompt_tokens_total{engine="0"} 10 2000
vllm:prompt_tokens_total{engine="0"} 40 3000
# TYPE vllm:time_to_first_token_seconds histogram
"""
for t, (b1, b2, n, total) in zip(
    (0, 1000, 2000, 3000), ((0, 0, 0, 0), (0, 0, 0, 0), (0, 1, 1, 1.2), (0, 2, 2, 3.1)), strict=True
):
    PROM += (
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="1.0"}} {b1} {t}\n'
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="2.0"}} {b2} {t}\n'
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf"}} {n} {t}\n'
        f'vllm:time_to_first_token_seconds_count{{engine="0"}} {n} {t}\n'
        f'vllm:time_to_first_token_seconds_sum{{engine="0"}} {total} {t}\n'
    )


def hand_trace(client: bool = False) -> pl.DataFrame:
    """r1 queued 0–0.5 s, runs to 1.8 s (first token 1.2 s); r2 queued 0.6–1.5 s, runs to
    2.7 s (first token 2.5 s). ``client``: without admissions, as a client sees it."""
    frame = events(
        make_request(
            "r1", arrival=0, admission=500, first=1200, ticks=[1800], complete=1800,
            prompt_tokens=10,
        ),
        make_request(
            "r2", arrival=600, admission=1500, first=2500, ticks=[2700], complete=2700,
            prompt_tokens=20,
        ),
    )  # fmt: skip
    return frame.filter(pl.col("event") != "admission") if client else frame


def write_hand(folder: Path) -> tuple[Path, Path, Path]:
    """The hand trace, its client-side copy and the series, written into ``folder``."""
    trace, client, prom = folder / "t.parquet", folder / "client.parquet", folder / "m.prom"
    hand_trace().write_parquet(trace)
    hand_trace(client=True).write_parquet(client)
    prom.write_text(PROM)
    return trace, client, prom


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return write_hand(tmp_path_factory.mktemp("hand"))


def _views(trace: Path, prom: Path, **options: object) -> tuple[Analysis, dict[str, FamilySeries]]:
    analysis = with_server_metrics(servetrace.analyze(trace, **options), prom, None, 0)
    found = analysis.server_metrics
    assert found is not None
    drawn = family_series(found, analysis, analysis.events("test"))
    return analysis, {fs.family: fs for fs in drawn}


def _values(frame: pl.DataFrame | None) -> list[float | None]:
    assert frame is not None
    return [None if np.isnan(v) else v for v in frame["value"].to_list()]


def test_each_family_beside_the_trace_by_hand(hand: tuple[Path, Path, Path]) -> None:
    _, by = _views(hand[0], hand[2])
    assert list(by) == [
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:request_success_total",
        "vllm:prompt_tokens_total",
        "vllm:time_to_first_token_seconds",
    ]  # the _sum and _count fold into their histogram
    waiting = by["vllm:num_requests_waiting"]
    assert waiting.server["t_ns"].to_list() == [0, S, 2 * S, 3 * S]
    assert _values(waiting.server) == [1, 1, 0, 0]
    # The trace says nothing after its end (2.7 s): the 3 s scrape has no trace side.
    assert waiting.trace is not None and waiting.trace["t_ns"].to_list() == [0, S, 2 * S]
    assert _values(waiting.trace) == [1, 1, 0]
    assert waiting.finding == "waiting_gauge" and waiting.trace_quantity == "queued"
    running = by["vllm:num_requests_running"]
    assert _values(running.server) == [0, 1, 2, 0] and _values(running.trace) == [0, 1, 1]
    success = by["vllm:request_success_total"]
    assert success.statistic == "rate_per_s"
    assert success.server["end_ns"].to_list() == [S, 2 * S, 3 * S]
    assert _values(success.server) == [0, 1, 1] == _values(success.trace)
    prompt = by["vllm:prompt_tokens_total"]
    assert _values(prompt.server) == [0, 10, 30] and _values(prompt.trace) == [0, 10, 20]
    ttft = by["vllm:time_to_first_token_seconds"]
    assert ttft.statistic == "mean_ns"
    assert _values(ttft.server) == pytest.approx([None, 1.2 * S, 1.9 * S])
    assert _values(ttft.trace) == [None, 1.2 * S, 1.9 * S]


def test_a_client_trace_has_no_queue_to_draw_beside(hand: tuple[Path, Path, Path]) -> None:
    _, by = _views(hand[1], hand[2])
    for family in ("vllm:num_requests_waiting", "vllm:num_requests_running"):
        fs = by[family]
        assert fs.trace is None and _values(fs.server)  # the server's side is still drawn
        assert (fs.trace_unavailable or "").startswith("the trace has no admissions")
    # What a client does see, it draws: completions and first tokens.
    assert _values(by["vllm:request_success_total"].trace) == [0, 1, 1]
    assert by["vllm:time_to_first_token_seconds"].trace is not None


def test_per_slice_server_figures_by_hand(hand: tuple[Path, Path, Path]) -> None:
    # Slices [0, 1), [1, 2), [2, 2.7] s; scrapes 0, 1, 2 s fall one in each (3 s after the end).
    analysis, _ = _views(hand[0], hand[2], slice_ns=S)
    found = analysis.server_metrics
    assert found is not None and found.slices is not None
    got = found.slices
    assert got["scrapes"].to_list() == [1, 1, 1]
    assert got["server_waiting_mean"].to_list() == [1, 1, 0] == got["trace_queued_mean"].to_list()
    assert got["server_running_mean"].to_list() == [0, 1, 2]
    assert got["trace_running_mean"].to_list() == [0, 1, 1]
    # Counters over (start, end]; the last slice takes the interval (2, 3] holding the end.
    assert got["server_successes"].to_list() == [0, 1, 1] == got["trace_completions"].to_list()
    assert got["server_prompt_tokens"].to_list() == [0, 10, 30]
    assert got["trace_prompt_tokens"].to_list() == [0, 10, 20]
    assert got["trace_output_tokens"].to_list() == [0, 2, 2]
    assert got["server_preemptions"].to_list() == [None, None, None]
    assert found.slices_unavailable == {
        "server_preemptions": "no vllm:num_preemptions_total series",
        "server_generation_tokens": "no vllm:generation_tokens_total series",
    }


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    events_ = simulate(synthetic_workload(120, 20.0, seed=5), EngineConfig(kv_blocks=300, seed=5))
    folder = tmp_path_factory.mktemp("sim")
    trace, prom = folder / "t.parquet", folder / "m.prom"
    events_.write_parquet(trace)
    prom.write_text(exposition(events_, S // 2))
    return trace, prom


def test_the_simulators_trace_side_equals_the_server_side(simulated: tuple[Path, Path]) -> None:
    _, by = _views(*simulated)
    compared = [fs for fs in by.values() if fs.trace is not None]
    assert {fs.finding for fs in compared} == {
        "waiting_gauge",
        "running_gauge",
        "success_counter",
        "preemption_counter",
        "prompt_tokens_counter",
        "generation_tokens_counter",
        *(check.name for check in HISTOGRAM_CHECKS),
    }
    for fs in compared:
        assert fs.trace is not None
        mine = fs.server.join(fs.trace, on="t_ns", suffix="_trace")
        assert mine.height == fs.trace.height > 100, fs.family
        server, trace = mine["value"].to_numpy(), mine["value_trace"].to_numpy()
        both = ~np.isnan(server)
        assert np.array_equal(both, ~np.isnan(trace)), fs.family
        # Exact but for the float sums of seconds the exposition writes.
        assert server[both] == pytest.approx(trace[both], rel=1e-9, abs=1e-3), fs.family


@pytest.mark.parametrize("width_s", [5, 3.5])
def test_the_simulators_slices_agree_when_intervals_tile_them(
    simulated: tuple[Path, Path], width_s: float
) -> None:
    # 5 s and 3.5 s are multiples of the 0.5 s scrape interval: the intervals tile the slices.
    analysis, _ = _views(*simulated, slice_ns=round(width_s * S))
    found = analysis.server_metrics
    assert found is not None and found.slices is not None and not found.slices_unavailable
    got = found.slices
    for server, trace in (
        ("server_waiting_mean", "trace_queued_mean"),
        ("server_running_mean", "trace_running_mean"),
        ("server_successes", "trace_completions"),
        ("server_preemptions", "trace_preemptions"),
        ("server_prompt_tokens", "trace_prompt_tokens"),
        ("server_generation_tokens", "trace_output_tokens"),
    ):
        assert got[server].to_list() == got[trace].to_list(), server
    assert int(got["server_successes"].sum()) == 120
    assert got["trace_preemptions"].sum() == analysis.per_request["preemptions"].sum() > 0


def test_kv_cache_usage_is_drawn_alone_with_its_reason(tmp_path: Path) -> None:
    trace, prom = tmp_path / "t.parquet", tmp_path / "m.prom"
    hand_trace().write_parquet(trace)
    prom.write_text(
        PROM + "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0"} 0.5 1000\n'
        'vllm:kv_cache_usage_perc{engine="0"} 0.25 2000\n'
    )
    _, by = _views(trace, prom)
    assert list(by)[2] == "vllm:kv_cache_usage_perc"  # after the two request gauges
    kv = by["vllm:kv_cache_usage_perc"]
    assert _values(kv.server) == [0.5, 0.25] and kv.trace is None
    assert kv.trace_unavailable is not None and "KV cache" in kv.trace_unavailable
