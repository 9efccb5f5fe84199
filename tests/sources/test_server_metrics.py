"""Each server-metrics reader on a file in its source's format, into the canonical frame;
counters, resets and histogram deltas by hand; bad input is one named error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from servetrace.errors import InputError
from servetrace.sources.server_metrics import detect, read
from servetrace.sources.server_metrics.series import (
    counter_deltas,
    gauge_at,
    histogram_deltas,
    total_deltas,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "server_metrics"
MS = 1_000_000
LABELS = '{"engine":"0","model_name":"m"}'


def test_prometheus_text_with_millisecond_timestamps() -> None:
    m = read(DATA / "scrapes.prom")
    assert detect(DATA / "scrapes.prom") == "prometheus"
    waiting = m.filter(family="vllm:num_requests_waiting")
    assert waiting["ts"].to_list() == [1000 * MS, 2000 * MS, 3000 * MS]
    assert waiting["value"].to_list() == [2.0, 5.0, 1.0]
    assert set(waiting["kind"]) == {"gauge"} and waiting["labels"][0] == LABELS
    # the counter keeps its exposed name; the histogram's buckets its base name, le as float
    assert m.filter(family="vllm:request_success_total")["kind"][0] == "counter"
    buckets = m.filter(family="vllm:time_to_first_token_seconds")
    assert sorted(set(buckets["le"].to_list())) == [0.1, 1.0, float("inf")]
    assert m.filter(family="vllm:time_to_first_token_seconds_sum")["value"].to_list() == [
        2.5,
        7.0,
    ]


def test_counter_reset_is_the_new_value() -> None:
    m = read(DATA / "scrapes.prom")
    d = counter_deltas(m, "vllm:request_success_total")
    # 5 → 8 → 2: +3, then a reset (the server restarted and counted 2 since)
    assert d["delta"].to_list() == [3.0, 2.0]
    assert d["reset"].to_list() == [False, True]
    assert d["rate_per_s"].to_list() == [3.0, 2.0]
    edges = np.array([1000, 2000, 3000]) * MS
    assert total_deltas(d, edges).tolist() == [3.0, 2.0]


def test_histogram_bucket_deltas_and_changed_buckets(tmp_path: Path) -> None:
    m = read(DATA / "scrapes.prom")
    d = histogram_deltas(m, "vllm:time_to_first_token_seconds", "x").sort("le")
    assert d["le"].to_list() == [0.1, 1.0, float("inf")]
    assert d["delta"].to_list() == [1.0, 3.0, 5.0]
    changed = (DATA / "scrapes.prom").read_text().replace('le="1.0"} 6.0', 'le="2.0"} 6.0')
    bad = tmp_path / "bad.prom"
    bad.write_text(changed)
    with pytest.raises(InputError, match="buckets change between scrapes"):
        histogram_deltas(read(bad), "vllm:time_to_first_token_seconds", str(bad))


def test_folder_of_scrapes_named_by_time() -> None:
    m = read(DATA / "scrape_folder")
    running = m.filter(family="vllm:num_requests_running")
    assert running["ts"].to_list() == [1733238000000 * MS, 1733238000500 * MS]
    d = counter_deltas(m, "vllm:prompt_tokens_total")
    assert d["delta"].to_list() == [250.0] and d["rate_per_s"].to_list() == [500.0]


def test_query_range_json_types_by_name() -> None:
    path = DATA / "query_range.json"
    assert detect(path) == "query_range"
    m = read(path)
    kinds = dict(m.select("family", "kind").unique().iter_rows())
    assert kinds == {
        "vllm:num_requests_running": "gauge",
        "vllm:generation_tokens_total": "counter",
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:time_to_first_token_seconds_count": "histogram",
    }
    assert counter_deltas(m, "vllm:generation_tokens_total")["rate_per_s"].to_list() == [40.0]
    inf = m.filter(family="vllm:time_to_first_token_seconds", le=float("inf"))
    assert inf["value"].to_list() == [12.0, 20.0]
    assert inf["labels"][0] == '{"instance":"a:8000"}'


def test_aiperf_export_carries_deduplicated_values_forward() -> None:
    path = DATA / "aiperf"
    assert detect(path) == "aiperf"
    m = read(path)
    t0 = 1_700_000_000_000_000_000
    # 4 held from the first record to its last duplicate (t0 + 300 ms), then 1
    at = np.array([t0, t0 + 150 * MS, t0 + 300 * MS, t0 + 350 * MS, t0 + 400 * MS])
    got = gauge_at(m, "vllm:num_requests_waiting", at)
    assert got is not None and got.tolist() == [4.0, 4.0, 4.0, 4.0, 1.0]
    d = counter_deltas(m, "vllm:request_success_total")
    assert d["delta"].to_list() == [0.0, 2.0]
    h = histogram_deltas(m, "vllm:time_to_first_token_seconds", "x").filter(end_ns=t0 + 400 * MS)
    assert dict(zip(h["le"], h["delta"], strict=True)) == {
        0.001: 0.0,
        0.01: 2.0,
        0.1: 2.0,
        float("inf"): 3.0,
    }
    summary = m.filter(family="http_latency_seconds", ts=t0)
    assert summary["kind"][0] == "summary"
    assert sorted(json.loads(x)["quantile"] for x in summary["labels"]) == ["0.5", "0.99"]
    assert json.loads(summary["labels"][0])["endpoint"] == "http://localhost:8000/metrics"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.prom", "# TYPE x gauge\nx 1\n", "sample x has no timestamp"),
        ("b.prom", "x{ 1 2\n", "not Prometheus text exposition"),
        ("c.json", '{"status": "success", "data": {"resultType": "vector"}}', "not a Prometheus"),
        ("d.jsonl", '{"timestamp_ns": 1, "metrics": {"x": [{"vaule": 1}]}}\n', "line 1"),
    ],
)
def test_bad_input_is_one_named_error(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=message) as raised:
        read(path)
    assert str(path) in raised.value.message and "\n" not in raised.value.message


def test_a_scrape_folder_needs_times_in_the_names(tmp_path: Path) -> None:
    (tmp_path / "scrape.prom").write_text("# TYPE x gauge\nx 1\n")
    with pytest.raises(InputError, match="file name"):
        read(tmp_path)


def test_openmetrics_scrapes_with_float_second_timestamps() -> None:
    m = read(DATA / "openmetrics")
    running = m.filter(family="vllm:num_requests_running")
    # the first file's samples carry 1733238000.25 s; the second takes its file name's ms
    assert running["ts"].to_list() == [1733238000_250_000_000, 1733238001_250_000_000]
    d = counter_deltas(m, "vllm:num_preemptions_total")
    assert d["delta"].to_list() == [2.0] and d["rate_per_s"].to_list() == [2.0]
