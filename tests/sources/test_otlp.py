"""OTLP JSON spans: vLLM's llm_request dialect and the GenAI conventions.

Round trips: requests with known timings are written as spans (``engine_writers``), read
back, and their request-level metrics equal the canonical analysis to the ns.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from servetrace.errors import ExitCode, InputError
from servetrace.sources import otlp
from servetrace.sources.registry import detect_format, import_file

from .engine_writers import (
    LATENCIES,
    WALL_NS,
    assert_same_requests,
    canonical,
    genai_span,
    request_metrics,
    sample_requests,
    vllm_span,
    write_otlp,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "engines" / "otlp"


def test_vllm_round_trip_completed_cancelled_errored(tmp_path: Path) -> None:
    reqs = sample_requests()
    path = write_otlp(tmp_path / "spans.jsonl", [vllm_span(r, i) for i, r in enumerate(reqs)])
    result = import_file(path)
    assert result.format == "otlp" and result.request_level and result.arrival_known
    assert result.events["source"].unique().to_list() == ["server"]
    # Durations are float seconds: read back to the ns (1 ns for the float's last bit).
    assert_same_requests(result.events, canonical(reqs, WALL_NS), LATENCIES, tolerance_ns=1)
    got = request_metrics(result.events)
    r4 = got.filter(pl.col("request_id") == "r4").row(0, named=True)
    assert r4["outcome"] == "errored" and r4["error"] == "finish reason error"
    r3 = got.filter(pl.col("request_id") == "r3").row(0, named=True)
    assert r3["outcome"] == "cancelled" and r3["error"] is None


def test_vllm_span_with_status_error_is_errored(tmp_path: Path) -> None:
    """OTLP's own failure mark (status ERROR) makes an errored request, not a completion
    or a cancellation, whatever the finish reason says."""
    reqs = sample_requests()
    spans = [vllm_span(r, i) for i, r in enumerate(reqs)]
    spans[0]["status"] = {"code": 2, "message": "CUDA out of memory"}
    path = write_otlp(tmp_path / "spans.jsonl", spans)
    got = request_metrics(import_file(path).events)
    first = got.filter(pl.col("request_id") == "r1").row(0, named=True)
    assert first["outcome"] == "errored" and first["error"] == "CUDA out of memory"
    # the others keep their outcomes
    assert got.filter(pl.col("request_id") == "r3")["outcome"].item() == "cancelled"


def test_vllm_hand_computed_span(tmp_path: Path) -> None:
    """One span, by hand: start 1 s, queue 30 ms, TTFT 80 ms, decode 500 ms, e2e 580 ms,
    101 tokens: queue_wait 30, prefill 50, TPOT 500/100 = 5 ms; ITL unavailable."""
    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "llm_request",
        "kind": "SPAN_KIND_SERVER",
        "startTimeUnixNano": "1000000000",
        "endTimeUnixNano": "1580000000",
        "attributes": [
            {"key": "gen_ai.request.id", "value": {"stringValue": "req-1"}},
            {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.03}},
            {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.08}},
            {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 0.58}},
            {"key": "gen_ai.latency.time_in_model_decode", "value": {"doubleValue": 0.5}},
            {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "512"}},
            {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": 101}},
        ],
    }
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    from servetrace.analysis.memory import analyze_events

    analysis = analyze_events(import_file(path, "otlp").events)
    row = analysis.requests.row(0, named=True)
    assert row["request_id"] == "req-1"
    assert row["queue_wait_ns"] == 30_000_000
    assert row["prefill_ns"] == 50_000_000
    assert row["ttft_ns"] == 80_000_000
    assert row["decode_ns"] == 500_000_000
    assert row["e2e_ns"] == 580_000_000
    assert row["tpot_ns"] == 5_000_000
    assert row["prompt_tokens"] == 512 and row["output_tokens"] == 101
    assert "itl" not in analysis.summary.metrics or analysis.summary.metrics["itl"]["count"] == 0


def test_vllm_033_spans_have_no_aborts_and_say_so() -> None:
    result = import_file(DATA / "spans.jsonl")
    assert any("aborted requests are not in this trace" in w for w in result.warnings)
    assert any("ITL distribution is unavailable" in w for w in result.warnings)
    # The fixture's engine queued each request 0.9 ms after arrival: prefill includes it.
    assert any("on average 0.900 ms shorter" in w for w in result.warnings)


def test_unknown_attributes_are_kept() -> None:
    events = import_file(DATA / "spans.jsonl").events
    assert events["gen_ai.request.max_tokens"].unique().to_list() == [2048]
    assert events["resource.service.name"].unique().to_list() == ["vllm"]
    assert events.filter(pl.col("event") == "admission").height == 6


def test_genai_round_trip(tmp_path: Path) -> None:
    reqs = sample_requests()
    path = write_otlp(tmp_path / "client.jsonl", [genai_span(r, i) for i, r in enumerate(reqs)])
    result = import_file(path)
    assert result.events["source"].unique().to_list() == ["client"]
    assert "admission" not in result.events["event"].to_list()
    truth = canonical(reqs, WALL_NS, admissions=False)
    # The request id is the response id we wrote (chatcmpl-<rid>).
    imported = result.events.with_columns(
        request_id=pl.col("request_id").str.strip_prefix("chatcmpl-")
    )
    completed = [r.rid for r in reqs if r.outcome == "completed"]
    assert_same_requests(
        imported, truth, ("ttft_ns", "decode_ns", "e2e_ns", "tpot_ns"), 1, only=completed
    )
    got = request_metrics(imported)
    assert got["queue_wait_ns"].null_count() == got.height  # unavailable, not zero
    assert got["prefill_ns"].null_count() == got.height
    r4 = got.filter(pl.col("request_id") == "r4").row(0, named=True)
    assert r4["outcome"] == "errored" and r4["error"] == "APIConnectionError"
    assert r4["ttft_ns"] == round((330.0 - 35.125) * 1e6)
    r3 = got.filter(pl.col("request_id") == "r3").row(0, named=True)
    assert r3["outcome"] == "cancelled" and r3["e2e_ns"] == 380_000_000


def test_genai_server_spans_are_server_side(tmp_path: Path) -> None:
    reqs = sample_requests()[:2]
    spans = [genai_span(r, i, kind=2) for i, r in enumerate(reqs)]
    result = import_file(write_otlp(tmp_path / "server.jsonl", spans))
    assert result.events["source"].unique().to_list() == ["server"]


def test_genai_unstreamed_span_takes_its_end_as_first_token(tmp_path: Path) -> None:
    span = genai_span(sample_requests()[0], 0)
    span["attributes"] = [
        a for a in span["attributes"] if a["key"] != "gen_ai.response.time_to_first_chunk"
    ]
    result = import_file(write_otlp(tmp_path / "unstreamed.jsonl", [span]))
    got = request_metrics(result.events).row(0, named=True)
    assert got["ttft_ns"] == got["e2e_ns"] == 580_000_000
    assert any("not streamed" in w for w in result.warnings)


def test_other_spans_are_counted_and_skipped(tmp_path: Path) -> None:
    spans = [vllm_span(r, i) for i, r in enumerate(sample_requests())]
    http = dict(spans[0], name="POST /v1/chat/completions", spanId="ff" * 8, attributes=[])
    result = import_file(write_otlp(tmp_path / "mixed.jsonl", [http, *spans]))
    assert result.records == 5
    assert any("1 span that is not an LLM request span" in w for w in result.warnings)


def test_folder_of_rotated_and_gzipped_files() -> None:
    folder = DATA / "rotated"
    assert detect_format(folder) == "otlp"
    result = import_file(folder)
    assert result.records == 8  # 9 spans in 3 files, one of them twice
    assert result.events.filter(pl.col("event") == "arrival")["request_id"].n_unique() == 8
    assert any("counted once" in w for w in result.warnings)


def test_detection_by_content() -> None:
    assert detect_format(DATA / "spans.jsonl") == "otlp"
    assert detect_format(DATA / "genai_client.jsonl") == "otlp"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s.pop("startTimeUnixNano"), r"spans\[0\]: missing field 'startTimeUnixNano'"),
        (
            lambda s: s["attributes"].__setitem__(
                1, {"key": "gen_ai.latency.e2e", "value": {"stringValue": "fast"}}
            ),
            r"spans\[0\]: attribute 'gen_ai.latency.e2e' must be a number of seconds",
        ),
        (
            lambda s: s.__setitem__("startTimeUnixNano", "2026-03-02T10:00:00Z"),
            r"field 'startTimeUnixNano' must be Unix ns",
        ),
        (
            lambda s: s["attributes"].append({"key": "x", "value": {"oddValue": 1}}),
            r"unknown attribute value type",
        ),
    ],
    ids=["no-start", "e2e-not-a-number", "start-not-ns", "unknown-value-type"],
)
def test_broken_span_names_file_line_span_and_field(tmp_path: Path, mutate, expected) -> None:
    span = vllm_span(sample_requests()[0], 0)
    mutate(span)
    path = write_otlp(tmp_path / "broken.jsonl", [span])
    with pytest.raises(InputError, match=expected) as caught:
        import_file(path)
    assert caught.value.message.startswith(f"{path}: line 1: resourceSpans[0]")
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT


def test_broken_line_names_the_line(tmp_path: Path) -> None:
    path = write_otlp(
        tmp_path / "cut.jsonl", [vllm_span(r, i) for i, r in enumerate(sample_requests())]
    )
    text = path.read_text()
    path.write_text(text[: len(text) - 40])
    with pytest.raises(InputError, match=r"cut\.jsonl: line 3: not valid JSON"):
        import_file(path, "otlp")


def test_zstd_and_proto_are_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "traces.json.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 20)
    with pytest.raises(InputError, match="zstd-compressed") as caught:
        otlp.read(path)
    assert caught.value.hint is not None and "zstd -d" in caught.value.hint


def test_gzip_file(tmp_path: Path) -> None:
    plain = write_otlp(
        tmp_path / "spans.jsonl", [vllm_span(r, i) for i, r in enumerate(sample_requests())]
    )
    packed = tmp_path / "spans.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert detect_format(packed) == "otlp"
    assert import_file(packed).records == 5
