"""TensorRT-LLM /perf_metrics polls: steady-clock seconds, appended lists, attributes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from servetrace.errors import ExitCode, InputError
from servetrace.sources.registry import detect_format, import_file

from .engine_writers import (
    STEADY_NS,
    Req,
    assert_same_requests,
    canonical,
    request_metrics,
    sample_requests,
    trtllm_item,
    write_trtllm,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "engines" / "trtllm"
METRICS = ("queue_wait_ns", "prefill_ns", "ttft_ns", "decode_ns", "e2e_ns")


def _finished(reqs: list[Req]) -> list[Req]:
    """What TensorRT-LLM can express: finished requests, completion at the last token."""
    return [replace(r, end=r.last) for r in reqs if r.outcome == "completed"]


def test_round_trip_over_several_polls(tmp_path: Path) -> None:
    reqs = _finished(sample_requests())
    items = [trtllm_item(r, i + 1) for i, r in enumerate(reqs)]
    path = write_trtllm(tmp_path / "polls.json", [items[:1], [], items[1:]])
    result = import_file(path)
    assert result.format == "trtllm" and result.request_level
    assert result.events["source"].unique().to_list() == ["server"]
    imported = result.events.with_columns(
        request_id=pl.col("request_id").replace({str(i + 1): r.rid for i, r in enumerate(reqs)})
    )
    # µs time points: our ms-valued truth comes back exactly.
    assert_same_requests(imported, canonical(reqs, STEADY_NS), METRICS, tolerance_ns=0)
    got = request_metrics(imported)
    assert got["tpot_ns"].null_count() == got.height  # no token counts: unavailable
    assert any("3 /perf_metrics polls" in w for w in result.warnings)


def test_steady_clock_seconds_round_to_the_microsecond(tmp_path: Path) -> None:
    item = trtllm_item(sample_requests()[0], 1)
    timing = item["perf_metrics"]["timing_metrics"]
    timing["arrival_time"] = 86400.123456
    timing["first_scheduled_time"] = 86400.153456  # +30 ms
    timing["first_token_time"] = 86400.2034559999  # float noise below the µs
    timing["last_token_time"] = 86400.703456
    path = write_trtllm(tmp_path / "p.json", [[item]])
    row = request_metrics(import_file(path).events).row(0, named=True)
    assert row["queue_wait_ns"] == 30_000_000
    assert row["ttft_ns"] == 80_000_000
    assert row["decode_ns"] == 500_000_000


def test_kv_cache_and_speculative_decoding_are_attributes(tmp_path: Path) -> None:
    r = replace(sample_requests()[0], extra={"spec": True})
    item = trtllm_item(r, 7) | {"ctx_request_id": 99}
    events = import_file(write_trtllm(tmp_path / "p.json", [[item]])).events
    row = events.row(0, named=True)
    assert row["kv_num_reused_blocks"] == 6 and row["kv_num_missed_blocks"] == 2
    assert row["kv_cache_hit_rate"] == pytest.approx(0.75)
    assert row["spec_acceptance_rate"] == pytest.approx(0.65)
    assert row["spec_total_accepted_draft_tokens"] == 13
    assert row["first_iter"] == 70 and row["ctx_request_id"] == 99
    assert row["server_arrival_ns"] == row["ts"] - 1_500_000


def test_one_item_per_line_with_status(tmp_path: Path) -> None:
    """The perf-metrics output files of newer releases: one item per line, a status."""
    reqs = sample_requests()
    lines = [
        trtllm_item(replace(reqs[0], end=reqs[0].last), 1, status="complete"),
        trtllm_item(replace(reqs[3], end=reqs[3].last), 2, status="error"),
    ]
    path = tmp_path / "perf_metrics.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert detect_format(path) == "trtllm"
    got = request_metrics(import_file(path).events)
    assert got["outcome"].to_list() == ["completed", "cancelled"]
    assert got["error"].to_list() == [None, "status error"]


def test_repeated_ids_are_kept_apart(tmp_path: Path) -> None:
    reqs = _finished(sample_requests())
    path = write_trtllm(tmp_path / "p.json", [[trtllm_item(reqs[0], 1)], [trtllm_item(reqs[1], 1)]])
    result = import_file(path)
    assert sorted(result.events["request_id"].unique().to_list()) == ["1", "1#1"]
    assert any("more than once" in w for w in result.warnings)


def test_fixture_is_detected() -> None:
    assert detect_format(DATA / "perf_metrics.json") == "trtllm"
    assert import_file(DATA / "perf_metrics.json").records == 6


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "first_token_time",
            None,
            r"missing value in field 'perf_metrics.timing_metrics.first_token_time'",
        ),
        (
            "arrival_time",
            "2025-10-04T12:34:56.000Z",
            r"field 'perf_metrics.timing_metrics.arrival_time' must be a finite number",
        ),
        ("last_token_time", float("nan"), r"last_token_time' must be a finite number"),
    ],
)
def test_broken_item_names_poll_item_and_field(
    tmp_path: Path, field: str, value: object, expected: str
) -> None:
    items = [trtllm_item(r, i + 1) for i, r in enumerate(_finished(sample_requests()))]
    timing = items[2]["perf_metrics"]["timing_metrics"]
    if value is None:
        del timing[field]
    else:
        timing[field] = value
    path = write_trtllm(tmp_path / "p.json", [items[:1], items[1:]])
    with pytest.raises(InputError, match=expected) as caught:
        import_file(path)
    assert caught.value.message.startswith(f"{path}: poll 2 (line 2) item 1")
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT


def test_cut_short_poll(tmp_path: Path) -> None:
    items = [trtllm_item(r, i + 1) for i, r in enumerate(_finished(sample_requests()))]
    path = write_trtllm(tmp_path / "p.json", [items[:1], items[1:]])
    path.write_text(path.read_text()[:-30])
    with pytest.raises(InputError, match=r"p\.json: line 2: not valid JSON"):
        import_file(path, "trtllm")
