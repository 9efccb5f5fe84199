"""The server's own per-request figures beside the trace's, and the formula counted in
engine steps: hand-computed numbers of tests/data/response_body (PROVENANCE.md works
them out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"
SPEC = DATA / "response_body" / "aiperf_spec_decode" / "profile_export_raw.jsonl"
PLAIN = DATA / "response_body" / "genai_perf_metrics" / "profile_export.json"
MS = 1_000_000

runner = CliRunner()


@pytest.fixture(scope="module")
def spec() -> servetrace.Analysis:
    return servetrace.analyze(SPEC)


def test_server_queue_wait_is_its_own_metric(spec: servetrace.Analysis) -> None:
    reported = spec.server_reported
    assert reported is not None and reported.completed == 3
    queue = reported.metrics["server_queue_wait"]  # 5, 40, 10 ms
    assert queue["count"] == 3 and queue["mean"] == pytest.approx(55 / 3 * MS)
    assert queue["p50"] == 10 * MS
    # The trace's own queue wait stays unavailable: a client cannot see admission.
    assert spec.summary.metrics["queue_wait"]["count"] == 0
    outside = reported.metrics["ttft_outside_engine"]  # 30-5-20, 72-40-25, 45-10-30
    assert outside["mean"] == pytest.approx(17 / 3 * MS) and outside["max"] == 7 * MS
    assert reported.metrics["server_tpot"]["p50"] == 5_500_000


def test_prefix_cache_and_spec_decode_totals(spec: servetrace.Analysis) -> None:
    reported = spec.server_reported
    assert reported is not None
    assert reported.prefix_cache == {
        "requests": 3,
        "cached_tokens": 96,
        "prompt_tokens": 278,
        "hit_fraction": pytest.approx(96 / 278),
    }
    assert reported.spec_decode == {
        "requests": 3,
        "steps": 9,
        "accepted_tokens": 11,
        "draft_tokens": 27,
        "acceptance_rate": pytest.approx(11 / 27),
        "mean_acceptance_length": pytest.approx(1 + 11 / 9),
        "output_tokens_per_step": pytest.approx(20 / 9),  # (9 + 6 + 5) / 9
    }


def test_the_formula_in_steps(spec: servetrace.Analysis) -> None:
    formula = spec.summary.formula
    # In tokens every request misses: each chunk holds one verify step's tokens.
    assert formula.per_request.within_tolerance == 0
    causes = {w["request_id"]: w["cause"] for w in formula.fleet.worst}
    assert causes["a"] == causes["b"] == "multi-token chunks, one per speculative step"
    assert causes["c"] == "multi-token chunks"  # its last step streamed no text
    steps = formula.steps
    assert steps is not None and steps.requests == 3
    # a: 60 - (30 + 3·10) = 0; b: 108 - (72 + 3·12) = 0; c: 65 - (45 + 3·10) = -10 ms.
    assert (steps.per_request.checked, steps.per_request.within_tolerance) == (3, 2)
    worst = steps.per_request.worst[0]
    assert (worst["request_id"], worst["residual_ns"]) == ("c", -10 * MS)
    assert worst["cause"] == "fewer chunks than steps" and worst["spec_steps"] == 3
    # One step time: Σ decode / Σ S = (30 + 36 + 20) / 9 ms.
    assert steps.fleet_step_ns == pytest.approx(86 / 9 * MS)
    errors = {w["request_id"]: w["residual_ns"] for w in steps.fleet.worst}
    assert errors["a"] == pytest.approx((30 - 3 * 86 / 9) * MS)
    assert errors["b"] == pytest.approx((36 - 3 * 86 / 9) * MS)
    assert errors["c"] == pytest.approx((20 - 3 * 86 / 9) * MS)


def test_traces_without_bodies_have_neither() -> None:
    plain = servetrace.analyze(DATA.parent.parent / "sample_traces" / "worked_example.csv")
    assert plain.server_reported is None and plain.summary.formula.steps is None
    report = json.loads(runner.invoke(app, ["analyze", str(PLAIN), "-f", "json"]).stdout)
    assert "server_reported" in report and "steps" not in report["formula"]


def test_every_view_names_them_as_the_servers(tmp_path: Path) -> None:
    report = json.loads(runner.invoke(app, ["analyze", str(SPEC), "-f", "json"]).stdout)
    block = report["server_reported"]
    assert block["clock"] == "server"
    queue = block["metrics"]["server_queue_wait"]
    assert queue["unit"] == "ms" and queue["p50"] == 10.0
    assert "not this trace's queue_wait" in queue["definition"]
    assert report["metrics"]["queue_wait"]["count"] == 0
    assert report["formula"]["steps"]["fleet"]["fleet_step_ms"] == pytest.approx(86 / 9)
    table = runner.invoke(app, ["analyze", str(SPEC)]).stdout
    assert "server-reported (vLLM per-request metrics and usage in the response body" in table
    assert "server_queue_wait: 3 of 3 completed, mean 18.33 ms, p50 10.00 ms" in table
    assert "11 of 27 drafted tokens accepted (40.7%)" in table
    assert "formula with one fleet step time of 9.56 ms" in table
    markdown = runner.invoke(app, ["analyze", str(SPEC), "-f", "markdown"]).stdout
    assert "### Server-reported, per request (the engine's figures, not this trace's)" in markdown
    out = tmp_path / "requests.csv"
    assert runner.invoke(app, ["analyze", str(SPEC), "--requests-out", str(out)]).exit_code == 0
    header = out.read_text().splitlines()[0].split(",")
    assert {"server_queue_wait_ns", "cached_tokens", "spec_steps"} <= set(header)
