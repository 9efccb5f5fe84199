"""SGLang --export-metrics-to-file records: both key spellings, folders, retractions."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from servetrace.errors import ExitCode, InputError
from servetrace.sources.registry import detect_format, engine_inputs, import_file

from .engine_writers import (
    WALL_NS,
    assert_same_requests,
    canonical,
    request_metrics,
    sample_requests,
    sglang_record,
    write_sglang,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "engines"
# Wall-clock float seconds at 1.7e9 s carry ~0.24 µs: agree within 1 µs.
RESOLUTION_NS = 1_000


@pytest.mark.parametrize("version", ["0.5", "newer"])
def test_round_trip_both_spellings(tmp_path: Path, version: str) -> None:
    reqs = sample_requests()
    path = write_sglang(tmp_path / "sglang-request-metrics-20260302_10.log", reqs, version=version)
    result = import_file(path)
    assert result.format == "sglang"
    assert result.events["source"].unique().to_list() == ["server"]
    truth = canonical(reqs, WALL_NS)
    metrics = ("queue_wait_ns", "prefill_ns", "ttft_ns", "e2e_ns")
    assert_same_requests(result.events, truth, metrics, RESOLUTION_NS)
    # Decode: the newer records have the last token (scheduler_completion_time); 0.5.x
    # decode runs to the finish, which equals the last token for completed requests.
    decode_for = None if version == "newer" else ["r1", "r2", "r5"]
    assert_same_requests(
        result.events, truth, ("decode_ns", "tpot_ns"), RESOLUTION_NS, only=decode_for
    )
    got = request_metrics(result.events)
    r3 = got.filter(pl.col("request_id") == "r3").row(0, named=True)
    assert (r3["outcome"], r3["error_code"], r3["error"]) == (
        "cancelled",
        499,
        "The client disconnected",
    )
    r4 = got.filter(pl.col("request_id") == "r4").row(0, named=True)
    assert (r4["outcome"], r4["error_code"]) == ("errored", 500)  # not cancelled
    expected_source = "forward_entry_time" if version == "newer" else "finished - inference_time"
    assert got["admission_from"].unique().to_list() == [expected_source]


def test_admission_from_queue_time_is_a_lower_bound(tmp_path: Path) -> None:
    record = sglang_record(sample_requests()[0])
    del record["inference_time"]
    path = tmp_path / "sglang-request-metrics-20260302_10.log"
    path.write_text(json.dumps(record) + "\n")
    result = import_file(path)
    got = request_metrics(result.events).row(0, named=True)
    # received 0, sent to scheduler 1 ms, queue_time 29 ms → admission at 30 ms.
    assert got["queue_wait_ns"] == pytest.approx(30_000_000, abs=RESOLUTION_NS)
    assert any("lower bound" in w for w in result.warnings)


def test_retractions_are_counted_not_invented(tmp_path: Path) -> None:
    reqs = [replace(r, retractions=2 if r.rid == "r2" else 0) for r in sample_requests()]
    result = import_file(write_sglang(tmp_path / "sglang-request-metrics-x.log", reqs))
    assert "preemption" not in result.events["event"].to_list()
    got = request_metrics(result.events)
    assert got.filter(pl.col("request_id") == "r2")["retractions"].item() == 2
    assert got.filter(pl.col("request_id") == "r2")["preemptions"].item() == 0
    assert any("SGLang records the count, not the times" in w for w in result.warnings)


def test_folder_of_hourly_files() -> None:
    folder = DATA / "sglang"
    assert detect_format(folder) == "sglang"
    assert engine_inputs([str(folder)]) == ("sglang", [folder])
    result = import_file(folder)
    assert result.records == 8
    assert sorted(result.events["file"].unique().to_list()) == [
        "sglang-request-metrics-20260302_10.log",
        "sglang-request-metrics-20260302_11.log",
    ]
    assert any("read 2 hourly files" in w for w in result.warnings)


def test_unknown_fields_are_kept_and_the_prompt_is_not() -> None:
    events = import_file(DATA / "sglang").events
    assert "weight_version" in events.columns and "prefill_launch_latency" in events.columns
    assert "request_parameters" not in events.columns
    # ``id`` is ours (request_id); an unknown field named like a canonical column is prefixed.


def test_colliding_unknown_field_is_prefixed(tmp_path: Path) -> None:
    record = sglang_record(sample_requests()[0]) | {"tool": "my-router", "source": "x"}
    path = tmp_path / "sglang-request-metrics-1.log"
    path.write_text(json.dumps(record) + "\n")
    events = import_file(path).events
    assert events["sglang_tool"].unique().to_list() == ["my-router"]
    assert events["tool"].unique().to_list() == ["sglang"]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("request_received_ts", None, r"missing field 'request_received_ts'"),
        (
            "prefill_finished_ts",
            "soon",
            r"field 'prefill_finished_ts' must be a finite number >= 0 below [0-9.e+]+, got 'soon'",
        ),
        ("completion_tokens", 1.5, r"field 'completion_tokens' must be a whole number"),
        ("finish_reason", 3, r"field 'finish_reason' must be an object or null"),
    ],
)
def test_broken_record_names_file_record_and_field(
    tmp_path: Path, field: str, value: object, expected: str
) -> None:
    good = sglang_record(sample_requests()[0])
    bad = sglang_record(sample_requests()[1])
    if value is None:
        del bad[field]
    else:
        bad[field] = value
    path = tmp_path / "sglang-request-metrics-1.log"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputError, match=expected) as caught:
        import_file(path)
    assert caught.value.message.startswith(f"{path}: record 1 (line 2): ")
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT


def test_without_enable_metrics_the_hint_says_so(tmp_path: Path) -> None:
    record = {
        "request_parameters": "{}",
        "id": "a",
        "finish_reason": {"type": "stop"},
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "e2e_latency": 0.5,
    }
    path = tmp_path / "sglang-request-metrics-1.log"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError) as caught:
        import_file(path)
    assert caught.value.hint is not None and "--enable-metrics" in caught.value.hint


def test_a_long_first_record_is_still_recognised(tmp_path: Path) -> None:
    """A prompt can make one record longer than the head read to recognise a file."""
    record = sglang_record(sample_requests()[0])
    record["request_parameters"] = json.dumps({"text": "x" * 1_500_000})
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "sglang-request-metrics-20260302_10.log").write_text(json.dumps(record) + "\n")
    assert detect_format(folder) == "sglang"
    assert import_file(folder).records == 1


def test_a_folder_of_canonical_parts_is_not_an_engine_export(tmp_path: Path) -> None:
    import polars as pl

    pl.DataFrame({"request_id": ["a"], "event": ["arrival"], "ts": [0]}).write_parquet(
        tmp_path / "part-0.parquet"
    )
    assert engine_inputs([str(tmp_path)]) is None


def test_a_record_that_is_a_list_is_described_with_its_length(tmp_path: Path) -> None:
    path = tmp_path / "sglang-request-metrics-20260302_10.log"
    path.write_text("[1, 2]\n[3]\n")
    with pytest.raises(
        InputError, match=r"line 1: not an SGLang .*\(found a JSON list of 2 items\)"
    ):
        import_file(path, "sglang")
