"""The Perfetto timeline: exactly the slices each lifecycle says, at the metrics' times."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.analysis.memory import analyze_events
from servetrace.cli import app
from servetrace.errors import UsageError
from servetrace.render.slices import TimelineOptions, assign_lanes, rate_bin_ns
from servetrace.render.timeline import build_trace, parse_window
from tests.conftest import MS, events, make_request
from tests.render.timeline_format import assert_consistent, validate

ROOT = Path(__file__).parents[2]
runner = CliRunner()


def _trace(frame: pl.DataFrame, **options: object) -> tuple[dict, dict]:
    analysis = analyze_events(frame)
    text, _ = build_trace(analysis, TimelineOptions(**options))  # type: ignore[arg-type]
    doc = json.loads(text)
    return doc, assert_consistent(validate(doc))


def test_worked_example_from_the_lesson() -> None:
    # sample_traces/worked_example.csv: arrival 0, admission 30 ms, first token 80 ms, then
    # 100 tokens 5 ms apart: queued 30 ms, prefill 50 ms, decode 500 ms, e2e 580 ms.
    result = runner.invoke(
        app, ["timeline", str(ROOT / "sample_traces/worked_example.csv"), "-o", "-"]
    )
    assert result.exit_code == 2  # "-" is not a .json file name
    frame = pl.read_csv(ROOT / "sample_traces/worked_example.csv")
    doc, requests = _trace(frame)
    r1 = requests["r1"]
    assert [(name, lo, hi) for name, lo, hi, _ in r1["phases"]] == [
        ("queued", 0, 30 * MS),
        ("prefill", 30 * MS, 80 * MS),
        ("decode", 80 * MS, 580 * MS),
    ]
    assert r1["slice"][1:3] == (0, 580 * MS)
    assert r1["markers"] == [("completed", 580 * MS, 1)]
    assert r1["requeued"] == []
    assert r1["args"]["e2e_ns"] == 580 * MS and r1["args"]["ttft_ns"] == 80 * MS
    assert doc["otherData"]["trace_start_ns"] == 0


def test_preempted_and_cancelled_requests() -> None:
    frame = events(
        # preempted during prefill at 40, re-admitted at 60
        make_request(
            "pre", admission=[10, 60], preempt=[40], first=80, ticks=[90, 100], complete=100
        ),
        # preempted during decode at 35, re-admitted at 50; 5 ms between last token and end
        make_request(
            "dec", admission=[5, 50], preempt=[35], first=20, ticks=[30, 60, 70], complete=75
        ),
        make_request("cq", cancel=30),  # cancelled while queued
        make_request("cd", admission=10, first=20, ticks=[30], cancel=50),  # in decode
        make_request("fl", admission=10, first=15),  # still running at the end (100 ms)
    )
    analysis = analyze_events(frame)
    metrics = {r["request_id"]: r for r in analysis.requests.iter_rows(named=True)}
    _, requests = _trace(frame)

    def phases(rid: str) -> list[tuple[str, int, int]]:
        return [(n, lo // MS, hi // MS) for n, lo, hi, _ in requests[rid]["phases"]]

    assert phases("pre") == [("queued", 0, 10), ("prefill", 10, 80), ("decode", 80, 100)]
    assert [(lo // MS, hi // MS) for _, lo, hi, _ in requests["pre"]["requeued"]] == [(40, 60)]
    assert phases("dec") == [
        ("queued", 0, 5),
        ("prefill", 5, 20),
        ("decode", 20, 70),
        ("delivery_tail", 70, 75),
    ]
    assert [(lo // MS, hi // MS) for _, lo, hi, _ in requests["dec"]["requeued"]] == [(35, 50)]
    assert phases("cq") == [("queued", 0, 30)]
    assert requests["cq"]["markers"][0][0] == "cancelled while queued"
    assert phases("cd") == [
        ("queued", 0, 10),
        ("prefill", 10, 20),
        ("decode", 20, 30),
        ("awaiting_token", 30, 50),
    ]
    assert requests["cd"]["markers"][0][0] == "cancelled while decoding"
    assert phases("fl") == [("queued", 0, 10), ("prefill", 10, 15), ("awaiting_token", 15, 100)]
    assert requests["fl"]["markers"][0] == (
        "in flight at end of trace",
        100 * MS,
        requests["fl"]["slice"][3],
    )
    # Every duration is the per-request metric of the same name, to the ns.
    column = {
        "queued": "queue_wait_ns",
        "prefill": "prefill_ns",
        "decode": "decode_ns",
        "delivery_tail": "delivery_tail_ns",
    }
    for rid, r in requests.items():
        m = metrics[rid]
        for name, lo, hi, _ in r["phases"]:
            if name in column:
                assert hi - lo == m[column[name]], (rid, name)
        assert sum(hi - lo for _, lo, hi, _ in r["requeued"]) == m["requeued_ns"], rid
        if m["e2e_ns"] is not None:
            assert r["slice"][2] - r["slice"][1] == m["e2e_ns"], rid


def test_client_trace_has_ttft_not_queue_and_prefill() -> None:
    frame = events(make_request("c1", first=40, ticks=[50, 60], complete=60))
    _, requests = _trace(frame)
    assert [(n, lo // MS, hi // MS) for n, lo, hi, _ in requests["c1"]["phases"]] == [
        ("ttft", 0, 40),
        ("decode", 40, 60),
    ]


def test_lanes_never_overlap_and_are_as_few_as_the_peak() -> None:
    import numpy as np

    start = np.array([0, 1, 2, 5, 6, 10])
    end = np.array([5, 3, 9, 7, 8, 11])
    # overlap peak is 3 (at t=6: [2,9], [5,7], [6,8])
    lanes = assign_lanes(start, end)
    assert lanes.tolist() == [0, 1, 2, 0, 1, 0]


def test_ticks_are_opt_in_and_selection_flags() -> None:
    frame = events(
        make_request("a", admission=0, first=10, ticks=[20, 30], complete=30),
        make_request("b", arrival=100, admission=100, first=150, ticks=[400], complete=400),
        make_request("c", arrival=500, admission=510, first=520, complete=520),
    )
    _, requests = _trace(frame)
    assert all(not r["ticks"] for r in requests.values())
    _, requests = _trace(frame, ticks=True)
    assert [t[1] // MS for t in requests["a"]["ticks"]] == [10, 20, 30]
    _, requests = _trace(frame, slowest=1)
    assert set(requests) == {"b"}
    _, requests = _trace(frame, window_ns=(200 * MS, 505 * MS))
    assert set(requests) == {"b", "c"}
    _, requests = _trace(frame, requests=("a", "c"))
    assert set(requests) == {"a", "c"}
    with pytest.raises(UsageError, match="no valid request with id zz"):
        _trace(frame, requests=("zz",))


def test_counters_follow_the_concurrency() -> None:
    frame = events(
        make_request("a", admission=10, first=20, ticks=[30], complete=30),
        make_request("b", arrival=5, admission=30, first=40, complete=40),
    )
    doc, _ = _trace(frame)
    queued = [
        (e["ts"], e["args"]["requests"])
        for e in doc["traceEvents"]
        if e["ph"] == "C" and e["name"] == "queued"
    ]
    assert queued == [(0.0, 1), (5000.0, 2), (10000.0, 1), (30000.0, 0)]
    rate = [e for e in doc["traceEvents"] if e["name"] == "output tokens/s"]
    # 40 ms span: forty 1 ms bins, the end instant in the last; three ticks of one token
    # → 1000 tok/s in each of their bins
    assert len(rate) == 40
    assert sorted(e["ts"] for e in rate if e["args"]["tok/s"]) == [20000.0, 30000.0, 39000.0]
    assert sum(e["args"]["tok/s"] for e in rate) == 3 * 1000


def test_window_and_bins() -> None:
    assert parse_window("10:20") == (10 * 10**9, 20 * 10**9)
    assert parse_window("500ms:2s") == (500 * MS, 2 * 10**9)
    assert parse_window(":1s")[0] == 0
    with pytest.raises(UsageError):
        parse_window("5s:1s")
    with pytest.raises(UsageError):
        parse_window("abc")
    assert rate_bin_ns(10**9) == MS  # 1 s → 1000 bins of 1 ms
    assert rate_bin_ns(670 * 10**9) == 500 * MS


def test_cli_writes_gzip_for_the_realistic_sample(tmp_path: Path) -> None:
    out = tmp_path / "trace.json.gz"
    result = runner.invoke(
        app,
        [
            "timeline",
            str(ROOT / "sample_traces/realistic.parquet"),
            "-o",
            str(out),
            "--slowest",
            "50",
            "--ticks",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(gzip.decompress(out.read_bytes()))
    requests = assert_consistent(validate(doc))
    assert len(requests) == 50
    assert any(r["requeued"] for r in requests.values())  # the sample has preemptions
    assert "50 requests" in result.stderr


def test_cli_bad_output_suffix(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["timeline", str(ROOT / "sample_traces/worked_example.csv"), "-o", str(tmp_path / "t.txt")],
    )
    assert result.exit_code == 2
    assert ".json or .json.gz" in result.stderr


def test_epoch_timestamps_stay_exact_to_the_ns() -> None:
    # Epoch ns (~1.7e18) do not fit a double as µs; relative to the trace start they do.
    t0 = 1_764_000_000_123_456_789
    frame = events(make_request("e", admission=0.000_001, first=1.000_003, complete=1.000_003))
    frame = frame.with_columns(pl.col("ts") + t0)
    doc, requests = _trace(frame)
    assert doc["otherData"]["trace_start_ns"] == t0
    names = [(n, lo, hi) for n, lo, hi, _ in requests["e"]["phases"]]
    assert names == [("queued", 0, 1), ("prefill", 1, 1_000_003)]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x1c", "\v\f"])
def test_ids_holding_line_separators_give_valid_json(separator: str) -> None:
    # Only "\n" ends an NDJSON row: Unicode line separators inside an id are part of it.
    rid = f"a{separator}b"
    frame = events(make_request(rid, admission=1, first=2, ticks=[3], complete=3))
    text, _ = build_trace(analyze_events(frame), TimelineOptions(ticks=True))
    doc = json.loads(text)
    named = {e["args"]["request_id"] for e in doc["traceEvents"] if "request_id" in e["args"]}
    assert named == {rid}


def test_timeline_window_takes_every_unit_of_the_one_duration_grammar() -> None:
    from servetrace.errors import UsageError

    assert parse_window("1min:2h") == (60 * 10**9, 7200 * 10**9)
    assert parse_window("500us:1.5") == (500_000, 1_500_000_000)
    for bad in ("1e30s:", "-1s:", "x:1"):
        with pytest.raises(UsageError, match="is not a time from the trace start"):
            parse_window(bad)
