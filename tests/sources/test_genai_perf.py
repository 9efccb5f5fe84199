"""GenAI-Perf importer: agreement with profile_export_genai_perf.json, chunks that are not
tokens (finish, usage, [DONE]), and bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from servetrace.errors import InputError
from servetrace.sources import genai_perf

from .conftest import (
    GENAI_PERF_CONC8,
    MS,
    TICKS,
    analyze_or_skip,
    assert_lifecycle_is_plausible,
    completed,
    max_difference,
    read_json,
    stats,
    write_json,
)

STATS = {
    "mean": "avg",
    "std": "std",
    "min": "min",
    "max": "max",
    **{f"p{q}": f"p{q}" for q in (1, 5, 10, 25, 50, 75, 90, 95, 99)},
}


@pytest.fixture(scope="module")
def run() -> genai_perf.ImportResult:
    return genai_perf.read(GENAI_PERF_CONC8)


def test_genai_perf_ttft_agrees(run: genai_perf.ImportResult) -> None:
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events)
    assert done.height == summary["request_count"]["avg"]
    assert max_difference(stats(done["ttft_ns"] / MS), summary["time_to_first_token"], STATS) < 1e-9


def test_genai_perf_request_latency_is_our_response_time(run: genai_perf.ImportResult) -> None:
    """GenAI-Perf's request latency ends at the last content chunk: our ``response``;
    our ``e2e`` runs on to the [DONE] chunk."""
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events)
    assert max_difference(stats(done["response_ns"] / MS), summary["request_latency"], STATS) < 1e-9
    assert (done["e2e_ns"] >= done["response_ns"]).all()


def test_genai_perf_time_to_second_token_agrees(run: genai_perf.ImportResult) -> None:
    summary = run.tool_summary
    assert summary is not None
    second = (
        run.events.filter(pl.col("event") == "token")
        .group_by("request_id")
        .agg(pl.col("ts").min())
        .join(completed(run.events).select("request_id", "first_ns"), on="request_id")
    )
    gaps = (second["ts"] - second["first_ns"]) / MS
    assert max_difference(stats(gaps), summary["time_to_second_token"], STATS) < 1e-9


def test_genai_perf_inter_token_latency_is_our_tpot_rounded_to_ns(
    run: genai_perf.ImportResult,
) -> None:
    """GenAI-Perf's inter_token_latency is the per-request mean (latency - ttft)/(OSL - 1),
    rounded to whole ns, with OSL from a tokenizer. The mock server sends one token per
    chunk, so OSL = content chunks here: our tpot rounded to ns matches exactly; unrounded
    it differs by under 1 ns (pinned)."""
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events)
    assert (
        max_difference(stats(done["output_tokens"]), summary["output_sequence_length"], STATS)
        < 1e-9
    )
    tpot = done["tpot_ns"].drop_nulls().to_numpy()
    assert max_difference(stats(np.round(tpot) / MS), summary["inter_token_latency"], STATS) < 1e-9
    assert max_difference(stats(tpot / MS), summary["inter_token_latency"], STATS) < 1e-6


def test_genai_perf_agrees_through_the_pipeline(run: genai_perf.ImportResult) -> None:
    analysis = analyze_or_skip(run.events)
    summary = run.tool_summary
    assert summary is not None
    done = analysis.requests.filter(pl.col("outcome") == "completed")
    assert max_difference(stats(done["ttft_ns"] / MS), summary["time_to_first_token"], STATS) < 1e-9
    assert max_difference(stats(done["response_ns"] / MS), summary["request_latency"], STATS) < 1e-9


def test_genai_perf_done_and_finish_chunks_are_not_tokens(run: genai_perf.ImportResult) -> None:
    """Each mock stream ends with a finish chunk (empty delta) and [DONE]: 2 non-tokens."""
    raw = read_json(GENAI_PERF_CONC8)["experiments"][0]["requests"]
    responses = np.array([len(r["response_timestamps"]) for r in raw])
    ticks = (
        run.events.filter(pl.col("event").is_in(TICKS))
        .group_by("request_id")
        .len()
        .sort(pl.col("request_id").cast(pl.Int64))
    )
    assert (ticks["len"].to_numpy() == responses - 2).all()
    last = np.array([r["response_timestamps"][-1] for r in raw])
    ends = run.events.filter(pl.col("event") == "completion").sort(
        pl.col("request_id").cast(pl.Int64)
    )["ts"]
    assert (ends.to_numpy() == last).all()


def test_genai_perf_no_usage_leaves_output_tokens_to_the_chunks(
    run: genai_perf.ImportResult,
) -> None:
    assert run.events.filter(pl.col("event") == "completion")["output_tokens"].is_null().all()
    assert any("tokenizer" in w for w in run.warnings)


def test_genai_perf_records_out_of_order_are_sorted(run: genai_perf.ImportResult) -> None:
    sends = [r["timestamp"] for r in read_json(GENAI_PERF_CONC8)["experiments"][0]["requests"]]
    assert sends != sorted(sends)
    assert run.events.filter(pl.col("event") == "arrival")["ts"].is_sorted()


def test_genai_perf_no_fabricated_events(run: genai_perf.ImportResult) -> None:
    assert_lifecycle_is_plausible(run.events)
    assert run.arrival_known and not run.request_level
    assert run.events["experiment"].unique().to_list() == ["concurrency=8"]


def _chunk(payload: dict[str, Any] | str) -> dict[str, str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return {"response": f"data: {text}\n\n"}


def _delta(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_genai_perf_usage_and_role_chunks(tmp_path: Path) -> None:
    """A role-only first chunk and a usage chunk are not tokens; usage sets the count; two
    SSE events in one response are one chunk."""
    request = {
        "timestamp": 1_000,
        "response_timestamps": [1_100, 1_200, 1_300, 1_400, 1_500],
        "response_outputs": [
            _chunk(_delta(role="assistant", content="")),
            _chunk(_delta(content="Hello")),
            {
                "response": "data: "
                + json.dumps(_delta(content=" wor"))
                + "\n\ndata: "
                + json.dumps(_delta(content="ld"))
                + "\n\n"
            },
            _chunk({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}),
            _chunk("[DONE]"),
        ],
    }
    doc = {
        "experiments": [
            {"experiment": {"mode": "request_rate", "value": 2.0}, "requests": [request]}
        ]
    }
    events = genai_perf.read(write_json(tmp_path, "usage_and_role_chunks.json", doc)).events
    assert events["event"].to_list() == ["arrival", "first_token", "token", "completion"]
    assert events["ts"].to_list() == [1_000, 1_200, 1_300, 1_500]
    assert events.filter(pl.col("event") == "completion")["output_tokens"].item() == 4
    assert events.filter(pl.col("event") == "arrival")["prompt_tokens"].item() == 7


def test_genai_perf_request_without_content_and_without_response(tmp_path: Path) -> None:
    doc = {
        "experiments": [
            {
                "experiment": {"mode": "concurrency", "value": 1},
                "requests": [
                    {
                        "timestamp": 10,
                        "response_timestamps": [20],
                        "response_outputs": [_chunk("[DONE]")],
                    },
                    {"timestamp": 30, "response_timestamps": [], "response_outputs": []},
                ],
            }
        ]
    }
    result = genai_perf.read(write_json(tmp_path, "no_content.json", doc))
    events = result.events
    assert events.filter(pl.col("request_id") == "0")["event"].to_list() == [
        "arrival",
        "error",  # a failed request is errored, not cancelled
    ]
    assert events.filter(pl.col("request_id") == "1")["event"].to_list() == ["arrival"]
    assert any("no response at all" in w for w in result.warnings)
    assert any("without any content" in w for w in result.warnings)


def test_genai_perf_mismatched_lengths_name_request_and_fields(tmp_path: Path) -> None:
    doc = {
        "experiments": [
            {
                "requests": [
                    {
                        "timestamp": 10,
                        "response_timestamps": [20, 30],
                        "response_outputs": [_chunk("[DONE]")],
                    },
                ]
            }
        ]
    }
    with pytest.raises(InputError) as caught:
        genai_perf.read(write_json(tmp_path, "mismatch.json", doc))
    message = caught.value.message
    assert "mismatch.json: experiments[0].requests[0]" in message
    assert "'response_outputs' has 1 entries but 'response_timestamps' has 2" in message


def test_genai_perf_missing_send_time_is_named(tmp_path: Path) -> None:
    doc = {"experiments": [{"requests": [{"response_timestamps": [], "response_outputs": []}]}]}
    with pytest.raises(
        InputError, match=r"experiments\[0\]\.requests\[0\]: missing field 'timestamp'"
    ):
        genai_perf.read(write_json(tmp_path, "no_timestamp.json", doc))


def test_genai_perf_truncated_gzip_json(tmp_path: Path) -> None:
    import gzip

    text = gzip.decompress(GENAI_PERF_CONC8.read_bytes())[:50_000]
    path = tmp_path / "truncated.json.gz"
    path.write_bytes(gzip.compress(text))
    with pytest.raises(InputError, match=r"truncated\.json\.gz: not valid JSON at line"):
        genai_perf.read(path)
