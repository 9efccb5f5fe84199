"""Shared helpers for the importer tests.

- ``DATA``: the copied real files (``tests/data/real``, ``tests/data/peers``; each folder
  has a ``PROVENANCE.md``). The tests never read the shared data folder.
- ``per_request(events)`` / ``pooled_gaps(events)``: servetrace's definitions (DESIGN §4)
  computed straight from an imported events frame with Polars, independently of
  ``servetrace.analysis.memory``: the reference every agreement test compares with the tool.
- ``stats(values)``: mean, population std, min, max and numpy-linear percentiles.
- ``write_json`` / ``write_jsonl``: small edge-case files, named after their case.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

DATA = Path(__file__).resolve().parent.parent / "data"
REAL = DATA / "real"
PEERS = DATA / "peers"

AIPERF_RUN1 = REAL / "aiperf-gpt-oss-20b-run1" / "profile_export.jsonl.gz"
AIPERF_CONC8 = PEERS / "aiperf_s1_conc8" / "profile_export.jsonl.gz"
AIPERF_CANCEL20 = PEERS / "aiperf_s1_cancel20" / "profile_export.jsonl.gz"
GENAI_PERF_CONC8 = PEERS / "genai_perf_s1_conc8" / "profile_export.json.gz"
GUIDELLM_CONC8 = PEERS / "guidellm_s1_conc8" / "benchmarks.json.gz"
VLLM_LLAMA_QPS4 = (
    REAL
    / "vllm-bench-llama33-70b-a100"
    / "01_tp8_pp1"
    / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_04.json.gz"
)
VLLM_DEEPSEEK_INF = (
    REAL
    / "vllm-bench-deepseek-v25-a100"
    / "01_tp8_pp2_no_ib"
    / "serving_deepseek-ai-DeepSeek-V2.5_tp8_pp2_sharegpt_qps_inf.json.gz"
)
LLMPERF = REAL / "llmperf-leaderboard" / "individual"

TICKS = ("first_token", "token")
TERMINALS = ("completion", "cancellation", "error")
MS = 1e6


def per_request(events: pl.DataFrame) -> pl.DataFrame:
    """One row per request: arrival, first/last tick, terminal, counts — from the events.

    ``last_ns`` is the last tick, or ``last_token_ns`` when the trace is request-level and
    carries it, else the completion (DESIGN §4 with the importers' conventions).
    """
    arrivals = events.filter(pl.col("event") == "arrival").select(
        "request_id", arrival_ns="ts", prompt_tokens="prompt_tokens"
    )
    ticks = (
        events.filter(pl.col("event").is_in(TICKS))
        .group_by("request_id")
        .agg(
            first_ns=pl.col("ts").min(),
            last_tick_ns=pl.col("ts").max(),
            ticks=pl.len(),
            tokens_sum=pl.col("tokens").sum(),
        )
    )
    terminals = events.filter(pl.col("event").is_in(TERMINALS)).select(
        "request_id", terminal="event", terminal_ns="ts", reported="output_tokens"
    )
    frame = arrivals.join(ticks, on="request_id", how="left").join(
        terminals, on="request_id", how="left"
    )
    request_level = "ticks_available" in events.columns and not events["ticks_available"].any()
    if request_level:
        last_token = (
            events.group_by("request_id").agg(pl.col("last_token_ns").first())
            if "last_token_ns" in events.columns
            else frame.select("request_id", last_token_ns=pl.lit(None, dtype=pl.Int64))
        )
        frame = frame.join(last_token, on="request_id", how="left").with_columns(
            last_ns=pl.coalesce("last_token_ns", "terminal_ns")
        )
    else:
        frame = frame.with_columns(last_ns=pl.col("last_tick_ns"))
    n = pl.coalesce("reported", "tokens_sum")
    return frame.with_columns(
        output_tokens=n,
        ttft_ns=pl.col("first_ns") - pl.col("arrival_ns"),
        response_ns=pl.col("last_ns") - pl.col("arrival_ns"),
        e2e_ns=pl.col("terminal_ns") - pl.col("arrival_ns"),
        decode_ns=pl.col("last_ns") - pl.col("first_ns"),
        tpot_ns=pl.when(n >= 2).then(
            (pl.col("last_ns") - pl.col("first_ns")).cast(pl.Float64) / (n - 1)
        ),
    )


def completed(events: pl.DataFrame) -> pl.DataFrame:
    return per_request(events).filter(pl.col("terminal") == "completion")


def pooled_gaps(events: pl.DataFrame) -> np.ndarray:
    """Every gap between consecutive ticks of completed requests (ns), pooled."""
    done = completed(events).select("request_id")
    gaps = (
        events.filter(pl.col("event").is_in(TICKS))
        .join(done, on="request_id")
        .sort("request_id", "ts")
        .select(gap=pl.col("ts").diff().over("request_id"))
        .drop_nulls()
    )
    return gaps["gap"].to_numpy()


def stats(values: Iterable[float] | np.ndarray | pl.Series) -> dict[str, float]:
    """mean, population std, min, max and numpy-linear percentiles of ``values``."""
    v = np.asarray(values, dtype=float)
    out = {"mean": v.mean(), "std": v.std(), "min": v.min(), "max": v.max(), "median": np.median(v)}
    for q in (1, 5, 10, 25, 50, 75, 90, 95, 99):
        out[f"p{q}"] = float(np.percentile(v, q))
    return out


def max_difference(ours: dict[str, float], theirs: dict[str, Any], keys: dict[str, str]) -> float:
    """Largest |ours[k] - theirs[their_k]| over ``keys`` (ours → theirs), ignoring absent."""
    diffs = [
        abs(ours[mine] - float(theirs[their]))
        for mine, their in keys.items()
        if theirs.get(their) is not None
    ]
    assert diffs, "nothing to compare"
    return max(diffs)


def write_json(tmp_path: Path, name: str, obj: Any, *, compress: bool = False) -> Path:
    text = json.dumps(obj)
    path = tmp_path / (name + (".gz" if compress else ""))
    if compress:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def write_jsonl(tmp_path: Path, name: str, records: Iterable[Any]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_json(path: Path) -> Any:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
        return json.load(handle)


def analyze_or_skip(events: pl.DataFrame) -> Any:
    """The lead's pipeline on these events, or a skip when it is not there yet."""
    pipeline = pytest.importorskip("servetrace.analysis.memory")
    analyze = getattr(pipeline, "analyze_events", None)
    if analyze is None:
        pytest.skip("servetrace.analysis.memory.analyze_events is not available yet")
    return analyze(events)


def assert_lifecycle_is_plausible(events: pl.DataFrame) -> None:
    """No fabricated events: the invariants every import must satisfy."""
    kinds = set(events["event"].unique().to_list())
    terminals = {"completion", "cancellation", "error"}
    assert kinds <= {"arrival", "first_token", "token", *terminals}, kinds
    assert "admission" not in kinds
    assert events["source"].unique().to_list() == ["client"]
    per = events.group_by("request_id").agg(
        arrivals=(pl.col("event") == "arrival").sum(),
        firsts=(pl.col("event") == "first_token").sum(),
        terminals=pl.col("event").is_in(TERMINALS).sum(),
        tokens_before_first=(
            (pl.col("event") == "token")
            & (pl.col("ts") < pl.col("ts").filter(pl.col("event") == "first_token").min())
        ).sum(),
        ordered=pl.col("ts").diff().fill_null(0).min() >= 0,
    )
    assert (per["arrivals"] == 1).all()
    assert (per["firsts"] <= 1).all()
    assert (per["terminals"] <= 1).all()
    assert (per["tokens_before_first"] == 0).all()
    assert per["ordered"].all(), "events of a request must come in non-decreasing time"
    ticks = events.filter(pl.col("event").is_in(TICKS))
    assert (ticks["tokens"] == 1).all()
    assert events.filter(~pl.col("event").is_in(TICKS))["tokens"].null_count() == (
        events.height - ticks.height
    )
    assert events.schema["ts"] == pl.Int64
    assert events.columns[:6] == [
        "request_id",
        "event",
        "ts",
        "tokens",
        "prompt_tokens",
        "output_tokens",
    ]
