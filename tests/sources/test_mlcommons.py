"""MLCommons endpoints event databases: both schemas, errored samples, every chunk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

from servetrace.errors import ExitCode, InputError
from servetrace.sources.registry import detect_format, engine_inputs, import_file

from .engine_writers import (
    MONOTONIC_NS,
    assert_same_requests,
    canonical,
    request_metrics,
    sample_requests,
    write_mlcommons,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "engines" / "mlcommons"
CLIENT_METRICS = ("ttft_ns", "decode_ns", "e2e_ns", "tpot_ns", "itl_mean_ns", "itl_max_ns")


@pytest.mark.parametrize("schema", ["current", "removed"])
def test_round_trip_every_chunk(tmp_path: Path, schema: str) -> None:
    reqs = sample_requests()
    path = write_mlcommons(tmp_path / "events.db", reqs, schema=schema)
    assert detect_format(path) == "mlcommons"
    result = import_file(path)
    assert not result.request_level  # every chunk: ITL is available
    assert result.events["source"].unique().to_list() == ["client"]
    truth = canonical(reqs, MONOTONIC_NS, admissions=False)
    # Integer ns in, integer ns out: exact. Ticks are evenly spaced ms floats → ±1 ns.
    assert_same_requests(result.events, truth, CLIENT_METRICS, tolerance_ns=1)
    got = request_metrics(result.events)
    r4 = got.filter(pl.col("request_id") == "r4").row(0, named=True)
    # a failed sample is errored, not cancelled; r3 (CancelledError) is cancelled
    assert r4["outcome"] == "errored"
    assert got.filter(pl.col("request_id") == "r3")["outcome"].item() == "cancelled"
    assert r4["error_type"] == "aiohttp.ClientResponseError"
    assert r4["error"] == "aiohttp.ClientResponseError: 500 Internal Server Error"
    assert r4["e2e_ns"] == round((361.0 - 35.125) * 1e6)
    assert got["queue_wait_ns"].null_count() == got.height


def test_itl_of_one_request_by_hand(tmp_path: Path) -> None:
    """Issued at 0, chunks at 50, 60, 75 ms, complete at 76: TTFT 50, ITL 10 and 15,
    TPOT 25/2 = 12.5 ms, e2e 76."""
    path = tmp_path / "events.db"
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, sample_uuid VARCHAR, event_type "
        "VARCHAR, timestamp_ns BIGINT, conversation_id VARCHAR, turn INTEGER, data BLOB)"
    )
    ms = 1_000_000
    rows = [
        ("s", "sample.issued", 0),
        ("s", "sample.recv_first", 50 * ms),
        ("s", "sample.recv_non_first", 60 * ms),
        ("s", "sample.recv_non_first", 75 * ms),
        ("s", "sample.complete", 76 * ms),
    ]
    connection.executemany(
        "INSERT INTO events (sample_uuid, event_type, timestamp_ns, conversation_id, data) "
        "VALUES (?, ?, ?, 'c1', x'6e756c6c')",
        rows,
    )
    connection.commit()
    connection.close()
    from servetrace.analysis.memory import analyze_events

    analysis = analyze_events(import_file(path).events)
    row = analysis.requests.row(0, named=True)
    assert (row["ttft_ns"], row["e2e_ns"], row["decode_ns"]) == (50 * ms, 76 * ms, 25 * ms)
    assert row["tpot_ns"] == 12.5 * ms and row["itl_max_ns"] == 15 * ms
    assert sorted(analysis.gaps["itl_ns"].to_list()) == [10 * ms, 15 * ms]
    assert row["conversation_id"] == "c1"


def test_fixtures_of_both_schemas_agree() -> None:
    current = request_metrics(import_file(DATA / "events.db").events)
    removed = request_metrics(import_file(DATA / "events_removed_schema.db").events)
    columns = ["request_id", "outcome", *CLIENT_METRICS]
    assert current.select(columns).equals(removed.select(columns))
    assert engine_inputs([str(DATA / "events.db")]) == ("mlcommons", [DATA / "events.db"])


def test_unfinished_and_unstreamed_samples(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    write_mlcommons(path, sample_requests()[:1])
    connection = sqlite3.connect(path)
    connection.executemany(
        "INSERT INTO events (sample_uuid, event_type, timestamp_ns, conversation_id, data) "
        "VALUES (?, ?, ?, '', x'6e756c6c')",
        [
            ("warm", "sample.issued", 1),
            ("flat", "sample.issued", 10),
            ("flat", "sample.complete", 510),
        ],
    )
    connection.commit()
    connection.close()
    result = import_file(path)
    got = request_metrics(result.events)
    assert got.filter(pl.col("request_id") == "warm")["outcome"].item() == "in_flight"
    flat = got.filter(pl.col("request_id") == "flat").row(0, named=True)
    assert flat["ttft_ns"] == flat["e2e_ns"] == 500 and flat["first_token_known"] is False
    assert any("never completed" in w for w in result.warnings)
    assert any("not streamed" in w for w in result.warnings)


def test_events_without_an_issue_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    write_mlcommons(path, sample_requests()[:1])
    connection = sqlite3.connect(path)
    connection.execute(
        "INSERT INTO events (sample_uuid, event_type, timestamp_ns, conversation_id, data) "
        "VALUES ('ghost', 'sample.complete', 5, '', x'6e756c6c')"
    )
    connection.commit()
    connection.close()
    with pytest.raises(InputError, match=r"sample 'ghost': .* no 'sample.issued' row") as caught:
        import_file(path)
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT


def test_other_sqlite_is_not_this_format(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE metrics (name TEXT)")
    connection.commit()
    connection.close()
    assert detect_format(path) is None
    with pytest.raises(InputError, match=r"table 'events' lacks sample_uuid"):
        import_file(path, "mlcommons")


def test_truncated_database(tmp_path: Path) -> None:
    path = write_mlcommons(tmp_path / "events.db", sample_requests())
    path.write_bytes(path.read_bytes()[: 4096 + 100])
    with pytest.raises(InputError, match=r"events\.db: ") as caught:
        import_file(path, "mlcommons")
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT
