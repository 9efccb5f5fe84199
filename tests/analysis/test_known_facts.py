"""The whole-trace facts from ingest (``sources.footer_facts``) equal the scan's
(``lifecycle.trace_facts``), and the scan runs whenever ingest cannot know them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from servetrace.analysis.known_facts import whole_trace_facts
from servetrace.analysis.lifecycle import trace_facts
from servetrace.sources.canonical import IngestOptions, read_events
from tests.conftest import events, make_request
from tests.factories import synthetic_events


@pytest.fixture(autouse=True)
def _footers_of_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """These files are tiny: let ingest read their footers as it does a large file's."""
    monkeypatch.setattr("servetrace.sources.canonical.FOOTER_MIN_BYTES", 0)


def _scan(paths: list[Path], options: IngestOptions | None = None) -> object:
    return trace_facts(read_events([str(p) for p in paths], options).events)


def _parts(frame: pl.DataFrame, folder: Path, parts: int = 3) -> list[Path]:
    ordered = frame.sort("ts", maintain_order=True)
    size = -(-ordered.height // parts)
    out = []
    for i in range(parts):
        path = folder / f"part-{i}.parquet"
        ordered.slice(i * size, size).write_parquet(path, row_group_size=50)
        out.append(path)
    return out


def test_facts_of_a_parquet_trace_come_from_ingest_and_equal_the_scan(tmp_path: Path) -> None:
    paths = _parts(synthetic_events(120), tmp_path)
    trace = read_events([str(p) for p in paths])
    assert trace.known_facts() is not None
    assert whole_trace_facts(trace) == _scan(paths)
    assert whole_trace_facts(trace).has_admissions


def test_releases_and_the_span_over_parts(tmp_path: Path) -> None:
    frame = events(
        make_request("a", arrival=5, admission=6, first=7, complete=8, release=9),
        make_request("b", arrival=1, admission=2, first=3, complete=40, release=41),
    )
    paths = _parts(frame, tmp_path, parts=2)
    facts = whole_trace_facts(read_events([str(p) for p in paths]))
    assert facts == _scan(paths)
    assert (facts.has_releases, facts.start_ns, facts.end_ns) == (True, 1_000_000, 41_000_000)


def test_time_unit_and_event_aliases(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "request_id": [1, 1, 1, 1],
            "event": ["enqueue", "schedule", "first_token", "finish"],
            "ts": [3, 4, 5, 6],
        }
    )
    path = tmp_path / "t.parquet"
    frame.write_parquet(path)
    options = IngestOptions(
        time_unit="ms",
        event_map={"enqueue": "arrival", "finish": "completion", "schedule": "admission"},
    )
    trace = read_events([str(path)], options)
    assert trace.known_facts() is not None
    facts = whole_trace_facts(trace)
    assert facts == _scan([path], options)
    assert (facts.start_ns, facts.end_ns, facts.has_admissions) == (3_000_000, 6_000_000, True)


@pytest.mark.parametrize("column", ["request_id", "event", "ts"])
def test_a_row_of_no_request_sends_the_trace_to_the_scan(tmp_path: Path, column: str) -> None:
    frame = events(
        make_request("a", arrival=5, admission=6, first=7, complete=8),
        make_request("b", arrival=1, first=3, complete=9),
    ).with_columns(
        # the earliest and the last row lose a column: the span must not count them
        pl.when(pl.col("ts").is_in([1_000_000, 9_000_000]))
        .then(None)
        .otherwise(pl.col(column))
        .alias(column)
    )
    path = tmp_path / "t.parquet"
    frame.write_parquet(path)
    trace = read_events([str(path)])
    assert trace.known_facts() is None
    assert whole_trace_facts(trace) == _scan([path])


def test_float_ids_go_to_the_scan(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {
            "request_id": [1.0, 1.0, float("nan")],
            "event": ["arrival", "completion", "arrival"],
            "ts": [1, 2, 0],
        }
    )
    path = tmp_path / "t.parquet"
    frame.write_parquet(path)
    trace = read_events([str(path)])
    assert trace.known_facts() is None
    assert whole_trace_facts(trace).start_ns == 1  # the NaN id's row belongs to no request


def test_other_formats_and_replaced_events_go_to_the_scan(tmp_path: Path) -> None:
    frame = synthetic_events(10)
    csv = tmp_path / "t.csv"
    frame.write_csv(csv)
    assert read_events([str(csv)]).known_facts() is None
    parquet = tmp_path / "t.parquet"
    frame.write_parquet(parquet)
    trace = read_events([str(parquet)])
    later = replace(trace, events=trace.events.filter(pl.col("ts") > frame["ts"].min()))
    assert later.known_facts() is None
    assert whole_trace_facts(later) == trace_facts(later.events)
    assert whole_trace_facts(later) != whole_trace_facts(trace)


def test_a_trace_loaded_in_memory_has_no_ingest_facts(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    synthetic_events(10).write_parquet(path)
    assert read_events([str(path)], load_below=10**9).known_facts() is None


def _report(analysis: object) -> dict:
    import json

    from servetrace.render.summary import render_json, report_dict

    return json.loads(render_json(report_dict(analysis.summary, ())))  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", ["batched", "partitioned"])
def test_engines_on_ingest_facts_answer_as_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """A trace in parts whose facts come from ingest, read in many batches with kept rows
    spilled in many chunks: the report and every per-request row as in memory."""
    from servetrace.analysis.dispatch import analyze_paths
    from servetrace.analysis.partitioned import analyze_partitioned
    from servetrace.analysis.stream_state import Retained
    from servetrace.analysis.streaming import analyze_streaming

    frame = synthetic_events(1_500, cancelled=90, mean_output=6)
    released = frame.filter(pl.col("event").is_in(["completion", "cancellation"])).with_columns(
        pl.lit("release").alias("event"), pl.col("ts") + 1
    )
    paths = _parts(pl.concat([frame, released]), tmp_path, parts=4)
    whole = analyze_paths([str(p) for p in paths], streaming=False)
    monkeypatch.setattr(Retained, "COMPACT_EVERY", 3)
    trace = read_events([str(p) for p in paths])
    assert trace.known_facts() is not None
    if engine == "batched":
        streamed = analyze_streaming(trace, batch_rows=400)
    else:
        streamed = analyze_partitioned(trace, batch_rows=400, partitions=3)
    assert streamed.summary.leaked_state == whole.summary.leaked_state
    assert streamed.requests.equals(whole.requests)
    assert _report(streamed) == _report(whole)
