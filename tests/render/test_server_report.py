"""The report's server-metrics sections without a browser: one per family right after the
over-time charts, sentences read from the numbers, the trace side said unavailable for a
client trace, the findings table's cells the JSON's; and ``report --server-metrics``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import servetrace
from servetrace.api import with_server_metrics
from servetrace.cli import app
from servetrace.render.report import report_sections
from servetrace.render.report_sections import TraceView
from tests.analysis.test_server_views import write_hand

pytest.importorskip("altair")
runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return write_hand(tmp_path_factory.mktemp("hand"))


def _sections(trace: Path, prom: Path) -> dict[str, object]:
    analysis = with_server_metrics(servetrace.analyze(trace), prom, None, 0)
    ((_, sections),) = report_sections([TraceView(str(trace), analysis)])
    return {s.id: s for s in sections}


def test_a_section_per_family_after_the_over_time_charts(files: tuple[Path, Path, Path]) -> None:
    by = _sections(files[0], files[2])
    assert list(by) == [
        "t0-summary",
        "t0-cdfs",
        "t0-over-time",
        "t0-server-vllm-num-requests-waiting",
        "t0-server-vllm-num-requests-running",
        "t0-server-vllm-request-success-total",
        "t0-server-vllm-prompt-tokens-total",
        "t0-server-vllm-time-to-first-token-seconds",
        "t0-server-consistency",
        "t0-latency-time",
        "t0-waterfall",
        "t0-formula",
    ]
    running = by["t0-server-vllm-num-requests-running"]
    assert running.sentence == (  # type: ignore[attr-defined]
        "It peaked at 2 around 2.0 s (mean 0.75). Dashed: trace: running at the same "
        "scrapes. running_gauge: max |server − trace| 1, mean 0.333 over 3; worst at 2.000 s "
        "— likely: the server counts running requests the trace does not hold (other "
        "clients or replicas)."
    )
    ttft = by["t0-server-vllm-time-to-first-token-seconds"]
    assert ttft.sentence.startswith(  # type: ignore[attr-defined]
        "The mean peaked at 1,900.0 ms around 2.0 s (mean 1,550.0 ms). Dashed: trace: mean "
        "TTFT over the same intervals."
    )
    chart = by["t0-server-vllm-num-requests-waiting"].charts[0][1]  # type: ignore[attr-defined]
    x = chart["encoding"]["x"]
    assert x["scale"] == {"domain": [0, 2.7], "nice": True}
    assert x["title"] == "time since trace start (s)"  # the over-time charts' axis


def test_the_findings_table_reads_the_json(files: tuple[Path, Path, Path]) -> None:
    analysis = with_server_metrics(servetrace.analyze(files[0]), files[2], None, 0)
    view = TraceView(str(files[0]), analysis)
    ((_, sections),) = report_sections([view])
    table = next(s for s in sections if s.id == "t0-server-consistency").table
    assert table is not None
    rows = {row[0][0]: row for row in table["rows"]}
    running = rows["running_gauge"]
    assert [text for text, _ in running[2:6]] == ["3", "1", "0.333", "0.333"]
    assert running[3][1] == "consistency.running_gauge.max_abs"
    assert view.json["consistency"]["running_gauge"]["max_abs"] == 1
    assert rows["preemption_counter"][2][0] == ("unavailable: no vllm:num_preemptions_total series")


def test_a_client_trace_says_why_its_side_is_not_drawn(files: tuple[Path, Path, Path]) -> None:
    by = _sections(files[1], files[2])
    waiting = by["t0-server-vllm-num-requests-waiting"]
    assert "The trace side is not drawn: the trace has no admissions" in waiting.sentence  # type: ignore[attr-defined]
    spec = waiting.charts[0][1]  # type: ignore[attr-defined]
    lines = {row["line"] for rows in spec["datasets"].values() for row in rows}
    assert lines == {"server"}  # the trace's line is not drawn
    legend = spec["encoding"]["color"]["legend"]["labelExpr"]
    assert '"server: vllm:num_requests_waiting"' in legend and "trace" not in legend


def test_report_cli_with_server_metrics(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    trace, _, prom = files
    out = tmp_path / "r.html"
    done = runner.invoke(
        app,
        [
            "report",
            str(trace),
            "--server-metrics",
            str(prom),
            "--clock-offset-ms",
            "0",
            "-o",
            str(out),
        ],
    )
    assert done.exit_code == 0, done.output
    html = out.read_text()
    assert (
        'id="t0-server-consistency"' in html and 'id="t0-server-vllm-num-requests-waiting"' in html
    )
    plain = tmp_path / "plain.html"
    assert runner.invoke(app, ["report", str(trace), "-o", str(plain)]).exit_code == 0
    assert "t0-server-" not in plain.read_text()
    two = runner.invoke(
        app, ["report", str(trace), str(trace), "--server-metrics", str(prom), "-o", str(out)]
    )
    assert two.exit_code == 2 and "--server-metrics describes one server" in two.stderr
    bad = runner.invoke(
        app, ["report", str(trace), "--server-metrics", str(tmp_path / "none.prom"), "-o", str(out)]
    )
    assert bad.exit_code == 3 and "no such file" in bad.stderr


def test_long_series_are_thinned_alike_on_both_sides() -> None:
    import polars as pl

    from servetrace.analysis.server_series import FamilySeries
    from servetrace.render.server_charts import POINTS, family_chart

    n = 2 * POINTS + 1  # every 3rd scrape: 1,001 points a line
    t = [i * 1_000_000 for i in range(n)]
    frame = pl.DataFrame(
        {
            "t_ns": t,
            "end_ns": [None] * n,
            "labels": [""] * n,
            "value": [float(i % 7) for i in range(n)],
        },
        schema={"t_ns": pl.Int64, "end_ns": pl.Int64, "labels": pl.String, "value": pl.Float64},
    )
    fs = FamilySeries(
        "vllm:num_requests_running", "gauge", "value", 1, frame, frame.slice(5), "running"
    )
    spec, k = family_chart(fs, 0, t[-1])
    assert k == 3
    (rows,) = spec["datasets"].values()
    server = [r["t_s"] for r in rows if r["line"] == "server"]
    trace = [r["t_s"] for r in rows if r["line"] == "trace"]
    assert len(server) == 1 + (n - 1) // 3 and server[:2] == [0, 0.003]
    assert trace == server[2:]  # the trace starts at 5 ms: the server's instants from 6 ms


def test_a_difference_of_one_reads_in_the_singular() -> None:
    from servetrace.render.server_metrics import _counted

    assert _counted(1, "requests") == "request"
    assert _counted(1, "requests per bucket") == "request per bucket"
    assert _counted(2, "tokens") == "tokens"
    assert _counted(1.5, "preemptions") == "preemptions"


def test_the_findings_say_whose_families_when_not_vllms(tmp_path: Path) -> None:
    from tests.analysis.server_fixtures import simulated_pair

    simulated_pair(tmp_path, "trtllm")
    by = _sections(tmp_path / "t.parquet", tmp_path / "m.prom")
    assert "t0-server-trtllm-num-requests-running" in by
    sentence = by["t0-server-consistency"].sentence  # type: ignore[attr-defined]
    assert sentence.startswith("TensorRT-LLM's families. Clock: ")
    assert sentence.endswith("Every available finding agrees: server and trace count the same.")
