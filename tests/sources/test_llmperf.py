"""LLMPerf importer: no send times, no ticks. Agreement with the leaderboard summaries
(successful rows only, sample std), LLMPerf's own ITL definition pinned, error rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from servetrace.errors import InputError
from servetrace.sources import llmperf

from .conftest import (
    LLMPERF,
    TICKS,
    analyze_or_skip,
    assert_lifecycle_is_plausible,
    completed,
    per_request,
    read_json,
    write_json,
)

PROVIDERS = ("anyscale_70b", "bedrock_13b", "lepton_7b", "together_13b")
S = 1e9


@pytest.fixture(scope="module", params=PROVIDERS)
def run(request: pytest.FixtureRequest) -> llmperf.ImportResult:
    return llmperf.read(LLMPERF / f"{request.param}.json")


def _llmperf_stats(values: Any, prefix: str, summary: dict[str, Any]) -> float:
    """Max difference to LLMPerf's ``results_<metric>_*``: numpy-linear quantiles (pandas),
    mean, min, max, and the *sample* standard deviation (pandas ``std``, ddof=1)."""
    v = np.asarray(values, dtype=float)
    ours = {"mean": v.mean(), "min": v.min(), "max": v.max(), "stddev": v.std(ddof=1)}
    ours.update({f"quantiles_p{q}": np.percentile(v, q) for q in (25, 50, 75, 90, 95, 99)})
    return max(
        abs(value - float(summary[f"results_{prefix}_{key}"])) for key, value in ours.items()
    )


def test_llmperf_ttft_and_e2e_agree_with_the_summary(run: llmperf.ImportResult) -> None:
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events)
    assert done.height == summary["results_num_completed_requests"]
    assert _llmperf_stats(done["ttft_ns"] / S, "ttft_s", summary) < 1e-9
    assert _llmperf_stats(done["e2e_ns"] / S, "end_to_end_latency_s", summary) < 1e-9
    assert _llmperf_stats(done["output_tokens"], "number_output_tokens", summary) < 1e-9


def test_llmperf_error_rate_agrees(run: llmperf.ImportResult) -> None:
    summary = run.tool_summary
    assert summary is not None
    rows = per_request(run.events)
    errors = rows.filter(pl.col("terminal") == "error").height
    assert errors == summary["results_number_errors"]
    assert errors / rows.height == pytest.approx(summary["results_error_rate"], abs=1e-12)


def test_llmperf_itl_is_its_own_definition(run: llmperf.ImportResult) -> None:
    """LLMPerf's inter_token_latency_s is Σ(client chunk gaps, TTFT included)/N: kept per
    request as tool_inter_token_latency_ns, it reproduces the summary; N x it lies between
    TTFT and e2e (it is the time to the last chunk), so it is neither our ITL nor our tpot."""
    summary = run.tool_summary
    assert summary is not None
    done = completed(run.events).join(
        run.events.group_by("request_id").agg(pl.col("tool_inter_token_latency_ns").first()),
        on="request_id",
    )
    theirs = done["tool_inter_token_latency_ns"] / S
    assert _llmperf_stats(theirs, "inter_token_latency_s", summary) < 1e-9
    to_last_chunk = done["tool_inter_token_latency_ns"] * done["output_tokens"]
    assert (to_last_chunk >= done["ttft_ns"] - done["output_tokens"]).all()
    assert (to_last_chunk <= done["e2e_ns"] + done["output_tokens"]).all()
    multi = done.filter(pl.col("output_tokens") >= 2)
    assert (multi["tpot_ns"] != multi["tool_inter_token_latency_ns"]).any()


def test_llmperf_agrees_through_the_pipeline(run: llmperf.ImportResult) -> None:
    analysis = analyze_or_skip(run.events)
    summary = run.tool_summary
    assert summary is not None
    ok = analysis.requests.filter(pl.col("outcome") == "completed")
    assert _llmperf_stats(ok["ttft_ns"] / S, "ttft_s", summary) < 1e-9
    assert _llmperf_stats(ok["e2e_ns"] / S, "end_to_end_latency_s", summary) < 1e-9


def test_llmperf_has_no_send_times(run: llmperf.ImportResult) -> None:
    assert not run.arrival_known
    assert not run.events["arrival_known"].any()
    assert (run.events.filter(pl.col("event") == "arrival")["ts"] == 0).all()
    assert any("no send times" in w for w in run.warnings)


def test_llmperf_is_request_level_with_one_tick_per_request(run: llmperf.ImportResult) -> None:
    assert run.request_level
    assert not run.events["ticks_available"].any()
    ticks = run.events.filter(pl.col("event").is_in(TICKS))
    assert ticks["event"].unique().to_list() == ["first_token"]
    assert ticks.group_by("request_id").len()["len"].max() == 1
    assert_lifecycle_is_plausible(run.events)


def test_llmperf_429_rows_are_errors_not_zero_latency() -> None:
    result = llmperf.read(LLMPERF / "lepton_7b.json")
    rows = per_request(result.events)
    rejected = rows.filter(pl.col("terminal") == "error")
    assert rejected.height == 130
    assert rejected["ticks"].is_null().all()  # no first token at "0 s"
    assert rejected["reported"].is_null().all()  # not the file's meaningless 1 token
    events = result.events.filter(pl.col("request_id").is_in(rejected["request_id"].implode()))
    assert (events["error_code"] == 429).all()
    assert not events["terminal_known"].any()
    # the zeros do not reach latency statistics: only the 20 served requests do
    assert completed(result.events)["ttft_ns"].min() > 0
    assert any("error_code 429 with zero latencies" in w for w in result.warnings)


def test_llmperf_error_rows_with_latencies_keep_them() -> None:
    """Bedrock's -100 "Output too few tokens" rows were served: they keep first token and
    end time, end in an error (errored, not cancelled), and stay out of the completed statistics."""
    raw = read_json(LLMPERF / "bedrock_13b.json")
    result = llmperf.read(LLMPERF / "bedrock_13b.json")
    rows = per_request(result.events).filter(pl.col("terminal") == "error")
    assert rows.height == 97
    assert (rows["ticks"] == 1).all()
    for row in rows.head(10).iter_rows(named=True):
        record = raw[int(row["request_id"])]
        assert record["error_code"] == -100
        assert row["e2e_ns"] == round(record["end_to_end_latency_s"] * S)
        assert row["reported"] == record["number_output_tokens"]
    messages = result.events.filter(pl.col("error_code") == -100)["error"]
    assert messages.str.starts_with("Output too few tokens").all()


def test_llmperf_summary_found_next_to_individual_responses(tmp_path: Path) -> None:
    """llmperf itself writes <prefix>_individual_responses.json and <prefix>_summary.json."""
    prefix = "llama2-7b_550_150"
    (tmp_path / f"{prefix}_individual_responses.json").write_bytes(
        (LLMPERF / "lepton_7b.json").read_bytes()
    )
    (tmp_path / f"{prefix}_summary.json").write_bytes(
        (LLMPERF.parent / "summary" / "lepton_7b.json").read_bytes()
    )
    result = llmperf.read(tmp_path / f"{prefix}_individual_responses.json")
    assert result.tool_summary is not None
    assert result.tool_summary["results_number_errors"] == 130


def test_llmperf_missing_ttft_names_record_and_field(tmp_path: Path) -> None:
    rows = read_json(LLMPERF / "anyscale_70b.json")[:4]
    del rows[2]["ttft_s"]
    with pytest.raises(InputError) as caught:
        llmperf.read(write_json(tmp_path, "no_ttft.json", rows))
    assert caught.value.message == "%s: record 2: missing field 'ttft_s' in this LLMPerf record" % (
        tmp_path / "no_ttft.json"
    )


def test_llmperf_text_latency_names_record_and_field(tmp_path: Path) -> None:
    rows = read_json(LLMPERF / "anyscale_70b.json")[:4]
    rows[1]["end_to_end_latency_s"] = "3.2 s"
    with pytest.raises(
        InputError, match=r"record 1: field 'end_to_end_latency_s' must be a number"
    ):
        llmperf.read(write_json(tmp_path, "text_latency.json", rows))


def test_llmperf_empty_list(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no requests"):
        llmperf.read(write_json(tmp_path, "empty.json", []))
