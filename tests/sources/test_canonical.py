"""Reading traces: formats, paths, column mapping, units, aliases, and bad input."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from servetrace.analysis.dispatch import analyze_paths
from servetrace.errors import InputError, UsageError
from servetrace.sources.canonical import IngestOptions, read_events
from tests.conftest import MS

EDGE = Path(__file__).parent.parent / "data" / "edge"


def write_all_formats(frame: pl.DataFrame, folder: Path) -> dict[str, Path]:
    paths = {
        "parquet": folder / "t.parquet",
        "ipc": folder / "t.arrow",
        "csv": folder / "t.csv",
        "ndjson": folder / "t.jsonl",
    }
    frame.write_parquet(paths["parquet"])
    frame.write_ipc(paths["ipc"])
    frame.write_csv(paths["csv"])
    frame.write_ndjson(paths["ndjson"])
    return paths


@pytest.mark.parametrize("fmt", ["parquet", "ipc", "csv", "ndjson"])
def test_every_format_gives_the_same_answer(worked_example, tmp_path, fmt) -> None:
    path = write_all_formats(worked_example, tmp_path)[fmt]
    r = analyze_paths([str(path)]).requests.row(0, named=True)
    assert (r["queue_wait_ns"], r["ttft_ns"], r["response_ns"]) == (30 * MS, 80 * MS, 580 * MS)


def test_directory_glob_and_several_files_are_one_trace(worked_example, tmp_path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    # split one request across two parts: a request may span files
    worked_example.head(50).write_parquet(parts / "part-0.parquet")
    worked_example.tail(worked_example.height - 50).write_parquet(parts / "part-1.parquet")
    for inputs in (
        [str(parts)],
        [str(parts / "*.parquet")],
        [str(parts / "part-0.parquet"), str(parts / "part-1.parquet")],
    ):
        analysis = analyze_paths(inputs)
        assert analysis.summary.accounting.rows == worked_example.height
        assert analysis.requests["ttft_ns"].to_list() == [80 * MS]


def test_hive_partitioned_directory(worked_example, tmp_path) -> None:
    (tmp_path / "day=1").mkdir()
    worked_example.write_parquet(tmp_path / "day=1" / "data.parquet")
    assert analyze_paths([str(tmp_path)]).summary.outcomes["completed"] == 1


def test_column_mapping_time_unit_and_aliases() -> None:
    options = IngestOptions(
        columns={"request_id": "req", "event": "kind", "ts": "time_ms"}, time_unit="ms"
    )
    r = analyze_paths([str(EDGE / "aliases_and_units.csv")], options).requests.row(0, named=True)
    assert (r["queue_wait_ns"], r["ttft_ns"], r["decode_ns"]) == (30 * MS, 80 * MS, 5 * MS)


def test_event_map_adds_names() -> None:
    options = IngestOptions(event_map={"teleport": "admission"})
    analysis = analyze_paths([str(EDGE / "unknown_event.csv")], options)
    assert analysis.summary.accounting.requests_invalid == 0


def test_float_timestamps_are_seconds_and_datetimes_are_exact(tmp_path) -> None:
    seconds = pl.DataFrame(
        {
            "request_id": ["a"] * 3,
            "event": ["arrival", "first_token", "completion"],
            "ts": [1.0, 1.25, 1.5],
        }
    )
    r = analyze_paths([_write(seconds, tmp_path / "s.parquet")]).requests.row(0, named=True)
    assert r["ttft_ns"] == 250 * MS
    stamps = seconds.with_columns(
        pl.Series(
            "ts",
            [
                "2023-11-16 18:15:46.6805900",
                "2023-11-16 18:15:46.6805901",
                "2023-11-16 18:15:46.6805903",
            ],
        ).str.to_datetime(time_unit="ns")
    )
    r = analyze_paths([_write(stamps, tmp_path / "d.parquet")]).requests.row(0, named=True)
    assert (r["ttft_ns"], r["e2e_ns"]) == (100, 300)  # 100 ns ticks, not float-rounded


def test_implausible_span_warns_about_time_unit(tmp_path) -> None:
    # milliseconds read as nanoseconds: everything happens within a microsecond
    frame = pl.DataFrame(
        {
            "request_id": ["a", "a", "b", "b"],
            "event": ["arrival", "completion"] * 2,
            "ts": [0, 80, 5, 90],
        }
    )
    frame = pl.concat(
        [
            frame,
            pl.DataFrame({"request_id": ["a", "b"], "event": ["first_token"] * 2, "ts": [40, 50]}),
        ]
    )
    analysis = analyze_paths([_write(frame, tmp_path / "t.parquet")])
    assert any("--time-unit" in w for w in analysis.summary.warnings)


def _write(frame: pl.DataFrame, path: Path) -> str:
    frame.write_parquet(path)
    return str(path)


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("empty.csv", "file is empty"),
        ("header_only.csv", "no event rows"),
        ("missing_columns.csv", "missing required columns 'request_id', 'event', 'ts'"),
        ("unknown_event.csv", "unknown event name 'teleport'"),
        ("text_in_ts.csv", "holds text that is not a time (e.g. 'soon')"),
        ("corrupt.parquet", "cannot read as parquet"),
        ("broken_line.jsonl", "line 3 is not valid JSON"),
        ("no_trace_dir", "directory holds no trace file"),
        ("duplicate_header.csv", "the header names 'ts' more than once"),
        ("does_not_exist.csv", "no such file or directory"),
    ],
)
def test_bad_input_is_one_clear_error_naming_the_file(case: str, needle: str) -> None:
    with pytest.raises(InputError) as caught:
        analyze_paths([str(EDGE / case)])
    assert needle in caught.value.message
    assert case in caught.value.message


def test_missing_columns_hint_names_the_flag() -> None:
    with pytest.raises(InputError) as caught:
        read_events([str(EDGE / "missing_columns.csv")])
    assert "--column ts=NAME" in (caught.value.hint or "")
    assert "found: req, kind, time" in caught.value.message


def test_bad_mapping_syntax_is_a_usage_error() -> None:
    from servetrace.sources.canonical import parse_mapping

    with pytest.raises(UsageError):
        parse_mapping(["ts"], "--column")


def test_epoch_milliseconds_read_as_nanoseconds_are_flagged(tmp_path) -> None:
    start = 1_700_000_000_000  # 2023-11-14 in ms
    frame = pl.DataFrame(
        {
            "request_id": ["a", "a", "a"],
            "event": ["arrival", "first_token", "completion"],
            "ts": [start, start + 80, start + 580],
        }
    )
    warnings = analyze_paths([_write(frame, tmp_path / "ms.parquet")]).summary.warnings
    assert any("epoch ms" in w and "--time-unit" in w for w in warnings)
    from servetrace.sources.canonical import IngestOptions

    fixed = analyze_paths([str(tmp_path / "ms.parquet")], IngestOptions(time_unit="ms"))
    assert not any("--time-unit" in w for w in fixed.summary.warnings)
    assert fixed.requests["ttft_ns"].to_list() == [80 * MS]
