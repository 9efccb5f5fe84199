"""SGLang's and TensorRT-LLM's series through the same checks as vLLM's: the simulator
writes each engine's families by that engine's observation rules and the pair agrees
exactly, finding by finding (a family the engine lacks is unavailable with the reason);
each injected disagreement is found; the engines' sample expositions read and give every
finding or its reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.analysis.result import Analysis
from servetrace.analysis.server_engines import ENGINES, SGLANG, VLLM, detect
from servetrace.analysis.server_findings import ServerComparison
from servetrace.analysis.server_histograms import ENGINE_CHECKS, HISTOGRAM_CHECKS
from servetrace.analysis.server_metrics import FINDINGS, compare, trace_counts
from servetrace.analysis.server_series import NO_KV, family_series
from servetrace.api import with_server_metrics
from servetrace.cli import app
from servetrace.sources.server_metrics import read
from tests.analysis.server_fixtures import S, simulated_pair

DATA = Path(__file__).resolve().parents[1] / "data" / "server_metrics"
SAMPLES = {"sglang": DATA / "sglang_metrics.prom", "trtllm": DATA / "trtllm_metrics.prom"}
ABSENT = {
    "sglang": {
        "prefill_histogram": "SGLang exposes no prefill-time histogram",
        "decode_histogram": "SGLang exposes no decode-time histogram",
    },
    "trtllm": {
        "preemption_counter": "TensorRT-LLM exposes no preemption counter",
        "itl_histogram": "TensorRT-LLM exposes no inter-token histogram "
        "(trtllm_time_per_output_token_seconds is each request's mean TPOT, observed at "
        "completion)",
    },
}
OTHERS = list(ABSENT)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Analysis, pl.DataFrame]]:
    # Chunks of 2-4 tokens: SGLang's per-token ITL then differs from a per-gap count.
    return {
        engine: simulated_pair(tmp_path_factory.mktemp(engine), engine, bundle_prob=0.3)
        for engine in OTHERS
    }


def _compare(analysis: Analysis, metrics: pl.DataFrame) -> ServerComparison:
    return compare(metrics, analysis, analysis.events("test"), "m.prom")


def test_every_engine_has_a_row_for_every_finding() -> None:
    names = [c.name for c in HISTOGRAM_CHECKS]
    for name, engine in ENGINES.items():
        assert [c.name for c in ENGINE_CHECKS[name]] == names
        assert [c.engine for c in engine.histograms] == [name] * len(names)
        assert list(engine.counters) == list(VLLM.counters)
        assert all(f.startswith(engine.prefix) for f in engine.gauges)


def test_the_engine_is_told_by_its_family_names() -> None:
    for engine, path in SAMPLES.items():
        assert detect(read(path)["family"].unique()).name == engine
    assert detect(read(DATA / "scrapes.prom")["family"].unique()).name == "vllm"
    assert detect(["process_cpu_seconds_total"]).name == "vllm"  # its names said missing


@pytest.mark.parametrize("engine", OTHERS)
def test_each_engines_simulated_series_agree_exactly(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]], engine: str
) -> None:
    analysis, metrics = pairs[engine]
    found = _compare(analysis, metrics)
    assert found.engine == engine and found.alignment.method == "same_clock"
    assert list(found.findings) == list(FINDINGS)
    for name, f in found.findings.items():
        if name in ABSENT[engine]:
            assert f.unavailable == ABSENT[engine][name] and f.max_abs is None, name
            continue
        assert f.unavailable is None and f.max_abs == 0 and f.compared > 10, name
        if name != "clock_offset":
            assert f.family is not None and f.family.startswith(ENGINES[engine].prefix)
    assert found.findings["success_counter"].server_total == 150


def test_sglangs_queue_counts_requests_cancelled_before_their_first_token(
    tmp_path: Path,
) -> None:
    """SGLang observes the queue wait at the first prefill batch: a request admitted and
    cancelled before its first token was observed, on the simulated server as in the trace."""
    from servetrace.sim.config import EngineConfig
    from servetrace.sim.metrics import exposition
    from servetrace.sim.simulate import simulate
    from servetrace.sim.synthetic import synthetic_workload

    events = simulate(
        synthetic_workload(200, 5.0, seed=1), EngineConfig(seed=1, cancel_fraction=0.1)
    )
    trace, prom = tmp_path / "t.parquet", tmp_path / "m.prom"
    events.write_parquet(trace)
    prom.write_text(exposition(events, S, "sglang"))
    analysis = servetrace.analyze(trace)
    in_prefill = analysis.per_request.filter(pl.col("cancelled_in") == "prefill").height
    assert in_prefill == 2  # the case this is about: admitted, cancelled, no first token
    f = _compare(analysis, read(prom)).findings["queue_histogram"]
    assert f.max_abs == 0 and f.server_total == f.trace_total


def test_sglangs_itl_counts_tokens_not_gaps(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]],
) -> None:
    analysis, metrics = pairs["sglang"]
    f = _compare(analysis, metrics).findings["itl_histogram"]
    ticks = analysis.events("test").filter(pl.col("event") == "token").collect()
    tokens = int(ticks["tokens"].fill_null(1).sum())
    # Every tick after a request's first: its tokens are its observations.
    assert f.server_total == f.trace_total == tokens > ticks.height == analysis.gaps.height
    assert f.max_abs == 0


def test_sglang_counts_a_requests_tokens_when_it_finishes(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]],
) -> None:
    analysis, metrics = pairs["sglang"]
    edges = np.unique(metrics["ts"].to_numpy())
    events = analysis.events("test")
    at_end = trace_counts(analysis.per_request, events, edges, SGLANG)
    as_vllm = trace_counts(analysis.per_request, events, edges, VLLM)
    for name in ("prompt_tokens_counter", "generation_tokens_counter"):
        assert at_end[name].sum() == as_vllm[name].sum(), name
        assert not np.array_equal(at_end[name], as_vllm[name]), name  # other intervals


def _plus_one(metrics: pl.DataFrame, families: list[str], rows: pl.Expr, at: int) -> pl.DataFrame:
    chosen = pl.col("family").is_in(families) & rows & (pl.col("ts") >= at)
    return metrics.with_columns(
        pl.when(chosen).then(pl.col("value") + 1).otherwise(pl.col("value")).alias("value")
    )


@pytest.mark.parametrize(
    ("engine", "name"),
    [(e, c.name) for e in OTHERS for c in ENGINE_CHECKS[e] if c.absent is None],
)
def test_an_extra_histogram_observation_is_found(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]], engine: str, name: str
) -> None:
    analysis, metrics = pairs[engine]
    check = next(c for c in ENGINE_CHECKS[engine] if c.name == name)
    family = check.families[0]
    # One observation more in (6 s, 7 s], above every bound: +Inf and the count only.
    top = pl.col("le").is_null() | pl.col("le").is_infinite()
    f = _compare(analysis, _plus_one(metrics, [family, f"{family}_count"], top, 7 * S))
    f = f.findings[name]
    assert f.family == family and f.max_abs == 1 and f.worst_at_ns == 7 * S
    assert f.server_total == (f.trace_total or 0) + 1
    assert f.cause == f"the server counts {check.counts} the trace does not have"


@pytest.mark.parametrize("engine", OTHERS)
def test_a_lost_counter_increment_is_found(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]], engine: str
) -> None:
    analysis, metrics = pairs[engine]
    family = str(ENGINES[engine].counters["generation_tokens_counter"].family)
    lost = _plus_one(metrics, [family], pl.lit(True), 7 * S)
    f = _compare(analysis, lost).findings["generation_tokens_counter"]
    assert f.max_abs == 1 and f.worst_at_ns == 7 * S
    assert f.server_total == (f.trace_total or 0) + 1


@pytest.mark.parametrize("engine", OTHERS)
def test_a_stale_gauge_is_named_as_the_likely_cause(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]], engine: str
) -> None:
    analysis, metrics = pairs[engine]
    family = ENGINES[engine].running
    # The first scrape whose value changed holds the one before: what a gauge not
    # refreshed in between shows.
    rows = metrics.filter(pl.col("family") == family).sort("ts")
    changed = rows.with_columns(pl.col("value").shift(1).alias("old")).filter(
        pl.col("old") != pl.col("value")
    )
    at, old, new = changed.select("ts", "old", "value").row(0)
    stale = metrics.with_columns(
        pl.when((pl.col("family") == family) & (pl.col("ts") == at))
        .then(pl.lit(old))
        .otherwise(pl.col("value"))
        .alias("value")
    )
    f = _compare(analysis, stale).findings["running_gauge"]
    assert f.max_abs == abs(old - new) > 0 and f.worst_at_ns == at  # shown, not hidden
    assert f.cause is not None and f.cause.startswith(f"a stale gauge ({ENGINES[engine].stale}")


@pytest.mark.parametrize("engine", OTHERS)
def test_the_clock_is_aligned_on_the_engines_running_gauge(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]], engine: str
) -> None:
    analysis, metrics = pairs[engine]
    found = _compare(analysis, metrics.with_columns(pl.col("ts") + 2_500_000_000))
    assert found.alignment.method == "estimated"
    assert found.alignment.offset_ns == 2_500_000_000
    assert all(f.max_abs in (0, None) for n, f in found.findings.items() if n != "clock_offset")


@pytest.mark.parametrize("engine", OTHERS)
def test_the_views_and_slices_read_the_engines_families(tmp_path: Path, engine: str) -> None:
    analysis, metrics = simulated_pair(tmp_path, engine, bundle_prob=0.3)
    found = _compare(analysis, metrics)
    drawn = {fs.family: fs for fs in family_series(found, analysis, analysis.events("t"))}
    compared = [fs for fs in drawn.values() if fs.trace is not None]
    assert len(compared) == len(FINDINGS) - 1 - len(ABSENT[engine])  # but the clock
    for fs in compared:
        assert fs.trace is not None
        mine = fs.server.join(fs.trace, on="t_ns", suffix="_trace").drop_nans()
        assert mine.height > 10, fs.family
        assert mine["value"].to_numpy() == pytest.approx(
            mine["value_trace"].to_numpy(), rel=1e-9, abs=1e-3
        ), fs.family
    sliced = servetrace.analyze(tmp_path / "t.parquet", slice_ns=5 * S)
    got = with_server_metrics(sliced, tmp_path / "m.prom").server_metrics
    assert got is not None and got.slices is not None
    for server, trace in (
        ("server_running_mean", "trace_running_mean"),
        ("server_successes", "trace_completions"),
        ("server_generation_tokens", "trace_output_tokens"),
    ):
        assert got.slices[server].to_list() == got.slices[trace].to_list(), server
    if engine == "trtllm":
        assert got.slices_unavailable == {
            "server_preemptions": ABSENT[engine]["preemption_counter"]
        }


@pytest.mark.parametrize("engine", OTHERS)
def test_the_samples_give_every_finding_or_its_reason(
    pairs: dict[str, tuple[Analysis, pl.DataFrame]], engine: str
) -> None:
    analysis, _ = pairs[engine]
    sample = read(SAMPLES[engine])
    # Their scrapes (epoch ms, 5 s apart) put at 10, 15 and 20 s of the simulated trace.
    offset = int(sample["ts"].min()) - 10 * S  # type: ignore[arg-type]
    found = compare(sample, analysis, analysis.events("t"), "sample", offset)
    assert found.engine == engine and found.scrapes == 3
    for name, f in found.findings.items():
        if name in ABSENT[engine]:
            assert f.unavailable == ABSENT[engine][name], name
        elif name != "clock_offset":
            assert f.unavailable is None and f.max_abs is not None, name
            assert f.family is not None and f.family.startswith(ENGINES[engine].prefix), name
            assert f.compared == (3 if name.endswith("_gauge") else 2), name
    # Synthetic values against another run: they disagree, and say why.
    running = found.findings["running_gauge"]
    assert running.max_abs and (running.cause or "").startswith("a stale gauge")
    kv = {fs.family: fs for fs in family_series(found, analysis, None)}[ENGINES[engine].kv_usage[0]]
    assert kv.trace is None and kv.trace_unavailable == NO_KV


def test_simulate_and_analyze_say_whose_families(tmp_path: Path) -> None:
    runner = CliRunner()
    trace, prom = tmp_path / "t.parquet", tmp_path / "m.prom"
    sim = ["simulate", "--requests", "60", "--rate", "20", "--bundle-prob", "0.3"]
    made = runner.invoke(
        app, [*sim, "-o", str(trace), "--metrics-out", str(prom), "--metrics-engine", "sglang"]
    )
    assert made.exit_code == 0, made.output
    assert "# TYPE sglang:num_queue_reqs gauge" in prom.read_text()
    args = ["analyze", str(trace), "--server-metrics", str(prom)]
    done = runner.invoke(app, [*args, "-f", "json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["server_metrics"]["engine"] == "sglang"
    c = report["consistency"]
    assert c["itl_histogram"]["family"] == "sglang:inter_token_latency_seconds"
    assert c["itl_histogram"]["unit"] == "tokens per bucket" and c["itl_histogram"]["max_abs"] == 0
    assert c["prefill_histogram"]["unavailable"] == ABSENT["sglang"]["prefill_histogram"]
    text = runner.invoke(app, args).stdout
    assert "m.prom (SGLang's families): " in text
    assert "prefill_histogram: unavailable (SGLang exposes no prefill-time histogram)" in text
    # check skips a finding the engine cannot give, in the finding's own words.
    gate = ["check", str(trace), "--server-metrics", str(prom)]
    gated = runner.invoke(app, [*gate, "--slo", "consistency.prefill_histogram.max_abs<=0"])
    assert gated.exit_code == 0, gated.output
    assert (
        "SKIP consistency.prefill_histogram.max_abs: unavailable: "
        "SGLang exposes no prefill-time histogram" in gated.stdout
    )
