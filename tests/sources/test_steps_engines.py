"""Engine step importers (vllm-log, sglang-log, trtllm-iterations, forward-pass) on files
written in each engine's format (tests/data/engines/steps, PROVENANCE.md there): rows
computed by hand from the fixture lines, unknown values null, a malformed line or record
one error naming file, line/record and rule, and the vLLM log aligned to a trace whose
true step ends are known."""

from __future__ import annotations

from pathlib import Path

import msgpack
import polars as pl
import pytest

from servetrace.errors import InputError
from servetrace.sources.steps.formats import STEP_FORMATS, read_steps
from servetrace.sources.steps.schema import STEP_SCHEMA

DATA = Path(__file__).parents[1] / "data" / "engines" / "steps"
S = 1_000_000_000
MS = 1_000_000


def _rows(frame: pl.DataFrame, *columns: str) -> list[tuple]:
    return frame.select(columns).rows()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_engine_formats_are_registered() -> None:
    for name in ("vllm-log", "sglang-log", "trtllm-iterations", "forward-pass"):
        assert name in STEP_FORMATS


# vLLM ------------------------------------------------------------------------------------


def test_vllm_lines_become_one_row_each_with_replica_duration_and_kv_usage() -> None:
    steps = read_steps(DATA / "vllm-lines.log", "vllm-log").frame
    assert steps.schema == pl.Schema(STEP_SCHEMA)
    # 1972-02-18 16:21:20 UTC (the prefix has no year) = 67278080 s.
    assert _rows(
        steps,
        "step",
        "replica",
        "ts_end",
        "ts_start",
        "prefill_requests",
        "prefill_tokens",
        "decode_requests",
        "decode_tokens",
        "kv_usage",
    ) == [
        (188, "0", 67278080 * S, 67278080 * S - 10_250_000, 0, 0, 50, 50, None),
        (189, "1", 67278081 * S, 67278081 * S - 720_000, 1, 7, 3, 3, None),
        (190, "1", 67278081 * S, 67278081 * S - 3 * MS, 0, 0, 0, 0, None),
        (10, "2", 67278082 * S, 67278082 * S - 41_070_000, 2, 4096, 0, 0, 0.051),
    ]
    # Not in the line: unknown, not zero.
    for name in ("cached_tokens", "kv_tokens", "queued_requests", "preempted", "request_ids"):
        assert steps[name].null_count() == steps.height, name


def test_vllm_without_a_trace_says_the_times_are_log_seconds() -> None:
    result = read_steps(DATA / "vllm-lines.log", "vllm-log")
    assert result.alignment_error_ns is None
    assert any("dummy" in note for note in result.notes)
    assert any("resolution 1 s" in note and "1972" in note for note in result.notes)


def _trace_ticks() -> pl.Series:
    trace = pl.read_csv(DATA / "vllm-aligned-trace.csv")
    tokens = trace.filter(pl.col("event").is_in(["first_token", "token"]))
    return tokens["ts"].unique().sort()


def _truth() -> pl.DataFrame:
    return pl.read_csv(DATA / "vllm-aligned-truth.csv", schema_overrides={"replica": pl.String})


def test_vllm_steps_align_to_the_trace_exactly_and_state_the_measured_error() -> None:
    result = read_steps(DATA / "vllm-aligned.log", "vllm-log", _trace_ticks())
    joined = result.frame.join(_truth(), on=["replica", "step"], suffix="_true")
    assert joined.height == result.frame.height == 90
    emitting = joined.filter(pl.col("has_tokens") == 1)
    assert emitting.height == 87
    # Every step that produced tokens ends on its true end, to the nanosecond.
    assert (emitting["ts_end"] == emitting["ts_end_true"]).all()
    # The durations (rounded to 10 µs, with a 40-60 µs gap between steps) placed the
    # ends at most this far from those ticks: the make_fixtures.py run, measured.
    assert result.alignment_error_ns == 15_012
    # The three dummy passes keep their log second, so they overlap aligned steps: said.
    note, overlap = result.notes[-2:]
    assert "overlapping_steps: 2 steps" in overlap
    assert "87 of 90 step ends aligned" in note and "-1 h" in note and "15.012 µs" in note
    # The three dummy passes emit nothing: they keep their log second (16:21:22 UTC).
    dummies = joined.filter(pl.col("has_tokens") == 0)
    assert dummies["ts_end"].to_list() == [1771431682 * S] * 3


def test_vllm_without_the_trace_falls_back_to_the_log_second() -> None:
    result = read_steps(DATA / "vllm-aligned.log", "vllm-log")
    first = result.frame.row(0, named=True)
    # '02-18 17:21:19' local, read as UTC in 1972: 67281679 s; 48.12 ms logged.
    assert (first["step"], first["replica"], first["ts_end"]) == (0, "0", 67281679 * S)
    assert first["ts_end"] - first["ts_start"] == 48_120_000
    assert result.alignment_error_ns is None


def test_vllm_on_a_trace_with_a_relative_clock_is_not_aligned() -> None:
    ticks = pl.Series([5 * MS, 15 * MS, 25 * MS], dtype=pl.Int64)
    result = read_steps(DATA / "vllm-aligned.log", "vllm-log", ticks)
    assert result.alignment_error_ns is None
    assert any("not wall-clock time" in note for note in result.notes)


def test_vllm_malformed_iteration_line_names_file_line_and_rule(tmp_path: Path) -> None:
    good = (DATA / "vllm-lines.log").read_text(encoding="utf-8").splitlines()
    bad = good[1].replace("50 generation tokens", "fifty generation tokens")
    path = _write(tmp_path, "v.log", "\n".join([good[0], good[2], bad]) + "\n")
    with pytest.raises(InputError) as caught:
        read_steps(path, "vllm-log")
    message = caught.value.message
    assert message.startswith(f"{path}: line 3: an iteration line that is not vLLM's")
    assert "\n" not in message


def test_vllm_log_without_iteration_lines_says_how_to_get_them(tmp_path: Path) -> None:
    path = _write(tmp_path, "v.log", "INFO 02-18 16:21:18 [api_server.py:1] Starting\n")
    with pytest.raises(InputError) as caught:
        read_steps(path, "vllm-log")
    assert caught.value.message == f"{path}: no vLLM iteration-details lines in the file"
    assert "--enable-logging-iteration-details" in (caught.value.hint or "")


# SGLang ----------------------------------------------------------------------------------


def test_sglang_prefill_lines_are_steps_and_decode_lines_the_logged_ones() -> None:
    result = read_steps(DATA / "sglang.log", "sglang-log")
    steps = result.frame
    t = 1759928405 * S  # 2025-10-08 13:00:05 UTC
    assert _rows(
        steps,
        "step",
        "replica",
        "ts_start",
        "ts_end",
        "prefill_requests",
        "prefill_tokens",
        "cached_tokens",
        "decode_requests",
        "kv_tokens",
        "kv_usage",
        "queued_requests",
    ) == [
        # The TP1 copy of the first batch is not a second step.
        (None, "0", t, None, 2, 1024, 64, None, None, 0.01, 3),
        (7, "1", t + S, None, 1, 300, 0, None, None, 0.02, 0),
        (None, "0", None, t + 2 * S, 0, 0, None, 2, 1200, 0.03, 1),
        (92, "0", None, t + 3 * S, 0, 0, None, 3, 1500, 0.04, 0),
    ]
    assert steps["decode_tokens"].null_count() == 4
    assert any("--decode-log-interval" in note for note in result.notes)


def test_sglang_batch_line_missing_a_field_names_the_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "s.log",
        "[2025-10-08 13:00:00] hello\n"
        "[2025-10-08 13:00:05 TP0] Prefill batch, #new-seq: 2, #new-token: 1024, "
        "token usage: 0.01, #running-req: 0, #queue-req: 3, \n",
    )
    with pytest.raises(InputError) as caught:
        read_steps(path, "sglang-log")
    assert caught.value.message.startswith(
        f"{path}: line 2: a Prefill batch line without #new-seq, #new-token, #cached-token"
    )


def test_sglang_batch_line_with_another_prefix_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "s.log", "13:00:05 Decode batch, #running-req: 2, #queue-req: 0\n")
    with pytest.raises(InputError) as caught:
        read_steps(path, "sglang-log")
    assert caught.value.message.startswith(f"{path}: line 1: a batch line that is not SGLang's")


# TensorRT-LLM ----------------------------------------------------------------------------


def test_trtllm_records_of_two_polls_become_steps() -> None:
    result = read_steps(DATA / "trtllm-iterations.jsonl", "trtllm-iterations")
    t = 1796316949 * S  # 2026-12-03 16:55:49 UTC
    assert _rows(
        result.frame,
        "step",
        "ts_end",
        "ts_start",
        "prefill_requests",
        "prefill_tokens",
        "decode_requests",
        "preempted",
        "queued_requests",
        "kv_usage",
    ) == [
        (154, t + 100 * MS, t + 100 * MS - 31_250_000, 2, 1024, 0, 0, 2, 0.1),
        (155, t + 107_500_000, t + 107_500_000 - 7_006_884, 0, 0, 2, 0, 2, 0.1),
        (156, t + 115 * MS, t + 115 * MS - 7_500_000, 0, 0, 2, 0, 2, 0.1),
    ]
    for name in ("replica", "decode_tokens", "cached_tokens", "kv_tokens", "request_ids"):
        assert result.frame[name].null_count() == 3, name


def test_trtllm_record_without_iter_names_record_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.jsonl", '[{"iter": 1}]\n[{"iter": 2}, {"iterLatencyMS": 3.0}]\n')
    with pytest.raises(InputError) as caught:
        read_steps(path, "trtllm-iterations")
    assert caught.value.message == (
        f"{path}: record 3 (line 2): no 'iter' (TensorRT-LLM writes it in every iteration record)"
    )


def test_trtllm_unknown_fields_are_ignored_and_absent_ones_null(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.json", '[{"iter": 9, "someNewField": {"x": 1}}]')
    steps = read_steps(path, "trtllm-iterations").frame
    assert steps["step"].to_list() == [9]
    assert all(steps[c].null_count() == 1 for c in steps.columns if c != "step")


def test_trtllm_bad_timestamp_names_the_record(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.json", '[{"iter": 9, "timestamp": "yesterday"}]')
    with pytest.raises(InputError) as caught:
        read_steps(path, "trtllm-iterations")
    assert caught.value.message.startswith(f"{path}: record 1: 'timestamp' 'yesterday' is not")


# forward-pass ----------------------------------------------------------------------------


def test_forward_pass_messages_become_steps_and_heartbeats_are_dropped() -> None:
    result = read_steps(DATA / "forward-pass.msgpack", "forward-pass")
    base = 1_796_316_949_000_000_000
    assert _rows(
        result.frame,
        "step",
        "replica",
        "ts_end",
        "ts_start",
        "prefill_requests",
        "prefill_tokens",
        "decode_requests",
        "queued_requests",
    ) == [
        (1, "0", base + 90 * MS, base + 90 * MS - 31_200_000, 2, 1024, 0, 3),
        (2, "0", base + 99 * MS, base + 99 * MS - 7_100_000, 0, 0, 2, 4),
    ]
    for name in ("decode_tokens", "cached_tokens", "kv_tokens", "kv_usage", "preempted"):
        assert result.frame[name].null_count() == 2, name
    assert any("1 heartbeat" in note for note in result.notes)


def _recording(tmp_path: Path, *records: object) -> Path:
    path = tmp_path / "r.fpm"
    header = {"format": "servetrace-zmq-record", "version": 1, "address": "x", "started_ns": 0}
    path.write_bytes(b"".join(msgpack.packb(r) for r in (header, *records)))
    return path


def test_forward_pass_record_of_the_wrong_shape_names_the_record(tmp_path: Path) -> None:
    path = _recording(tmp_path, [1, [b"", msgpack.packb({"wall_time": 0.01})]], {"no": 1})
    with pytest.raises(InputError) as caught:
        read_steps(path, "forward-pass")
    assert caught.value.message == (
        f"{path}: record 3: not [received_ns, [frames]] as record-steps writes"
    )


def test_forward_pass_other_version_is_refused(tmp_path: Path) -> None:
    path = _recording(tmp_path, [1, [msgpack.packb({"version": 2, "wall_time": 0.01})]])
    with pytest.raises(InputError) as caught:
        read_steps(path, "forward-pass")
    assert caught.value.message == (
        f"{path}: record 2: ForwardPassMetrics version 2; servetrace reads version 1"
    )


def test_forward_pass_unknown_fields_are_ignored(tmp_path: Path) -> None:
    message = {"wall_time": 0.002, "new_field": [1, 2], "scheduled_requests": {"x": 1}}
    path = _recording(tmp_path, [7, [msgpack.packb(message)]])
    steps = read_steps(path, "forward-pass").frame
    assert _rows(steps, "ts_end", "ts_start", "step", "replica", "prefill_requests") == [
        (7, 7 - 2_000_000, None, None, 0)
    ]


def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.fpm", "hello")
    with pytest.raises(InputError) as caught:
        read_steps(path, "forward-pass")
    assert caught.value.message.startswith(f"{path}: record 1: not a servetrace record-steps")


def test_alignment_with_nothing_to_vote_keeps_every_step_unaligned() -> None:
    from servetrace.sources.steps.align import align_to_ticks

    steps = pl.DataFrame(
        {
            "replica": ["0", "0", "1"],
            "anchor": [10 * S, 10 * S, 50 * S],
            "duration": [5 * MS, 5 * MS, 5 * MS],
            "emits": [False, False, True],
        }
    )
    # Step 3 is alone in its run: one step cannot agree with another (MIN_VOTES).
    ticks = pl.Series([10 * S + 5 * MS, 50 * S + 7 * MS], dtype=pl.Int64)
    ends, alignment = align_to_ticks(steps, ticks)
    assert ends.to_list() == [None, None, None]
    assert (alignment.total, alignment.snapped, alignment.error_ns) == (3, 0, None)
