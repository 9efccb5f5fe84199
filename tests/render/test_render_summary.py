"""Each renderer of an analysis summary, on the hand-computed four-request trace of
``tests/analysis/test_summary.py``: ns in, ms (or s) out, every figure checked."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

from servetrace.analysis.memory import analyze_events
from servetrace.analysis.result import AnalysisOptions
from servetrace.analysis.summary import Summary
from servetrace.render.summary import (
    distribution_ms,
    render_csv,
    render_json,
    render_markdown,
    render_table,
    report_dict,
)
from servetrace.version import SCHEMA_VERSION
from tests.analysis.test_summary import TARGETS, four_requests

INPUTS = ("t.parquet",)
# metric: count, mean, p50, p90, p99, max as the table shows them (completed r1, r2)
TABLE = {
    "queue_wait": ("2", "15.00", "15.00", "19.00", "19.90", "20.00"),  # 10, 20
    "prefill": ("2", "40.00", "40.00", "56.00", "59.60", "60.00"),  # 20, 60
    "ttft": ("2", "55.00", "55.00", "75.00", "79.50", "80.00"),  # 30, 80
    "decode": ("2", "40.00", "40.00", "56.00", "59.60", "60.00"),  # 20, 60
    "response": ("2", "95.00", "95.00", "131.0", "139.1", "140.0"),  # 50, 140
    "e2e": ("2", "100.0", "100.0", "140.0", "149.0", "150.0"),  # 50, 150
    "delivery_tail": ("2", "5.00", "5.00", "9.00", "9.90", "10.00"),  # 0, 10
    "itl": ("5", "16.00", "20.00", "20.00", "20.00", "20.00"),  # 10 10 20 20 20
    "itl_max": ("2", "15.00", "15.00", "19.00", "19.90", "20.00"),
    "tpot": ("2", "15.00", "15.00", "19.00", "19.90", "20.00"),
    "requeued": ("2", "0.00", "0.00", "0.00", "0.00", "0.00"),
}
LINES = [
    "throughput over 0.17 s: 11.76 req/s, 41 output tok/s, 924 total tok/s",
    "goodput (ttft<=50ms and tpot<=25ms): 1 of 2 completed met every target (50.0%), 5.88 req/s",
    "concurrency: queued mean 0.4 / peak 2, running mean 1.4 / peak 2, in_system mean 1.8 / peak 3",
    "cancelled in: queued 1; 0 tokens delivered before cancel",
    "in flight at end of trace: 1 (censored: not in latency statistics)",
    "formula T ≈ TTFT + (N−1)·ITL, per request: 2 of 2 within |residual| ≤ max(1 ms, 1%) (100.0%)",
    # fleet ITL (20 + 60) / (2 + 3) = 16; r1: 50 − 30 − 2·16 = −12, r2: 140 − 80 − 3·16 = +12
    "formula with one fleet ITL of 16.00 ms: 0 of 2 within (0.0%); worst: r1 (-12 ms), r2 (+12 ms)",
]
ACCOUNTING = (
    "4 requests (18 rows): 2 completed, 1 cancelled, 1 in flight, 0 invalid (0 rows quarantined)"
)
# shares of the mean response 15 + 40 + 40 = 95 ms
DECOMPOSITION = (
    "mean response = queue_wait 15.0 ms (16%) → prefill 40.0 ms (42%) → decode 40.0 ms (42%)"
)


@pytest.fixture(scope="module")
def summary() -> Summary:
    return analyze_events(four_requests(), AnalysisOptions(goodput=TARGETS)).summary


def test_json_report_converts_ns_to_the_unit_it_names(summary: Summary) -> None:
    report = json.loads(render_json(report_dict(summary, INPUTS)))
    assert report["schema_version"] == SCHEMA_VERSION and report["inputs"] == list(INPUTS)
    ttft = dict(report["metrics"]["ttft"])
    # The percentile intervals ride along (add-only; tested in tests/render/test_survival.py).
    assert ttft.pop("ci95")["confidence"] == 0.95
    assert ttft == {
        "unit": "ms",
        "count": 2,
        "mean": 55.0,
        "std": 25.0,
        "min": 30.0,
        "p50": 55.0,
        "p90": 75.0,
        "p95": 77.5,
        "p99": 79.5,
        "p99_9": pytest.approx(79.95),
        "max": 80.0,
    }
    assert report["metrics"]["itl"]["count"] == 5 and report["metrics"]["itl"]["mean"] == 16.0
    assert report["accounting"]["rows"] == 18 and report["outcomes"]["in_flight"] == 1
    assert report["throughput"]["window_s"] == pytest.approx(0.17)
    assert report["throughput"]["unit"]["requests_per_s"] == "req/s"
    assert report["concurrency"]["in_system_peak"] == 3
    assert report["concurrency"]["queued_mean"] == pytest.approx(70 / 170)
    assert report["in_flight"]["age_at_end"]["unit"] == "s"
    assert report["in_flight"]["age_at_end"]["max"] == pytest.approx(0.07)
    assert report["cancelled"]["time_to_cancel"]["mean"] == 30.0
    assert "time_to_cancel_ns" not in report["cancelled"]
    assert report["goodput"]["attainment_by_target"] == {"ttft<=50ms": 0.5, "tpot<=25ms": 1.0}
    formula = report["formula"]
    assert formula["tolerance"] == {"abs_ms": 1.0, "rel": 0.01}
    assert formula["fleet"]["fleet_itl_ms"] == 16.0
    assert formula["fleet"]["residual"]["min"] == -12.0
    assert [w["residual_ms"] for w in formula["fleet"]["worst"]] == [-12.0, 12.0]
    assert formula["fleet"]["worst"][0]["likely_cause"] is None
    assert report["tokens"]["output_tokens"]["unit"] == "tokens"
    assert report["tokens"]["output_tokens"]["mean"] == 3.5


def test_json_naming_and_groups(summary: Summary) -> None:
    report = report_dict(summary, INPUTS, groups={"a": summary}, by="policy", naming="vllm")
    assert report["naming"] == "vllm"
    assert report["metrics"]["e2el"]["mean"] == 100.0  # vLLM's name for e2e
    assert report["by"]["column"] == "policy"
    assert report["by"]["groups"][0]["value"] == "a"
    assert report["by"]["groups"][0]["metrics"]["e2el"]["max"] == 150.0


def test_distribution_units() -> None:
    stats = {"count": 1, "mean": 2_500_000_000, "max": None}
    assert distribution_ms(stats)["mean"] == 2500.0
    assert distribution_ms(stats, "s")["mean"] == 2.5
    assert distribution_ms(stats, "us")["mean"] == 2_500_000.0
    assert distribution_ms(stats)["max"] is None and distribution_ms(stats)["count"] == 1


def test_markdown(summary: Summary) -> None:
    lines = render_markdown(summary, INPUTS).splitlines()
    assert lines[0] == "### servetrace: t.parquet"
    assert lines[2] == ACCOUNTING
    assert lines[4] == "| metric (ms) | count | mean | p50 | p90 | p99 | max |"
    rows = {line.split(" | ")[0][2:]: tuple(line[2:-2].split(" | ")[1:]) for line in lines[6:17]}
    assert rows == TABLE
    assert DECOMPOSITION in lines
    assert [line[2:] for line in lines if line.startswith("- ")] == LINES


def test_csv_has_one_row_per_metric_in_ms(summary: Summary) -> None:
    rows = list(csv.reader(io.StringIO(render_csv({None: summary}, None))))
    assert rows[0] == [
        "metric",
        "unit",
        "count",
        "mean",
        "std",
        "min",
        "p50",
        "p90",
        "p95",
        "p99",
        "p99_9",
        "max",
    ]
    by_metric = {row[0]: row for row in rows[1:]}
    assert list(by_metric) == list(TABLE)
    ttft = ["ttft", "ms", "2", "55.0", "25.0", "30.0", "55.0", "75.0", "77.5", "79.5"]
    assert by_metric["ttft"][:10] == ttft  # count, mean, std, min, p50, p90, p95, p99
    assert float(by_metric["itl"][4]) == pytest.approx(24**0.5)  # std of 10 10 20 20 20


def test_csv_by_group_leads_with_the_group_value(summary: Summary) -> None:
    rows = list(csv.reader(io.StringIO(render_csv({"fcfs": summary}, "policy"))))
    assert rows[0][:2] == ["policy", "metric"]
    assert rows[1][:3] == ["fcfs", "queue_wait", "ms"]
    assert len(rows) == 1 + len(TABLE)


def test_table(summary: Summary) -> None:
    console = Console(width=120, record=True, color_system=None)
    console.print(render_table(summary, INPUTS))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert lines[0] == ACCOUNTING and lines[1] == "t.parquet"
    cells = {}
    for line in lines:
        if line.startswith("│"):
            name, *values = (cell.strip() for cell in line.strip("│").split("│"))
            cells[name] = tuple(values)
    assert cells == TABLE
    assert "latencies of completed requests, in ms; itl pools every gap" in lines
    assert DECOMPOSITION in lines
    bar = lines[lines.index(DECOMPOSITION) + 1]
    assert bar == "█" * 40  # round(40·15/95) + round(40·40/95) · 2 = 6 + 17 + 17
    assert lines[-len(LINES) :] == LINES
