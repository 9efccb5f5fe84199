"""Etalon's fluidity-index: a hand-computed case, and Etalon's own loop as the reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.analysis.fluidity import FluidityTargets, parse_targets
from servetrace.analysis.memory import analyze_events
from servetrace.analysis.result import AnalysisOptions
from servetrace.cli import app
from servetrace.errors import UsageError
from tests.conftest import MS, events, make_request

TARGETS = FluidityTargets(ttft_ns=500 * MS, tbt_ns=50 * MS)


def etalon_miss(inter_token_times: list[int], ttft: int, tbt: int) -> tuple[int, int]:
    """project-etalon/etalon metric_utils.get_request_level_deadline_miss_rate, as written
    there (a loop with a slack), in integer ns: (missed deadlines, total deadlines)."""
    total = missed = slack = 0
    for i, x in enumerate(inter_token_times):
        if i == 0:
            if x <= ttft + slack:
                slack += ttft - x
                total += 1
                continue
            current = 1 + (x - slack - ttft) // tbt
        else:
            if x <= tbt + slack:
                slack += tbt - x
                total += 1
                continue
            current = (x - slack) // tbt
        missed += current
        total += current
        slack = 0
    return missed, total


def _fluidity(*requests: list[dict]) -> pl.DataFrame:
    analysis = analyze_events(events(*requests), AnalysisOptions(fluidity=TARGETS))
    return analysis.requests.sort("request_id")


def test_hand_computed_case() -> None:
    # ttft 500 ms, tbt 50 ms. Request a: first token at 400 (deadline 500: met, slack
    # 100); 520 (deadline 550: met); 700 (deadline 600: 100 ms late, so 1 + 100 // 50 = 3
    # deadlines missed, schedule restarts at 700); 740 (deadline 750: met); a chunk of 2
    # at 760 (deadlines 800 and 850: both met). 5 met + 3 missed = 8 deadlines:
    # fluidity-index 1 - 3/8 = 0.625; 1 of 6 tokens missed its deadline.
    # Request b: first token at 620 (120 ms late: 1 + 120 // 50 = 3 missed), then 660
    # (deadline 620 + 50 = 670: met): 1 - 3/4 = 0.25.
    # Request c: every token on its deadline exactly (500, 550, 600): index 1.
    frame = _fluidity(
        make_request(
            "a", first=400, ticks=[520, 700, 740, 760], tokens=[1, 1, 1, 1, 2], complete=760
        ),
        make_request("b", first=620, ticks=[660], complete=660),
        make_request("c", first=500, ticks=[550, 600], complete=600),
    )
    rows = {r["request_id"]: r for r in frame.iter_rows(named=True)}
    assert rows["a"]["fluidity_deadlines"] == 8
    assert rows["a"]["fluidity_missed"] == 3
    assert rows["a"]["fluidity_tokens_missed"] == 1
    assert rows["a"]["fluidity_index"] == 0.625
    assert (rows["b"]["fluidity_missed"], rows["b"]["fluidity_deadlines"]) == (3, 4)
    assert rows["b"]["fluidity_index"] == 0.25
    assert rows["c"]["fluidity_index"] == 1.0
    # Etalon's loop on the same inter-token times (a chunk: its gap, then zeros).
    assert etalon_miss([400 * MS, 120 * MS, 180 * MS, 40 * MS, 20 * MS, 0], 500 * MS, 50 * MS) == (
        3,
        8,
    )
    assert etalon_miss([620 * MS, 40 * MS], 500 * MS, 50 * MS) == (3, 4)


def test_equals_etalons_loop_on_random_requests() -> None:
    rng = np.random.default_rng(7)
    requests, expected = [], {}
    for i in range(300):
        n = int(rng.integers(1, 40))
        gaps = rng.choice([5, 20, 45, 50, 55, 80, 200], size=n) * MS
        gaps[0] = int(rng.choice([100, 450, 500, 520, 700, 1500])) * MS
        chunk = rng.choice([1, 1, 1, 2, 3], size=n)
        times = np.cumsum(gaps) / MS
        rid = f"r{i:03d}"
        requests.append(
            make_request(
                rid, first=times[0], ticks=times[1:], tokens=chunk.tolist(), complete=times[-1]
            )
        )
        inter = [int(g) for k, g in zip(chunk, gaps, strict=True) for g in [g] + [0] * (k - 1)]
        expected[rid] = etalon_miss(inter, TARGETS.ttft_ns, TARGETS.tbt_ns)
    frame = _fluidity(*requests)
    got = {
        r["request_id"]: (r["fluidity_missed"], r["fluidity_deadlines"])
        for r in frame.iter_rows(named=True)
    }
    assert got == expected


def test_targets_are_parsed_strictly() -> None:
    assert parse_targets("ttft=500ms,tbt=50ms") == TARGETS
    assert parse_targets(" tbt = 0.05s , ttft=0.5s") == TARGETS
    for bad in ("ttft=500ms", "ttft=500,tbt=50ms", "ttft=1ms,tbt=0ms", "x=1ms,tbt=1ms"):
        with pytest.raises(UsageError):
            parse_targets(bad)


def test_json_report_and_check_gate(tmp_path: Path) -> None:
    trace = tmp_path / "t.parquet"
    events(
        make_request(
            "a", first=400, ticks=[520, 700, 740, 760], tokens=[1, 1, 1, 1, 2], complete=760
        ),
        make_request("b", first=620, ticks=[660], complete=660),
        make_request("c", first=500, ticks=[550, 600], complete=600),
    ).write_parquet(trace)
    runner = CliRunner()
    result = runner.invoke(
        app, ["analyze", str(trace), "--fluidity", "ttft=500ms,tbt=50ms", "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    fluidity = json.loads(result.stdout)["fluidity"]
    assert fluidity["targets"] == {"ttft_ms": 500.0, "tbt_ms": 50.0}
    assert fluidity["index"]["p50"] == 0.625
    assert fluidity["index"]["min"] == 0.25
    assert (fluidity["deadlines"], fluidity["deadlines_missed"]) == (15, 6)
    assert (fluidity["tokens"], fluidity["tokens_missed"]) == (11, 2)
    assert fluidity["token_miss_fraction"] == pytest.approx(2 / 11)
    assert fluidity["requests_at_least_0_9"] == pytest.approx(1 / 3)
    fl = ["--fluidity", "ttft=500ms,tbt=50ms"]
    ok = runner.invoke(app, ["check", str(trace), "--slo", "fluidity.p50>=0.6", *fl])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["check", str(trace), "--slo", "fluidity.p50>=0.9", *fl])
    assert bad.exit_code == 1, bad.output
    missing = runner.invoke(app, ["check", str(trace), "--slo", "fluidity.p50>=0.9"])
    assert missing.exit_code == 2
    assert "--fluidity" in missing.output


def test_regression_budget_against_a_trace_and_a_json_baseline(tmp_path: Path) -> None:
    import servetrace

    rows = [
        make_request(f"r{i}", first=300 + 40 * i, ticks=[360 + 40 * i + 30 * k for k in range(5)])
        for i in range(30)
    ]
    for rid, request in enumerate(rows):
        request.append({**request[-1], "event": "completion"})
        del rid
    trace = tmp_path / "t.parquet"
    events(*rows).write_parquet(trace)
    targets = "ttft=500ms,tbt=50ms"
    same = servetrace.check(trace, "fluidity.p50:-5%", baseline=trace, fluidity=targets)
    assert same.passed
    report = servetrace.to_dict(servetrace.analyze(trace, fluidity=targets))
    from_json = servetrace.check(trace, "fluidity.mean:-5%", baseline=report, fluidity=targets)
    assert from_json.passed
    assert from_json.results[0].baseline == report["fluidity"]["index"]["mean"]
