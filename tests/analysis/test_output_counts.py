"""An unknown output-token count is unavailable, never 1 (``analysis/output_counts.py``).

Hand-computed tables: five requests sent at 0..4 s with TTFT 100..500 ms and e2e
1.1..1.5 s; ``a``, ``b``, ``c`` complete, ``d`` fails with HTTP 429 before its first token,
``e`` is closed by the client (499) after its first token. Every completed request ends
by 5.5 s (``e``'s cancellation at 4 + 1.5 s), so the window is 5.5 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.analysis import unavailable as un
from servetrace.cli import app
from servetrace.rules import outcome
from tests.conftest import MS, events, make_request

runner = CliRunner()
DATA = Path(__file__).parent.parent / "data"
BURST = DATA / "real" / "burstgpt-replay" / "detail_log_scale100_prompt500.json"
TRTLLM = DATA / "engines" / "trtllm" / "perf_metrics.json"
BURST_MAP = [
    "--from",
    "requests",
    "--column",
    "end=record_time",
    "--column",
    "ttft=first_chunk_time",
    "--column",
    "e2e=total_chunk_time",
    "--column",
    "prompt_tokens=sampled_in_num",
]
COLUMNS = {
    "request_id": "id",
    "arrival": "sent_ms",
    "ttft": "ttft_ms",
    "e2e": "latency_ms",
    "prompt_tokens": "n_in",
    "error_code": "status",
}
CLI_MAP = [
    "--from",
    "requests",
    "--time-unit",
    "ms",
    *(x for k, v in COLUMNS.items() for x in ("--column", f"{k}={v}")),
]
UNKNOWN = "no output token counts"


def _table(tmp_path: Path, n_out: list[str] | None, name: str = "t.csv") -> Path:
    rows = [
        ("a", 0, 100, 1100, 200),
        ("b", 1000, 200, 1200, 200),
        ("c", 2000, 300, 1300, ""),
        ("d", 3000, "", 5, 429),
        ("e", 4000, 500, 1500, 499),
    ]
    head = "id,sent_ms,ttft_ms,latency_ms,n_in,status" + (",n_out" if n_out else "")
    lines = [head]
    for i, (rid, sent, ttft, e2e, status) in enumerate(rows):
        line = f"{rid},{sent},{ttft},{e2e},100,{status}"
        lines.append(line + (f",{n_out[i]}" if n_out else ""))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _analyze(path: Path, counted: bool) -> servetrace.Analysis:
    columns = {**COLUMNS, **({"output_tokens": "n_out"} if counted else {})}
    return servetrace.analyze(path, from_format="requests", time_unit="ms", columns=columns)


def test_reason_code_is_the_gates() -> None:
    assert outcome.Reason.OUTPUT_UNKNOWN.value == un.OUTPUT_UNKNOWN
    assert outcome.Reason.OUTPUT_UNKNOWN.status is outcome.Status.SKIP
    assert set(un.OUTPUT_RATES) <= set(outcome.RATES)


def test_without_counts_nothing_is_computed_from_a_guess(tmp_path: Path) -> None:
    s = _analyze(_table(tmp_path, None), counted=False)
    requests = s.requests.sort("request_id")
    # a, b, c and e reached a first token: count unknown; d never did: 0 delivered, known
    assert requests["output_tokens"].to_list() == [None, None, None, 0, None]
    assert requests["tpot_ns"].null_count() == 5
    assert requests["formula_residual_ns"].filter(requests["outcome"] == "completed").null_count()
    summary = s.summary
    assert summary.output_uncounted == 3
    assert summary.throughput["requests_per_s"] == pytest.approx(3 / 5.5)
    assert summary.throughput["output_tokens_per_s"] is None
    assert summary.throughput["total_tokens_per_s"] is None  # prompts known, outputs not
    assert summary.metrics["tpot"]["count"] == 0
    assert summary.tokens["output_tokens"]["count"] == 0
    assert summary.formula.per_request.checked == 0
    assert summary.cancelled["output_tokens_delivered"] is None
    assert summary.errored["output_tokens_delivered"] == 0
    gone = servetrace.to_dict(s)["unavailable"]
    for name in ("output_tokens_per_s", "total_tokens_per_s", "output_tokens", "tpot", "formula"):
        assert gone[name] == UNKNOWN


def test_with_counts_the_same_table_is_measured(tmp_path: Path) -> None:
    s = _analyze(_table(tmp_path, ["11", "11", "11", "0", "3"]), counted=True).summary
    assert s.output_uncounted == 0
    # 33 output tokens of a, b, c over 5.5 s; prompts 3 × 100
    assert s.throughput["output_tokens_per_s"] == pytest.approx(33 / 5.5)
    assert s.throughput["total_tokens_per_s"] == pytest.approx(333 / 5.5)
    # TPOT = (e2e − ttft) / 10 = 100 ms for each of a, b and c
    assert s.metrics["tpot"]["count"] == 3
    assert s.metrics["tpot"]["p50"] == pytest.approx(100 * MS)
    assert s.cancelled["output_tokens_delivered"] == 3
    assert not {"tpot", "output_tokens_per_s"} & set(un.unavailable(s))


def test_some_counts_unknown_rates_unavailable_distributions_over_the_rest(
    tmp_path: Path,
) -> None:
    """b's count is missing: a sum over a and c would undercount, TPOT describes a and c."""
    analysis = _analyze(_table(tmp_path, ["11", "", "11", "0", "3"]), counted=True)
    s = analysis.summary
    assert s.output_uncounted == 1
    assert s.throughput["output_tokens_per_s"] is None
    assert s.throughput["total_tokens_per_s"] is None
    assert s.metrics["tpot"]["count"] == 2
    assert s.metrics["tpot"]["p50"] == pytest.approx(100 * MS)
    assert s.tokens["output_tokens"]["count"] == 2
    assert s.cancelled["output_tokens_delivered"] == 3
    assert un.unavailable(s) == {
        **dict.fromkeys(("queue_wait", "prefill", "requeued", "preemptions"), "client trace"),
        "delivery_tail": "no completion time apart from the last token",
        "itl": "request-level export",
        "output_tokens_per_s": UNKNOWN,
        "total_tokens_per_s": UNKNOWN,
    }


def test_canonical_token_events_keep_the_sum_of_ticks(tmp_path: Path) -> None:
    """A log with token events: Σ tokens of ticks, as before (2 + 3 = 5, TPOT 10/4 ms)."""
    path = tmp_path / "log.parquet"
    events(
        make_request("a", admission=1, first=5, ticks=[15], tokens=[2, 3], complete=15)
    ).write_parquet(path)
    s = servetrace.analyze(path)
    assert s.requests["output_tokens"].to_list() == [5]
    assert s.requests["tpot_ns"].to_list() == [pytest.approx(10 * MS / 4)]
    assert s.summary.output_uncounted == 0
    assert s.summary.throughput["output_tokens_per_s"] == pytest.approx(5 / 0.015)


def test_request_level_canonical_log_needs_its_terminal_count(tmp_path: Path) -> None:
    """ticks_available=false: the one tick is no count; output_tokens on the terminal is."""
    rows = [
        *make_request("a", first=100, complete=1100, output_tokens=11),
        *make_request("b", arrival=1000, first=1200, complete=2200),
    ]
    path = tmp_path / "log.parquet"
    events(rows).with_columns(ticks_available=pl.lit(False)).write_parquet(path)
    s = servetrace.analyze(path)
    by_id = dict(s.requests.select("request_id", "output_tokens").iter_rows())
    assert by_id == {"a": 11, "b": None}
    assert s.requests.sort("request_id")["tpot_ns"].to_list() == [pytest.approx(100 * MS), None]
    assert s.summary.throughput["output_tokens_per_s"] is None
    assert s.summary.metrics["tpot"]["count"] == 1


def test_cli_table_and_json_say_unavailable_not_one(tmp_path: Path) -> None:
    path = _table(tmp_path, None)
    result = runner.invoke(app, ["analyze", str(path), *CLI_MAP], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.stderr
    assert "3 completed" in result.stdout
    assert "0.55 req/s, output tok/s unavailable (no output token counts)" in result.stdout
    assert "tpot (no output token counts)" in result.stdout
    assert "tokens delivered unknown (no output token counts) before cancel" in result.stdout
    assert "output tok/s," not in result.stdout
    assert "output token counts are unknown" in result.stderr
    report = json.loads(
        runner.invoke(app, ["analyze", str(path), *CLI_MAP, "--format", "json"]).stdout
    )
    assert report["throughput"]["output_tokens_per_s"] is None
    assert report["throughput"]["total_tokens_per_s"] is None
    assert report["throughput"]["requests_per_s"] == pytest.approx(3 / 5.5)
    assert report["unavailable"]["tpot"] == UNKNOWN
    assert report["cancelled"]["output_tokens_delivered"] is None
    markdown = runner.invoke(app, ["analyze", str(path), *CLI_MAP, "--format", "markdown"])
    assert "output tok/s unavailable (no output token counts)" in markdown.stdout


def test_burstgpt_repro_prints_no_guessed_rates() -> None:
    """The issue's repro: "1 output tok/s, 513 total tok/s" and "9 of 500 within" are gone."""
    result = runner.invoke(app, ["analyze", str(BURST), *BURST_MAP], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.stderr
    assert "1.19 req/s, output tok/s unavailable (no output token counts)" in result.stdout
    assert "total tok/s" not in result.stdout
    assert "within" not in result.stdout
    assert "500 completed requests have no output-token count" in result.stdout
    # the log does carry out_len: mapped, the rates come back (Σ out_len / window)
    raw = json.loads(BURST.read_text())
    counted = servetrace.analyze(
        BURST,
        from_format="requests",
        columns={
            "end": "record_time",
            "ttft": "first_chunk_time",
            "e2e": "total_chunk_time",
            "output_tokens": "out_len",
        },
    ).summary
    total = sum(r["out_len"] for r in raw.values())
    window = counted.throughput["window_s"]
    assert counted.throughput["output_tokens_per_s"] == pytest.approx(total / window)
    assert counted.output_uncounted == 0


def test_trtllm_has_no_output_counts() -> None:
    report = servetrace.to_dict(servetrace.analyze(TRTLLM))
    assert report["throughput"]["output_tokens_per_s"] is None
    assert report["throughput"]["requests_per_s"] is not None
    assert report["unavailable"]["tpot"] == UNKNOWN
    assert report["unavailable"]["output_tokens"] == UNKNOWN


def test_check_skips_with_the_reason(tmp_path: Path) -> None:
    path = _table(tmp_path, None)
    rules = [
        "--slo",
        "throughput.output_tokens_per_s>=1",
        "--slo",
        "throughput.total_tokens_per_s>=1",
        "--slo",
        "tpot.p50<=200ms",
        "--slo",
        "ttft.mean<=1s",
    ]
    result = runner.invoke(app, ["check", str(path), *CLI_MAP, *rules])
    assert result.exit_code == 0, result.stdout
    out = result.stdout
    assert (
        "SKIP throughput.output_tokens_per_s: unavailable: output token counts are unknown in "
        "this trace: no throughput.output_tokens_per_s"
    ) in out
    assert "SKIP throughput.total_tokens_per_s: unavailable: output token counts" in out
    assert "SKIP tpot.p50: unavailable: output token counts are unknown in this trace" in out
    assert "PASS ttft.mean" in out
    strict = runner.invoke(app, ["check", str(path), *CLI_MAP, *rules, "--require-all"])
    assert strict.exit_code == 1
    report = json.loads(
        runner.invoke(app, ["check", str(path), *CLI_MAP, *rules, "--format", "json"]).stdout
    )
    reasons = {r["rule"]: r["reason"] for r in report["rules"]}
    assert reasons["throughput.output_tokens_per_s>=1"] == "output_count_unknown"
    assert reasons["tpot.p50<=200ms"] == "output_count_unknown"


def test_check_against_an_uncounted_baseline_skips(tmp_path: Path) -> None:
    """The baseline's JSON report says why it has no rate: the budget is skipped there."""
    baseline = tmp_path / "base.json"
    report = runner.invoke(app, ["analyze", str(_table(tmp_path, None)), *CLI_MAP, "-f", "json"])
    baseline.write_text(report.stdout)
    counted = _table(tmp_path, ["11", "11", "11", "0", "3"], "counted.csv")
    result = runner.invoke(
        app,
        [
            "check",
            str(counted),
            *CLI_MAP,
            "--column",
            "output_tokens=n_out",
            "--baseline",
            str(baseline),
            "--max-regression",
            "throughput.output_tokens_per_s:-10%",
        ],
    )
    assert result.exit_code == 0, result.stdout
    assert (
        "unavailable in the baseline: output token counts are unknown in the baseline"
        in result.stdout
    )


def test_compare_lists_unavailable_instead_of_a_ratio(tmp_path: Path) -> None:
    base, cand = _table(tmp_path, None, "a.csv"), _table(tmp_path, None, "b.csv")
    result = runner.invoke(
        app, ["compare", str(base), str(cand), *CLI_MAP, "--verbose"], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 0, result.stdout
    text = " ".join(result.stdout.split())  # the report wraps its lines
    line = text[text.index("Unavailable:") :]
    assert "output_tokens_per_s (no output token counts)" in line
    assert "tpot (no output token counts)" in line
    assert not [x for x in result.stdout.splitlines() if x.startswith("throughput.output")]
    report = json.loads(
        runner.invoke(app, ["compare", str(base), str(cand), *CLI_MAP, "-f", "json"]).stdout
    )
    (gone,) = report["unavailable"].values()  # keyed by candidate label
    assert gone["tpot"] == UNKNOWN
    assert gone["output_tokens_per_s"] == UNKNOWN


def test_by_group_rates_are_unavailable(tmp_path: Path) -> None:
    """--by: each group's rates follow its own counts (policy x uncounted, y counted)."""
    rows = [
        *make_request("a", first=100, complete=1100, policy="x"),
        *make_request("b", arrival=1000, first=1200, complete=2200, output_tokens=11, policy="x"),
        *make_request("c", first=100, complete=1100, output_tokens=11, policy="y"),
        *make_request("d", arrival=1000, first=1200, complete=3000, output_tokens=21, policy="y"),
    ]
    path = tmp_path / "log.parquet"
    events(rows).with_columns(ticks_available=pl.lit(False)).write_parquet(path)
    analysis = servetrace.analyze(path, by="policy")
    assert analysis.groups is not None
    x, y = analysis.groups["x"], analysis.groups["y"]
    assert x.output_uncounted == 1
    assert x.throughput["output_tokens_per_s"] is None
    assert x.throughput["requests_per_s"] == pytest.approx(2 / 2.2)  # 0 → 2.2 s
    assert set(un.OUTPUT_RATES) <= set(un.unavailable(x))
    assert x.metrics["tpot"]["count"] == 1  # b: 1000 ms / 10
    assert y.output_uncounted == 0
    assert y.throughput["output_tokens_per_s"] == pytest.approx(32 / 3.0)  # 0 → 3 s
    assert not set(un.OUTPUT_RATES) & set(un.unavailable(y))
    report = servetrace.to_dict(analysis)
    assert report["unavailable"]["output_tokens_per_s"] == UNKNOWN


SLICE = ["--slice", "2s", "-f", "json"]


def test_slices_of_a_request_level_trace_have_no_token_rate(tmp_path: Path) -> None:
    """--slice: the one synthetic tick per request is no emission count (was 1 tok/request)."""
    path = _table(tmp_path, ["11", "11", "11", "0", "3"])
    result = runner.invoke(
        app,
        ["analyze", str(path), *CLI_MAP, "--column", "output_tokens=n_out", *SLICE],
    )
    assert result.exit_code == 0, result.stderr
    slices = json.loads(result.stdout)["slices"]
    assert [s["arrivals"] for s in slices] == [2, 2, 1]
    assert [s["output_tokens_per_s"] for s in slices] == [None, None, None]


def test_declared_window_does_not_sum_unknown_counts() -> None:
    """A run's declared duration (4 s): 2 completed → 0.5 req/s; one count unknown → no tok/s."""
    from servetrace.runs.throughput import declared_throughput

    requests = pl.DataFrame(
        {
            "outcome": ["completed", "completed"],
            "output_tokens": [10, None],
            "prompt_tokens": [5, 7],
        },
        schema={"outcome": pl.String, "output_tokens": pl.Int64, "prompt_tokens": pl.Int64},
    )
    got = declared_throughput(requests, 4.0, None)
    assert got["requests_per_s"] == 0.5
    assert got["output_tokens_per_s"] is None
    assert got["total_tokens_per_s"] is None


@pytest.mark.parametrize("batch_rows", [1000, 2_000_000])
def test_streamed_analysis_agrees(tmp_path: Path, batch_rows: int) -> None:
    """The same unknown counts whether the trace is analysed in memory or in batches."""
    path = _table(tmp_path, ["11", "", "11", "0", "3"])
    columns = {**COLUMNS, "output_tokens": "n_out"}
    kwargs = {"from_format": "requests", "time_unit": "ms", "columns": columns}
    whole = servetrace.analyze(path, **kwargs).summary  # type: ignore[arg-type]
    streamed = servetrace.analyze(
        path,
        streaming=True,
        batch_rows=batch_rows,
        **kwargs,  # type: ignore[arg-type]
    ).summary
    assert streamed.output_uncounted == whole.output_uncounted == 1
    assert streamed.throughput == whole.throughput
    assert streamed.metrics["tpot"] == whole.metrics["tpot"]
