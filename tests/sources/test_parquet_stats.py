"""The ingest range checks answered from a Parquet footer (``sources.parquet_stats``) give
the verdicts of the row checks, and a footer that cannot answer falls back to the rows."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from servetrace.errors import InputError
from servetrace.schema import MAX_ABS_NS, MAX_COUNT
from servetrace.sources import normalise as normalise_module
from servetrace.sources import prescan as prescan_module
from servetrace.sources.canonical import IngestOptions, footer_ranges, read_events
from servetrace.sources.parquet_stats import (
    IntegerRange,
    integer_ranges,
    scaled_within,
    strictly_within,
)
from servetrace.sources.prescan import decoded_ranges


@pytest.fixture(autouse=True)
def _footers_of_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """These files are tiny: let ingest read their footers as it does a large file's."""
    monkeypatch.setattr("servetrace.sources.canonical.FOOTER_MIN_BYTES", 0)


def _trace(ts: list[int | None], tokens: list[int | None]) -> pa.Table:
    n = len(ts)
    events = ["arrival", "first_token", *["token"] * (n - 3), "completion"][:n]
    return pa.table(
        {
            "request_id": pa.array([1] * n, pa.int64()),
            "event": pa.array(events, pa.string()),
            "ts": pa.array(ts, pa.int64()),
            "tokens": pa.array(tokens, pa.int64()),
        }
    )


def _write(table: pa.Table, path: Path, **options: object) -> Path:
    pq.write_table(table, path, row_group_size=2, **options)  # type: ignore[arg-type]
    return path


def test_ranges_span_every_row_group(tmp_path: Path) -> None:
    path = _write(_trace([5, 9, 2, 40, 7], [None, 1, 3, None, None]), tmp_path / "t.parquet")
    found = integer_ranges(path, {"ts": "ts", "tokens": "tokens", "event": "event"})
    # event is text: its statistics are not an integer range
    assert found == {"ts": IntegerRange(2, 40, 0), "tokens": IntegerRange(1, 3, 3)}


def test_mapped_column_names_are_read_under_the_file_name(tmp_path: Path) -> None:
    table = _trace([5, 9, 2], [None, 1, None]).rename_columns(["rid", "kind", "time_ns", "n"])
    path = _write(table, tmp_path / "t.parquet")
    options = IngestOptions(columns={"request_id": "rid", "event": "kind", "ts": "time_ns"})
    assert footer_ranges(path, options) == {"ts": IntegerRange(2, 9, 0)}


def test_no_statistics_answers_nothing(tmp_path: Path) -> None:
    table = _trace([5, 9, 2], [None, 1, None])
    path = _write(table, tmp_path / "t.parquet", write_statistics=False)
    assert integer_ranges(path, {"ts": "ts", "tokens": "tokens"}) == {}


def test_a_file_that_is_not_parquet_answers_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("request_id,event,ts\n1,arrival,0\n")
    assert footer_ranges(path, IngestOptions()) == {}
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    assert integer_ranges(broken, {"ts": "ts"}) == {}


def test_all_null_column_is_in_range() -> None:
    assert strictly_within(IntegerRange(None, None, 7), MAX_COUNT)
    assert scaled_within(IntegerRange(None, None, 7), 1, MAX_ABS_NS)


@pytest.mark.parametrize(
    ("low", "high", "ok"),
    [
        (-(2**62) + 1, 2**62 - 1, False),  # 2^62 - 1 rounds to 2^62 as a double, as in Polars
        (-(2**61), 2**61, True),
        (0, 2**62, False),
        (-(2**62), 0, False),
    ],
)
def test_time_range_edges_agree_with_the_row_check(low: int, high: int, ok: bool) -> None:
    assert scaled_within(IntegerRange(low, high, 0), 1, MAX_ABS_NS) is ok
    ns = pl.Series([low, high]).cast(pl.Float64)
    assert (not bool((ns.abs() >= MAX_ABS_NS).any())) is ok


def test_count_edges() -> None:
    assert strictly_within(IntegerRange(-MAX_COUNT + 1, MAX_COUNT - 1, 0), MAX_COUNT)
    assert not strictly_within(IntegerRange(0, MAX_COUNT, 0), MAX_COUNT)
    assert not strictly_within(IntegerRange(-MAX_COUNT, 0, 0), MAX_COUNT)


def _row_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the range checks that read rows (instead of trusting the footer)."""
    seen: list[str] = []
    original = prescan_module.out_of_range

    def spy(ns: pl.Expr) -> pl.Expr:
        seen.append("ts")
        return original(ns)

    # Both the one-pass prescan and the check on its own build the expression.
    monkeypatch.setattr(prescan_module, "out_of_range", spy)
    monkeypatch.setattr(normalise_module, "out_of_range", spy)
    return seen


def test_a_clean_file_reads_no_row_for_the_range_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _row_checks(monkeypatch)
    path = _write(_trace([1, 2, 3, 4], [None, 1, 2, None]), tmp_path / "t.parquet")
    frame = read_events([str(path)]).events.collect()
    assert frame["ts"].to_list() == [1, 2, 3, 4]
    assert seen == []


def test_without_statistics_the_rows_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _row_checks(monkeypatch)
    table = _trace([1, 2, 3, 4], [None, 1, 2, None])
    path = _write(table, tmp_path / "t.parquet", write_statistics=False)
    assert read_events([str(path)]).events.collect()["ts"].to_list() == [1, 2, 3, 4]
    assert "ts" in seen


def test_an_out_of_range_time_is_still_named_by_row(tmp_path: Path) -> None:
    path = _write(_trace([1, 2, 2**62, 4], [None, 1, 2, None]), tmp_path / "t.parquet")
    with pytest.raises(InputError, match=r"row 3: column 'ts'"):
        read_events([str(path)])


def test_time_unit_scales_the_footer_range(tmp_path: Path) -> None:
    # 5e9 s is within int range but beyond ±2^62 ns once converted
    path = _write(_trace([1, 2, 5_000_000_000, 4], [None, 1, 2, None]), tmp_path / "t.parquet")
    with pytest.raises(InputError, match=r"row 3: column 'ts'"):
        read_events([str(path)], IngestOptions(time_unit="s"))
    assert read_events([str(path)]).events.collect()["ts"].max() == 5_000_000_000


def test_an_out_of_range_count_is_still_named_by_row(tmp_path: Path) -> None:
    path = _write(_trace([1, 2, 3, 4], [None, 1, MAX_COUNT, None]), tmp_path / "t.parquet")
    with pytest.raises(InputError, match=r"row 3: column 'tokens'"):
        read_events([str(path)])


def test_small_files_and_loaded_traces_skip_the_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start-up: no pyarrow footer read below FOOTER_MIN_BYTES or for a decoded trace."""
    path = _write(_trace([1, 2, 3, 4], [None, 1, 2, None]), tmp_path / "t.parquet")
    assert footer_ranges(path, IngestOptions()) != {}
    monkeypatch.setattr("servetrace.sources.canonical.FOOTER_MIN_BYTES", 10**9)
    assert footer_ranges(path, IngestOptions()) == {}
    monkeypatch.setattr("servetrace.sources.canonical.FOOTER_MIN_BYTES", 0)
    seen = _row_checks(monkeypatch)
    loaded = read_events([str(path)], load_below=10**9)
    assert loaded.loaded and loaded.known_facts() is None
    assert seen == []  # answered by the decoded column's own range, not row by row


@pytest.mark.parametrize(
    ("times", "unit", "row"),
    [([1, 2, 2**62, 4], None, 3), ([-(2**62), 2, 3, 4], None, 1), ([1, 5_000_000_000, 3], "s", 2)],
)
def test_a_loaded_trace_checks_times_by_its_range_and_names_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: list[int], unit: str | None, row: int
) -> None:
    seen = _row_checks(monkeypatch)
    ok = _write(_trace([1, 2, 2**61, 4], [None, 1, 2, None]), tmp_path / "ok.parquet")
    assert read_events([str(ok)], load_below=10**9).events.collect()["ts"].max() == 2**61
    assert seen == []
    tokens = [None, *[1] * (len(times) - 1)]
    path = _write(_trace(times, tokens), tmp_path / "t.parquet")
    with pytest.raises(InputError, match=rf"row {row}: column 'ts'"):
        read_events([str(path)], IngestOptions(time_unit=unit), load_below=10**9)


def test_a_decoded_time_column_states_its_range_as_a_footer_would() -> None:
    frame = pl.DataFrame({"time_ns": [5, None, -3, 2], "ts": [0.5, 1.0, 2.0, 3.0]})
    mapped = IngestOptions(columns={"ts": "time_ns"})
    assert decoded_ranges(frame, mapped) == {"ts": IntegerRange(-3, 5, 1)}
    # Float times (seconds) are checked row by row after conversion; no column, no range.
    assert decoded_ranges(frame, IngestOptions()) == {}
    assert decoded_ranges(frame.drop("ts"), IngestOptions()) == {}


def test_a_loaded_trace_reads_its_mapped_time_column_by_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _row_checks(monkeypatch)
    table = _trace([1, 2, 3, 4], [None, 1, 2, None]).rename_columns(["rid", "kind", "t", "tokens"])
    path = _write(table, tmp_path / "t.parquet")
    options = IngestOptions(columns={"request_id": "rid", "event": "kind", "ts": "t"})
    assert read_events([str(path)], options, load_below=10**9).events.collect()["ts"].max() == 4
    assert seen == []
