"""Differential fuzzing of the server importers (vLLM OTLP spans, SGLang, TensorRT-LLM).

Random valid requests are written as each engine writes them; the imported event times
must equal a plain-Python reference conversion of the numbers in the written file (the
integer part and the fraction scaled apart, as ``times.checked_ns`` documents). Random
out-of-range or non-finite times, set in one field of one record, must give exit 3 with
one line naming that field, never exit 4 and never a silently wrapped time. Bounded by
the profiles of ``conftest.py``.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sources.registry import import_file
from tests.fuzz.conftest import FUZZ
from tests.sources.engine_writers import (
    Req,
    sglang_record,
    trtllm_item,
    vllm_span,
    write_otlp,
    write_trtllm,
)

runner = CliRunner()
S = 1_000_000_000
# A time this many seconds from the epoch (or a duration this long) is past 2^62 ns.
BEYOND_S = 4.62e9


@st.composite
def requests(draw: st.DrawFn) -> list[Req]:
    """A few completed requests, times in ms: arrival <= admission <= first <= last = end."""
    reqs = []
    for index in range(draw(st.integers(1, 4))):
        steps = draw(st.lists(st.floats(0, 5_000, allow_nan=False), min_size=4, max_size=4))
        arrival, admission, first, last = (sum(steps[: k + 1]) for k in range(4))
        reqs.append(Req(f"r{index}", arrival, admission, first, last, last, output=8))
    return reqs


def reference_ns(value: float, unit_ns: int, resolution_ns: int = 1) -> int:
    steps = unit_ns // resolution_ns
    whole = math.floor(value)
    return (whole * steps + round((value - whole) * steps)) * resolution_ns


def _times(events: pl.DataFrame) -> dict[tuple[str, str], int]:
    kept = events.filter(pl.col("event").is_in(["arrival", "first_token", "completion"]))
    return {(r, e): t for r, e, t in kept.select("request_id", "event", "ts").iter_rows()}


def _close(got: dict[tuple[str, str], int], want: dict[tuple[str, str], int], tol: int) -> None:
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    for key, value in want.items():
        # Polars and Python may round an exact half differently: one step apart at most.
        assert abs(got[key] - value) <= tol, (key, got[key], value)


def _attribute(span: dict[str, Any], name: str) -> float:
    (item,) = [a for a in span["attributes"] if a["key"] == name]
    return float(item["value"]["doubleValue"])


@FUZZ
@given(reqs=requests(), engine=st.sampled_from(["otlp", "sglang", "trtllm"]))
def test_valid_records_round_trip_to_the_reference_ns(reqs: list[Req], engine: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        want: dict[tuple[str, str], int] = {}
        if engine == "otlp":
            spans = [vllm_span(r, i) for i, r in enumerate(reqs)]
            path = write_otlp(Path(folder) / "spans.jsonl", spans)
            for r, span in zip(reqs, spans, strict=True):
                arrival = int(span["startTimeUnixNano"])
                ttft = _attribute(span, "gen_ai.latency.time_to_first_token")
                e2e = _attribute(span, "gen_ai.latency.e2e")
                want[(r.rid, "arrival")] = arrival
                want[(r.rid, "first_token")] = arrival + reference_ns(ttft, S)
                want[(r.rid, "completion")] = arrival + reference_ns(e2e, S)
            tolerance = 1
        elif engine == "sglang":
            records = [sglang_record(r) for r in reqs]
            path = Path(folder) / "sglang-request-metrics-20260302_10.log"
            path.write_text("".join(json.dumps(record) + "\n" for record in records))
            for r, record in zip(reqs, records, strict=True):
                want[(r.rid, "arrival")] = reference_ns(record["request_received_ts"], S)
                want[(r.rid, "first_token")] = reference_ns(record["prefill_finished_ts"], S)
                want[(r.rid, "completion")] = reference_ns(record["decode_finished_ts"], S)
            tolerance = 1
        else:
            items = [trtllm_item(r, i + 1) for i, r in enumerate(reqs)]
            path = write_trtllm(Path(folder) / "perf_metrics.json", [items])
            for i, item in enumerate(items):
                timing = item["perf_metrics"]["timing_metrics"]
                rid = str(i + 1)
                want[(rid, "arrival")] = reference_ns(timing["arrival_time"], S, 1_000)
                want[(rid, "first_token")] = reference_ns(timing["first_token_time"], S, 1_000)
                want[(rid, "completion")] = reference_ns(timing["last_token_time"], S, 1_000)
            tolerance = 1_000
        _close(_times(import_file(path).events), want, tolerance)


FIELDS = {
    "otlp": (
        "gen_ai.latency.time_in_model_decode",
        "gen_ai.latency.time_to_first_token",
        "gen_ai.latency.e2e",
        "gen_ai.latency.time_in_queue",
    ),
    "sglang": ("request_received_ts", "decode_finished_ts", "prefill_finished_ts", "queue_time"),
    "trtllm": ("arrival_time", "first_token_time", "last_token_time", "first_scheduled_time"),
}
OUT_OF_RANGE = st.one_of(
    st.floats(min_value=BEYOND_S, max_value=1e300),
    st.floats(min_value=-1e300, max_value=-BEYOND_S),
    st.sampled_from([math.inf, -math.inf, math.nan]),
)


@FUZZ
@given(
    reqs=requests(),
    engine=st.sampled_from(sorted(FIELDS)),
    which=st.integers(0, 3),
    victim=st.integers(0, 3),
    value=OUT_OF_RANGE,
)
def test_out_of_range_times_are_refused_with_exit_3(
    reqs: list[Req], engine: str, which: int, victim: int, value: float
) -> None:
    field = FIELDS[engine][which]
    victim %= len(reqs)
    with tempfile.TemporaryDirectory() as folder:
        if engine == "otlp":
            spans = [vllm_span(r, i) for i, r in enumerate(reqs)]
            for item in spans[victim]["attributes"]:
                if item["key"] == field:
                    item["value"] = {"doubleValue": value}
            path = write_otlp(Path(folder) / "spans.jsonl", spans)
        elif engine == "sglang":
            records = [sglang_record(r) for r in reqs]
            records[victim][field] = value
            path = Path(folder) / "sglang-request-metrics-20260302_10.log"
            path.write_text("".join(json.dumps(record) + "\n" for record in records))
        else:
            items = [trtllm_item(r, i + 1) for i, r in enumerate(reqs)]
            items[victim]["perf_metrics"]["timing_metrics"][field] = value
            path = write_trtllm(Path(folder) / "perf_metrics.json", [items])
        result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 3, (engine, field, value, result.exit_code, result.output)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and field in errors[0] and str(path) in errors[0], errors
