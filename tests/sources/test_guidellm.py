"""GuideLLM importer: a request-level trace. Agreement with GuideLLM's own statistics
(recomputed with its definitions: TPOT includes TTFT, ITL/TPOT token-weighted, percentiles
not interpolated), cancelled requests with partial output, and bad files."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from servetrace.errors import InputError
from servetrace.sources import guidellm

from .conftest import (
    GUIDELLM_CONC8,
    MS,
    TICKS,
    analyze_or_skip,
    assert_lifecycle_is_plausible,
    completed,
    per_request,
    read_json,
    write_json,
)

_PERCENTILES = {
    "p001": 0.001,
    "p01": 0.01,
    "p05": 0.05,
    "p10": 0.1,
    "p25": 0.25,
    "p50": 0.5,
    "p75": 0.75,
    "p90": 0.9,
    "p95": 0.95,
    "p99": 0.99,
    "p999": 0.999,
}


def guidellm_distribution(values: Any, weights: Any = None) -> dict[str, float]:
    """GuideLLM's DistributionSummary.from_values: a weighted pdf over the sorted distinct
    values; percentiles are the first value whose cumulative probability reaches p (no
    interpolation); mean and population std are probability-weighted."""
    v = np.asarray(values, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    order = np.argsort(v)
    unique, inverse = np.unique(v[order], return_inverse=True)
    combined = np.zeros_like(unique)
    np.add.at(combined, inverse, w[order])
    keep = combined > 0
    unique, combined = unique[keep], combined[keep]
    p = combined / combined.sum()
    cdf = np.cumsum(p)
    out = {
        key: float(unique[np.searchsorted(cdf, q, side="left")]) for key, q in _PERCENTILES.items()
    }
    mean = float(np.sum(unique * p))
    out.update(
        mean=mean,
        std_dev=float(np.sqrt(np.sum((unique - mean) ** 2 * p))),
        min=float(unique[0]),
        max=float(unique[-1]),
        median=out["p50"],
        count=round(float(w.sum())),
    )
    return out


def _difference(ours: dict[str, float], theirs: dict[str, Any]) -> float:
    assert ours["count"] == theirs["count"]
    keys = ("mean", "std_dev", "min", "max", "median")
    diffs = [abs(ours[k] - theirs[k]) for k in keys]
    diffs += [abs(ours[k] - theirs["percentiles"][k]) for k in _PERCENTILES]
    return max(diffs)


@pytest.fixture(scope="module")
def run() -> guidellm.ImportResult:
    return guidellm.read(GUIDELLM_CONC8)


@pytest.fixture(scope="module")
def done(run: guidellm.ImportResult) -> pl.DataFrame:
    return completed(run.events)


def _summary(run: guidellm.ImportResult, metric: str) -> dict[str, Any]:
    assert run.tool_summary is not None
    return run.tool_summary[metric]["successful"]


# --------------------------------------------------------------------------------------
# Numbers agree with GuideLLM's own statistics
# --------------------------------------------------------------------------------------


def test_guidellm_ttft_agrees(run: guidellm.ImportResult, done: pl.DataFrame) -> None:
    """Times are Unix-second floats rounded once to ns: agreement within 1 ns (1e-6 ms)."""
    ours = guidellm_distribution(done["ttft_ns"] / MS)
    assert _difference(ours, _summary(run, "time_to_first_token_ms")) < 1e-6


def test_guidellm_request_latency_is_our_e2e(
    run: guidellm.ImportResult, done: pl.DataFrame
) -> None:
    ours = guidellm_distribution(done["e2e_ns"] / 1e9)
    assert _difference(ours, _summary(run, "request_latency")) < 1e-9


def test_guidellm_inter_token_latency_is_our_tpot_token_weighted(
    run: guidellm.ImportResult, done: pl.DataFrame
) -> None:
    """GuideLLM's ITL is (last token - first token)/(N - 1) per request, our tpot, and its
    run-level statistics weight each request by N - 1."""
    multi = done.filter(pl.col("output_tokens") >= 2)
    ours = guidellm_distribution(multi["tpot_ns"] / MS, multi["output_tokens"] - 1)
    assert _difference(ours, _summary(run, "inter_token_latency_ms")) < 1e-6


def test_guidellm_tpot_includes_ttft(run: guidellm.ImportResult, done: pl.DataFrame) -> None:
    """GuideLLM's time_per_output_token is (last token - start)/N, TTFT included: it is
    (ttft + (N - 1)·tpot)/N in our terms, always above our tpot here (TTFT > ITL)."""
    n = done["output_tokens"]
    theirs_per_request = (done["ttft_ns"] + (n - 1) * done["tpot_ns"]) / n / MS
    ours = guidellm_distribution(theirs_per_request, n)
    assert _difference(ours, _summary(run, "time_per_output_token_ms")) < 1e-6
    assert (theirs_per_request > done["tpot_ns"] / MS).all()
    difference = (
        _summary(run, "time_per_output_token_ms")["mean"]
        - _summary(run, "inter_token_latency_ms")["mean"]
    )
    assert difference > 0.5  # ms: the TTFT share spread over the tokens


def test_guidellm_agrees_through_the_pipeline(run: guidellm.ImportResult) -> None:
    analysis = analyze_or_skip(run.events)
    ok = analysis.requests.filter(pl.col("outcome") == "completed")
    ours = guidellm_distribution(ok["ttft_ns"] / MS)
    assert _difference(ours, _summary(run, "time_to_first_token_ms")) < 1e-6
    multi = ok.filter(pl.col("output_tokens") >= 2)
    itl = guidellm_distribution(multi["tpot_ns"] / MS, multi["output_tokens"] - 1)
    assert _difference(itl, _summary(run, "inter_token_latency_ms")) < 1e-6
    assert analysis.gaps.height == 0  # no ITL distribution from a request-level trace


# --------------------------------------------------------------------------------------
# What the trace is, and is not
# --------------------------------------------------------------------------------------


def test_guidellm_is_request_level_with_one_tick_per_request(run: guidellm.ImportResult) -> None:
    assert run.request_level and run.arrival_known
    assert not run.events["ticks_available"].any()
    ticks = run.events.filter(pl.col("event").is_in(TICKS))
    assert set(ticks["event"].unique().to_list()) == {"first_token"}
    assert ticks.group_by("request_id").len()["len"].max() == 1
    assert_lifecycle_is_plausible(run.events)
    assert any("request-level" in w for w in run.warnings)


def test_guidellm_last_token_is_kept_apart_from_the_stream_end(run: guidellm.ImportResult) -> None:
    rows = per_request(run.events)
    assert (rows["last_token_ns"] <= rows["terminal_ns"]).all()
    assert (rows["last_token_ns"] >= rows["first_ns"]).all()
    assert (rows["terminal_ns"] - rows["last_token_ns"]).max() > 0


def test_guidellm_keeps_request_ids_and_counts(run: guidellm.ImportResult) -> None:
    raw = read_json(GUIDELLM_CONC8)["benchmarks"][0]["requests"]["successful"]
    rows = per_request(run.events)
    by_id = {r["request_id"]: r for r in raw}
    assert set(rows["request_id"]) == set(by_id)
    for row in rows.head(25).iter_rows(named=True):
        record = by_id[row["request_id"]]
        assert row["reported"] == record["output_tokens"]
        assert row["prompt_tokens"] == record["prompt_tokens"]


# --------------------------------------------------------------------------------------
# Cancelled and errored requests (GuideLLM files rarely have them: built from a real one)
# --------------------------------------------------------------------------------------


def _ns(seconds: float) -> int:
    """Unix seconds → ns the way the importer does it: whole seconds and fraction apart,
    so the float's own precision is kept (``round(x * 1e9)`` would lose ~100 ns)."""
    whole = math.floor(seconds)
    return whole * 1_000_000_000 + round((seconds - whole) * 1e9)


def _report_with(incomplete: list[dict[str, Any]], errored: list[dict[str, Any]]) -> dict[str, Any]:
    doc = read_json(GUIDELLM_CONC8)
    bench = doc["benchmarks"][0]
    bench["requests"] = {
        "successful": bench["requests"]["successful"][:3],
        "incomplete": incomplete,
        "errored": errored,
        "total": None,
    }
    return doc


def _variant(status: str, **timings: Any) -> dict[str, Any]:
    record = copy.deepcopy(read_json(GUIDELLM_CONC8)["benchmarks"][0]["requests"]["successful"][0])
    record["request_id"] = record["info"]["request_id"] = f"{status}-1"
    record["info"]["status"] = status
    record["info"]["timings"].update(timings)
    return record


def test_guidellm_incomplete_request_keeps_partial_tokens(tmp_path: Path) -> None:
    base = _variant("cancelled")
    t = base["info"]["timings"]
    cancelled = _variant(
        "cancelled",
        request_end=None,
        last_token_iteration=t["first_token_iteration"] + 0.05,
        token_iterations=7,
    )
    cancelled["output_metrics"]["total_tokens"] = 7
    cancelled["output_tokens"] = 7
    path = write_json(
        tmp_path, "incomplete_with_partial_tokens.json", _report_with([cancelled], [])
    )
    result = guidellm.read(path)
    rows = result.events.filter(pl.col("request_id") == "cancelled-1")
    assert rows["event"].to_list() == ["arrival", "first_token", "cancellation"]
    end = rows.filter(pl.col("event") == "cancellation")
    assert end["output_tokens"].item() == 7
    assert end["ts"].item() == _ns(t["resolve_end"])  # no request_end: resolve_end
    assert rows["status"].unique().to_list() == ["cancelled"]
    assert any("incomplete (cancelled)" in w for w in result.warnings)
    assert_lifecycle_is_plausible(result.events)


def test_guidellm_errored_request_without_first_token(tmp_path: Path) -> None:
    errored = _variant(
        "errored",
        first_token_iteration=None,
        first_output_token_iteration=None,
        last_token_iteration=None,
        token_iterations=0,
    )
    errored["info"]["error"] = "HTTPStatusError: 500 Internal Server Error"
    errored["output_tokens"] = 0
    path = write_json(tmp_path, "errored_before_first_token.json", _report_with([], [errored]))
    rows = guidellm.read(path).events.filter(pl.col("request_id") == "errored-1")
    assert rows["event"].to_list() == ["arrival", "error"]  # errored, not cancelled
    assert rows["error"].str.contains("500").all()
    assert (rows["error_type"] == "HTTPStatusError: 500 Internal Server Error").all()
    assert rows.filter(pl.col("event") == "error")["output_tokens"].item() == 0


def test_guidellm_old_report_schema(tmp_path: Path) -> None:
    """GuideLLM before 0.4 kept start_time, first_token_time, last_token_time, end_time."""
    old = {
        "request_id": "a",
        "prompt_tokens": 5,
        "output_tokens": 3,
        "start_time": 100.0,
        "first_token_time": 100.25,
        "last_token_time": 100.5,
        "end_time": 100.75,
    }
    doc = {
        "benchmarks": [
            {"metrics": {}, "requests": {"successful": [old], "incomplete": [], "errored": []}}
        ]
    }
    events = guidellm.read(write_json(tmp_path, "old_schema.json", doc)).events
    assert events["event"].to_list() == ["arrival", "first_token", "completion"]
    assert events["ts"].to_list() == [100_000_000_000, 100_250_000_000, 100_750_000_000]
    assert events["last_token_ns"].unique().to_list() == [100_500_000_000]


# --------------------------------------------------------------------------------------
# Bad files
# --------------------------------------------------------------------------------------


def test_guidellm_missing_start_names_record_and_field(tmp_path: Path) -> None:
    broken = _variant("completed", request_start=None, resolve_start=None)
    doc = _report_with([], [])
    doc["benchmarks"][0]["requests"]["successful"].append(broken)
    with pytest.raises(InputError) as caught:
        guidellm.read(write_json(tmp_path, "no_start.json", doc))
    message = caught.value.message
    assert "no_start.json: benchmarks[0].requests.successful[3]" in message
    assert "info.timings.request_start" in message


def test_guidellm_text_time_names_the_field(tmp_path: Path) -> None:
    broken = _variant("completed", first_token_iteration="soon")
    doc = _report_with([], [])
    doc["benchmarks"][0]["requests"]["successful"].append(broken)
    with pytest.raises(InputError, match=r"successful\[3\].*first_token_iteration.*'soon'"):
        guidellm.read(write_json(tmp_path, "text_time.json", doc))
