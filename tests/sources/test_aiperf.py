"""AIPerf importer: agreement with AIPerf's own summary, every quirk of the real files,
and errors that name the file, the record and the field."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from servetrace.errors import ExitCode, InputError
from servetrace.sources import aiperf
from servetrace.sources.events import ImportResult
from servetrace.sources.registry import import_file

from .conftest import (
    AIPERF_CANCEL20,
    AIPERF_CONC8,
    AIPERF_RUN1,
    MS,
    TICKS,
    analyze_or_skip,
    assert_lifecycle_is_plausible,
    completed,
    max_difference,
    per_request,
    pooled_gaps,
    read_jsonl,
    stats,
    write_jsonl,
)

RUNS = {
    "real-run1": AIPERF_RUN1,
    "peers-conc8": AIPERF_CONC8,
    "peers-cancel20": AIPERF_CANCEL20,
}
STATS = {
    "mean": "avg",
    "std": "std",
    "min": "min",
    "max": "max",
    "p50": "p50",
    "p90": "p90",
    "p99": "p99",
    "p25": "p25",
    "p75": "p75",
    "p95": "p95",
    "p1": "p1",
    "p5": "p5",
}


@pytest.fixture(scope="module", params=list(RUNS), ids=list(RUNS))
def run(request: pytest.FixtureRequest) -> ImportResult:
    return aiperf.read(RUNS[request.param])


# --------------------------------------------------------------------------------------
# Numbers agree with AIPerf's own summary (profile_export_aiperf.json)
# --------------------------------------------------------------------------------------


def test_aiperf_ttft_agrees_with_aiperf(run: ImportResult) -> None:
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events)
    assert done.height == summary["time_to_first_token"]["count"]
    ours = stats(done["ttft_ns"] / MS)
    assert max_difference(ours, summary["time_to_first_token"], STATS) < 1e-9


def test_aiperf_request_latency_is_our_response_time(run: ImportResult) -> None:
    """AIPerf's request_latency ends at the last content chunk: our ``response``."""
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events)
    ours = stats(done["response_ns"] / MS)
    assert max_difference(ours, summary["request_latency"], STATS) < 1e-9


def test_aiperf_inter_token_latency_is_our_tpot(run: ImportResult) -> None:
    """AIPerf's inter_token_latency = (request_latency - ttft)/(OSL - 1): our ``tpot``."""
    summary = run.tool_summary
    assert summary is not None
    tpot = completed(run.events)["tpot_ns"].drop_nulls()
    assert tpot.len() == summary["inter_token_latency"]["count"]
    assert max_difference(stats(tpot / MS), summary["inter_token_latency"], STATS) < 1e-9


def test_aiperf_inter_chunk_latency_is_our_pooled_itl(run: ImportResult) -> None:
    """inter_chunk_latency lists the chunk gaps: our pooled ``itl``. Its average is exact;
    its percentiles come from a sketch in AIPerf, yet on these files they agree to 1e-9 ms
    too (pinned at the measured tolerance)."""
    summary = run.tool_summary
    assert summary is not None
    gaps = pooled_gaps(run.events) / MS
    icl = summary["inter_chunk_latency"]
    assert len(gaps) == icl["count"]
    assert abs(gaps.mean() - icl["avg"]) < 1e-9
    assert max_difference(stats(gaps), icl, STATS) < 1e-9


def test_aiperf_agrees_through_the_pipeline(run: ImportResult) -> None:
    analysis = analyze_or_skip(run.events)
    summary = run.tool_summary
    assert summary is not None
    done = analysis.requests.filter(pl.col("outcome") == "completed")
    assert max_difference(stats(done["ttft_ns"] / MS), summary["time_to_first_token"], STATS) < 1e-9
    tpot = done["tpot_ns"].drop_nulls() / MS
    assert max_difference(stats(tpot), summary["inter_token_latency"], STATS) < 1e-9
    gaps = analysis.gaps["itl_ns"] / MS
    assert abs(gaps.mean() - summary["inter_chunk_latency"]["avg"]) < 1e-9


def test_aiperf_last_tick_is_start_plus_request_latency() -> None:
    """Gaps are rounded to ns once and summed in integers: no drift over 250 chunks."""
    records = {r["metadata"]["x_request_id"]: r for r in read_jsonl(AIPERF_RUN1)}
    done = completed(aiperf.read(AIPERF_RUN1).events)
    for row in done.iter_rows(named=True):
        latency_ms = records[row["request_id"]]["metrics"]["request_latency"]["value"]
        assert row["last_ns"] - row["arrival_ns"] == round(latency_ms * MS)


def test_aiperf_no_fabricated_events(run: ImportResult) -> None:
    assert_lifecycle_is_plausible(run.events)
    assert run.events["ticks_available"].all()
    assert run.arrival_known and not run.request_level
    assert run.events["tool"].unique().to_list() == ["aiperf"]


# --------------------------------------------------------------------------------------
# The raw export
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [AIPERF_CONC8, AIPERF_CANCEL20], ids=["conc8", "cancel20"])
def test_aiperf_raw_chunk_times_equal_metric_ticks(path: Path) -> None:
    with_raw = aiperf.read(path).events
    without = aiperf.read(path, use_raw=False).events
    ticks = [
        e.filter(pl.col("event").is_in(TICKS)).sort("request_id", "ts").select("request_id", "ts")
        for e in (with_raw, without)
    ]
    assert ticks[0].height == ticks[1].height
    assert (ticks[0]["ts"] - ticks[1]["ts"]).abs().max() == 0


@pytest.mark.slow
def test_aiperf_raw_file_given_as_path_uses_the_export_beside_it() -> None:
    raw = AIPERF_CONC8.with_name("profile_export_raw.jsonl.gz")
    assert import_file(raw).events.equals(aiperf.read(AIPERF_CONC8).events)


@pytest.mark.slow
def test_aiperf_raw_file_alone_takes_counts_from_usage(tmp_path: Path) -> None:
    raw = tmp_path / "profile_export_raw.jsonl.gz"
    shutil.copy(AIPERF_CONC8.with_name(raw.name), raw)
    alone = aiperf.read(raw)
    assert any("without its profile_export.jsonl" in w for w in alone.warnings)
    full = aiperf.read(AIPERF_CONC8).events
    assert (
        alone.events.select("request_id", "event", "ts")
        .sort("request_id", "ts", "event")
        .equals(full.select("request_id", "event", "ts").sort("request_id", "ts", "event"))
    )
    counts = per_request(alone.events).join(
        per_request(full).select("request_id", expected="output_tokens"), on="request_id"
    )
    assert (counts["output_tokens"] == counts["expected"]).all()


# --------------------------------------------------------------------------------------
# Quirks of the real files
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [AIPERF_RUN1, AIPERF_CANCEL20], ids=["run1", "cancel20"])
def test_aiperf_cancelled_records_have_no_ticks(path: Path) -> None:
    events = aiperf.read(path).events
    cancelled = per_request(events).filter(pl.col("terminal") == "cancellation")
    assert cancelled.height == {AIPERF_RUN1: 11, AIPERF_CANCEL20: 59}[path]
    assert cancelled["ticks"].is_null().all()
    assert cancelled["reported"].is_null().all()
    rows = events.filter(pl.col("request_id").is_in(cancelled["request_id"].implode()))
    assert set(rows["event"].unique().to_list()) == {"arrival", "cancellation"}
    assert (rows["error_code"] == 499).all()
    assert rows["error"].str.contains("RequestCancellationError").all()


def test_aiperf_old_cancellation_time_comes_from_the_error_message() -> None:
    """AIPerf before 0.13 wrote no end time for a cancelled record; its message says
    "cancelled after 0.000 seconds", so the cancellation is placed at the send, flagged."""
    result = aiperf.read(AIPERF_RUN1)
    cancelled = per_request(result.events).filter(pl.col("terminal") == "cancellation")
    assert (cancelled["e2e_ns"] == 0).all()
    flags = result.events.filter(pl.col("event") == "cancellation")["terminal_known"]
    assert not flags.any()
    assert any("delay stated in the error message" in w for w in result.warnings)


def test_aiperf_cancel_start_stamped_at_cancellation_is_moved_back() -> None:
    """AIPerf 0.13 stamps a cancelled record's request_start_ns when it cancels it; the
    raw perf clock (or the trace's send time) shows it, and the arrival moves back."""
    records = {r["metadata"]["x_request_id"]: r for r in read_jsonl(AIPERF_CANCEL20)}
    for use_raw, tolerance_ns in ((True, 100_000), (False, 100_000)):
        result = aiperf.read(AIPERF_CANCEL20, use_raw=use_raw)
        assert any("stamped at cancellation" in w for w in result.warnings)
        cancelled = per_request(result.events).filter(pl.col("terminal") == "cancellation")
        for row in cancelled.iter_rows(named=True):
            meta = records[row["request_id"]]["metadata"]
            send = records[row["request_id"]]["trace_data"]["request_send_start_ns"]
            # the request was started before it was sent, and cancelled ~0.2 s later
            assert row["arrival_ns"] <= send
            assert send - row["arrival_ns"] < 5_000_000
            assert 200e6 <= row["e2e_ns"] <= 230e6
            # time to cancel is AIPerf's own perf-clock duration
            assert row["e2e_ns"] == meta["cancellation_time_ns"] - meta["request_start_ns"]
            assert abs(row["terminal_ns"] - meta["request_start_ns"]) < tolerance_ns


def test_aiperf_missing_output_token_count_uses_output_sequence_length() -> None:
    records = {r["metadata"]["x_request_id"]: r for r in read_jsonl(AIPERF_RUN1)}
    result = aiperf.read(AIPERF_RUN1)
    done = completed(result.events)
    missing = [
        rid for rid in done["request_id"] if "output_token_count" not in records[rid]["metrics"]
    ]
    assert len(missing) == 59
    for row in done.filter(pl.col("request_id").is_in(missing)).iter_rows(named=True):
        metrics = records[row["request_id"]]["metrics"]
        assert row["reported"] == metrics["output_sequence_length"]["value"]
    reasoning = result.events.filter(pl.col("request_id") == missing[0])["reasoning_tokens"]
    assert reasoning.drop_nulls().len() > 0


def test_aiperf_multi_token_chunks_keep_the_reported_count() -> None:
    result = aiperf.read(AIPERF_RUN1)
    done = completed(result.events)
    fewer = done.filter(pl.col("ticks") < pl.col("reported"))
    more = done.filter(pl.col("ticks") > pl.col("reported"))
    assert (fewer.height, more.height) == (1, 3)
    assert (done["tokens_sum"] == done["ticks"]).all()  # one token per tick, never spread
    assert any("chunk count different" in w for w in result.warnings)


def test_aiperf_records_out_of_order_come_out_sorted_by_arrival() -> None:
    starts = [r["metadata"]["timestamp_ns"] for r in read_jsonl(AIPERF_RUN1)]
    assert starts != sorted(starts)
    arrivals = aiperf.read(AIPERF_RUN1).events.filter(pl.col("event") == "arrival")["ts"]
    assert arrivals.is_sorted()


def test_aiperf_completion_is_the_stream_end() -> None:
    """Completion is request_end_ns (the last response, [DONE]); the last tick is the last
    content chunk, so delivery_tail = completion - last tick >= 0."""
    records = {r["metadata"]["x_request_id"]: r for r in read_jsonl(AIPERF_CONC8)}
    done = completed(aiperf.read(AIPERF_CONC8).events)
    tail = done["terminal_ns"] - done["last_ns"]
    assert tail.min() >= 0 and tail.max() > 0
    for row in done.head(20).iter_rows(named=True):
        assert row["terminal_ns"] == records[row["request_id"]]["metadata"]["request_end_ns"]


def test_aiperf_mixed_units_are_converted_per_field(tmp_path: Path) -> None:
    record = {
        "metadata": {"x_request_id": "r", "request_start_ns": 1_000_000_000},
        "metrics": {
            "time_to_first_token": {"value": 0.05, "unit": "sec"},
            "inter_chunk_latency": {"value": [10_000, 20_000], "unit": "us"},
            "request_latency": {"value": 80.0, "unit": "ms"},
            "output_sequence_length": {"value": 3, "unit": "tokens"},
        },
        "error": None,
    }
    path = write_jsonl(tmp_path, "mixed_units.jsonl", [record])
    rows = aiperf.read(path).events
    ticks = rows.filter(pl.col("event").is_in(TICKS))["ts"].to_list()
    assert ticks == [1_050_000_000, 1_060_000_000, 1_080_000_000]
    assert rows.filter(pl.col("event") == "completion")["ts"].item() == 1_080_000_000


def test_aiperf_single_chunk_output_has_one_tick_and_no_gap(tmp_path: Path) -> None:
    record = {
        "metadata": {"x_request_id": "one", "request_start_ns": 5},
        "metrics": {
            "ttft": {"value": 1.0, "unit": "ms"},
            "request_latency": {"value": 1.0, "unit": "ms"},
            "output_sequence_length": {"value": 1, "unit": "tokens"},
        },
    }
    events = aiperf.read(write_jsonl(tmp_path, "single_token.jsonl", [record])).events
    assert events["event"].to_list() == ["arrival", "first_token", "completion"]
    assert len(pooled_gaps(events)) == 0
    assert per_request(events)["tpot_ns"].is_null().all()


# --------------------------------------------------------------------------------------
# Bad files
# --------------------------------------------------------------------------------------


def test_aiperf_broken_line_names_the_line(tmp_path: Path) -> None:
    lines = gzip.decompress(AIPERF_RUN1.read_bytes()).decode().splitlines()
    lines[6] = lines[6][: len(lines[6]) // 2]
    path = tmp_path / "broken_line.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        aiperf.read(path)
    assert "broken_line.jsonl" in caught.value.message
    assert "line 7" in caught.value.message
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT


def test_aiperf_missing_start_names_record_and_field(tmp_path: Path) -> None:
    records = read_jsonl(AIPERF_RUN1)[:5]
    del records[3]["metadata"]["timestamp_ns"]
    records[3]["metrics"].pop("min_request_timestamp", None)  # a cancelled record has none
    path = write_jsonl(tmp_path, "missing_start.jsonl", records)
    with pytest.raises(InputError) as caught:
        aiperf.read(path)
    message = caught.value.message
    assert "missing_start.jsonl" in message
    assert "record 3 (line 4)" in message
    assert "metadata.request_start_ns" in message


def test_aiperf_unknown_unit_names_the_field(tmp_path: Path) -> None:
    records = read_jsonl(AIPERF_RUN1)[11:13]
    records[1]["metrics"]["ttft"]["unit"] = "fortnights"
    path = write_jsonl(tmp_path, "bad_unit.jsonl", records)
    with pytest.raises(InputError, match=r"record 1 \(line 2\).*metrics\.ttft\.unit"):
        aiperf.read(path)


def test_aiperf_text_in_a_latency_list_names_record_and_field(tmp_path: Path) -> None:
    records = read_jsonl(AIPERF_RUN1)[11:14]
    records[2]["metrics"]["inter_chunk_latency"]["value"][5] = "fast"
    path = write_jsonl(tmp_path, "text_in_icl.jsonl", records)
    with pytest.raises(InputError, match=r"record 2 \(line 3\).*inter_chunk_latency.*'fast'"):
        aiperf.read(path)


def test_aiperf_truncated_gzip_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "profile_export.jsonl.gz"
    path.write_bytes(AIPERF_RUN1.read_bytes()[:5000])
    with pytest.raises(InputError, match="gzip data is corrupt or truncated"):
        aiperf.read(path)


def test_aiperf_rejects_a_single_json_document(tmp_path: Path) -> None:
    path = tmp_path / "not_jsonl.json"
    path.write_text('{\n  "ttfts": [0.1],\n  "itls": [[]]\n}\n')
    with pytest.raises(InputError) as caught:
        import_file(path, "aiperf")
    assert "not_jsonl.json" in caught.value.message
    assert caught.value.hint is not None and "--from vllm-bench" in caught.value.hint


def test_aiperf_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(InputError, match=r"empty\.jsonl: no records"):
        aiperf.read(path)


def test_aiperf_times_are_integer_nanoseconds() -> None:
    events = aiperf.read(AIPERF_RUN1).events
    assert events.schema["ts"] == pl.Int64
    assert np.issubdtype(events["ts"].to_numpy().dtype, np.integer)


def test_aiperf_client_cancellations_are_not_errors(tmp_path: Path) -> None:
    """HTTP 499 is the client closing the request: the 59 cancellations of the real
    cancel20 run are not failures; a 429 on one of them is: errored, not cancelled."""
    analysis = analyze_or_skip(aiperf.read(AIPERF_CANCEL20).events)
    assert analysis.summary.cancelled["count"] == 59
    assert analysis.summary.cancelled["with_error"] == 0

    records = read_jsonl(AIPERF_CANCEL20)
    failed = [r for r in records if r.get("error")][:2]
    for record in failed:
        record["error"] = {**record["error"], "code": 429, "type": "TooManyRequests"}
    path = write_jsonl(tmp_path, "two_rate_limited.jsonl", records)
    analysis = analyze_or_skip(aiperf.read(path).events)
    assert analysis.summary.cancelled["count"] == 57
    assert analysis.summary.cancelled["with_error"] == 0
    assert analysis.summary.outcomes["errored"] == 2
    assert analysis.summary.errors == {"429": 2}
