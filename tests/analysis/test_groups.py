"""``--by``: every group gets the figures of analysing it alone, over its own span."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

import servetrace
from servetrace.render.summary import summary_dict
from tests.conftest import MS, events, make_request

VIDUR = Path(__file__).parent.parent / "data" / "vidur"
POLICIES = ("lightllm", "orca", "sarathi", "vllm")


def assert_same(a: object, b: object, path: str = "") -> None:
    """Equal; floats to 1e-9 of the value or of 1 ns-scale noise (sums in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        # residual means are ~1e-12 ms sums of ±1e5 ms terms: noise, compared absolutely
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (path, a, b)
    else:
        assert a == b, (path, a, b)


@pytest.fixture(scope="module")
def four_policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Vidur traces of one workload under four schedulers, one file, sorted by ts."""
    folder = tmp_path_factory.mktemp("vidur")
    parts = []
    for policy in POLICIES:
        frame = pl.read_parquet(VIDUR / f"synthetic_arxiv_poisson_qps2.0_n1000__{policy}.parquet")
        frame = frame.with_columns(pl.lit(policy).alias("policy"))
        frame.write_parquet(folder / f"{policy}.parquet")
        parts.append(frame.with_columns(pl.col("request_id") + 10_000 * POLICIES.index(policy)))
    pl.concat(parts, how="diagonal_relaxed").sort("ts").write_parquet(folder / "all.parquet")
    return folder


def _unkeyed(document: object) -> object:
    """Request ids of the combined file carry a per-policy offset: take it off."""
    if isinstance(document, dict):
        return {
            k: (v % 10_000 if k == "request_id" and isinstance(v, int) else _unkeyed(v))
            for k, v in document.items()
            if k != "examples" or not isinstance(v, list)
        } | (
            {"examples": [e % 10_000 for e in document["examples"]]}
            if isinstance(document.get("examples"), list)
            else {}
        )
    if isinstance(document, list):
        return [_unkeyed(v) for v in document]
    return document


@pytest.mark.slow
@pytest.mark.parametrize("streaming", [False, True], ids=["memory", "streamed"])
def test_each_policy_gets_its_figures_alone(four_policies: Path, streaming: bool) -> None:
    combined = servetrace.analyze(
        four_policies / "all.parquet", by="policy", streaming=streaming, batch_rows=50_000
    )
    assert combined.groups is not None and list(combined.groups) == list(POLICIES)
    for policy, group in combined.groups.items():
        alone = servetrace.analyze(
            four_policies / f"{policy}.parquet", streaming=streaming, batch_rows=50_000
        ).summary
        got, want = _unkeyed(summary_dict(group)), _unkeyed(summary_dict(alone))
        assert isinstance(want, dict) and isinstance(got, dict)
        want["warnings"] = [w for w in want["warnings"] if not w.startswith("streamed")]
        if streaming:
            assert_same(got, want, policy)
        else:
            # One definition of every figure (summary's, aggregated per group): bit for bit.
            assert got == want, policy


def test_vidur_vllm_running_mean_is_its_own(four_policies: Path) -> None:
    # 33.2 alone, 32.7 under --by policy when divided by the whole file's span
    groups = servetrace.analyze(four_policies / "all.parquet", by="policy").groups
    assert groups is not None
    assert groups["vllm"].concurrency["running_mean"] == pytest.approx(33.225059099, rel=1e-9)


def test_group_span_hand_computed() -> None:
    """x: one request 0 → 10 ms; y: one request 100 → 140 ms, 4 tokens; each its own span."""
    frame = events(
        make_request("a", admission=2, first=4, ticks=[10], complete=10, policy="x"),
        make_request(
            "b",
            arrival=100,
            admission=110,
            first=120,
            ticks=[130, 140],
            complete=140,
            prompt_tokens=7,
            policy="y",
        ),
    )
    from servetrace.analysis.memory import analyze_events, summarize_by

    groups = summarize_by(analyze_events(frame), "policy")
    x, y = groups["x"], groups["y"]
    assert x.throughput["window_s"] == pytest.approx(0.010)
    assert x.throughput["requests_per_s"] == pytest.approx(100.0)
    assert x.throughput["output_tokens_per_s"] == pytest.approx(200.0)
    assert y.throughput["window_s"] == pytest.approx(0.040)
    assert y.throughput["output_tokens_per_s"] == pytest.approx(3 / 0.040)
    assert y.throughput["total_tokens_per_s"] == pytest.approx(10 / 0.040)
    assert x.throughput["total_tokens_per_s"] is None  # a has no prompt length
    # in system the whole span: mean 1; queued 2 of 10 ms (x), 10 of 40 ms (y)
    assert x.concurrency["in_system_mean"] == pytest.approx(1.0)
    assert x.concurrency["queued_mean"] == pytest.approx(0.2)
    assert x.concurrency["running_mean"] == pytest.approx(0.8)
    assert y.concurrency["queued_mean"] == pytest.approx(0.25)
    assert y.concurrency["running_peak"] == 1
    assert x.metrics["ttft"]["p50"] == 4 * MS and y.metrics["ttft"]["p50"] == 20 * MS
    assert x.metrics["itl"]["mean"] == 6 * MS and y.metrics["itl"]["mean"] == 10 * MS
    assert x.accounting.rows == 5 and y.accounting.rows == 6


def test_null_group_comes_last_and_invalid_requests_belong_to_none() -> None:
    from servetrace.analysis.memory import analyze_events, summarize_by

    frame = events(
        make_request("a", admission=1, first=2, complete=2, policy="x"),
        make_request("b", admission=1, first=2, complete=2),
        make_request("c", first=1, admission=2, complete=3, policy="x"),  # invalid
    )
    groups = summarize_by(analyze_events(frame), "policy")
    assert list(groups) == ["x", None]
    assert groups["x"].accounting.requests == 1 and groups[None].accounting.requests == 1
    assert groups["x"].violations == {}


def test_by_unknown_column_is_a_usage_error() -> None:
    from servetrace.analysis.memory import analyze_events, summarize_by
    from servetrace.errors import UsageError

    analysis = analyze_events(events(make_request("a", admission=1, first=2, complete=2)))
    with pytest.raises(UsageError, match="--by nope"):
        summarize_by(analysis, "nope")


def test_cli_by_policy_reports_the_library_groups(four_policies: Path) -> None:
    import json

    from typer.testing import CliRunner

    from servetrace.cli import app

    path = four_policies / "all.parquet"
    result = CliRunner().invoke(app, ["analyze", str(path), "--by", "policy", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    groups = json.loads(result.stdout)["by"]["groups"]
    assert [g["value"] for g in groups] == list(POLICIES)
    library = servetrace.to_dict(servetrace.analyze(path, by="policy"))["by"]["groups"]
    assert_same(json.loads(json.dumps(library, default=str)), groups)
    vllm = next(g for g in groups if g["value"] == "vllm")
    assert vllm["concurrency"]["running_mean"] == pytest.approx(33.225059099, rel=1e-9)


def test_leaked_state_of_each_group_is_its_own() -> None:
    """With release events in the trace: group a leaks l1 and l2 (completed or cancelled
    without a release), b releases everything, c has no release at all: each group's
    leaked_state is that of the group alone."""
    from servetrace.analysis.memory import analyze_events, summarize_by

    trace = events(
        make_request("k1", admission=1, first=2, complete=3, release=4, policy="a"),
        make_request("l1", arrival=1, admission=2, first=3, complete=5, policy="a"),
        make_request("l2", arrival=2, cancel=6, policy="a"),
        make_request("k2", admission=1, first=2, complete=3, release=9, policy="b"),
        make_request("l3", arrival=3, admission=4, first=5, complete=7, policy="c"),
    ).with_columns(pl.col("policy").forward_fill().over("request_id"))
    groups = summarize_by(analyze_events(trace), "policy")
    assert groups["a"].leaked_state == {"requests": 2, "examples": ["l1", "l2"]}
    assert groups["b"].leaked_state == {"requests": 0, "examples": []}
    for value, group in groups.items():
        alone = analyze_events(trace.filter(pl.col("policy") == value)).summary
        assert group.leaked_state == alone.leaked_state, value
    assert groups["c"].leaked_state is None  # no release of its own: not asked, as alone


def test_a_trace_whose_every_request_is_invalid_has_no_groups() -> None:
    """Completions without a token: every request quarantined, so no group at all (the
    golden set's four Vidur traces concatenated repeat their ids: the same case)."""
    from servetrace.analysis.memory import analyze_events, summarize_by

    trace = events(
        make_request("a", admission=1, complete=3, policy="x"),
        make_request("b", admission=1, complete=4, policy="y"),
    ).with_columns(pl.col("policy").forward_fill().over("request_id"))
    analysis = analyze_events(trace)
    assert analysis.summary.accounting.requests_valid == 0
    assert summarize_by(analysis, "policy") == {}
