"""Unavailable is a state: analyze, compare and check say why."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import servetrace
from servetrace.analysis import unavailable as un
from servetrace.cli import app
from servetrace.rules import outcome

runner = CliRunner()
LLMPERF = Path(__file__).parent.parent / "data" / "real" / "llmperf-leaderboard" / "individual"
TOGETHER, BEDROCK = LLMPERF / "together_13b.json", LLMPERF / "bedrock_13b.json"


def test_reason_codes_are_the_gates() -> None:
    """One source of truth: the codes and metric sets are check's SKIP reasons."""
    assert outcome.Reason.CLIENT_TRACE.value == un.CLIENT_TRACE
    assert outcome.Reason.NO_TOKEN_TIMES.value == un.NO_TOKEN_TIMES
    assert outcome.Reason.ARRIVAL_UNKNOWN.value == un.ARRIVAL_UNKNOWN
    assert un.SERVER_SIDE == outcome.SERVER_SIDE
    assert set(un.TOKEN_TIMED) <= set(outcome.TOKEN_TIMED)


def test_analyze_json_lists_unavailable_metrics_with_reasons() -> None:
    report = servetrace.to_dict(servetrace.analyze(TOGETHER))
    assert report["unavailable"] == {
        "queue_wait": "client trace",
        "prefill": "client trace",
        "requeued": "client trace",
        "preemptions": "client trace",
        "delivery_tail": "no completion time apart from the last token",
        "itl": "request-level export",
        "throughput": "no send times",
        "concurrency": "no send times",
    }


def test_client_table_hides_rows_without_information() -> None:
    result = runner.invoke(app, ["analyze", str(TOGETHER)], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    rows = [line.split("│")[1].strip() for line in result.stdout.splitlines() if "│" in line]
    assert rows == ["ttft", "decode", "response", "e2e", "tpot"]
    assert "unavailable: queue_wait (client trace)" in result.stdout
    assert "itl (request-level export)" in result.stdout


def test_server_trace_has_nothing_unavailable(tmp_path: Path) -> None:
    from tests.conftest import events, make_request

    path = tmp_path / "server.parquet"
    events(make_request("a", admission=1, first=5, ticks=[6, 7], complete=7)).write_parquet(path)
    assert servetrace.to_dict(servetrace.analyze(path))["unavailable"] == {}


def test_compare_gives_unavailable_its_own_line() -> None:
    result = runner.invoke(app, ["compare", str(TOGETHER), str(BEDROCK)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.stderr
    hidden = next(line for line in result.stdout.splitlines() if "No significant change" in line)
    assert "itl" not in hidden and "preemptions" not in hidden
    text = result.stdout.replace("\n", " ")
    line = text[text.index("Unavailable:") :]
    assert "itl (request-level export)" in line and "preemptions (client trace)" in line
    md = runner.invoke(app, ["compare", str(TOGETHER), str(BEDROCK), "--format", "markdown"])
    assert "Unavailable: " in md.stdout and "`itl.p99`" not in md.stdout
    doc = json.loads(
        runner.invoke(app, ["compare", str(TOGETHER), str(BEDROCK), "--format", "json"]).stdout
    )
    assert doc["unavailable"][str(BEDROCK)]["itl"] == "request-level export"
    comparison = servetrace.compare(TOGETHER, BEDROCK)
    assert comparison.unavailable["preemptions"] == "client trace"
