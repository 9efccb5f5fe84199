"""What the batched engine keeps between batches (``analysis.stream_state``).

Each piece against the definition it replaced: finished/unplaced against a group-by over
every row, the finished-id lookup against ``is_in`` (also when every hash collides), the
sorted gather against ``sort``; and the engine, with only the retained columns, against
the in-memory report on a trace of many requests in many batches.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.analysis import stream_state
from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.histogram import RESOLUTION, LogHistogram
from servetrace.analysis.memory import Analysis, summarize_by
from servetrace.analysis.stream_state import (
    RETAINED_GROUPED,
    RETAINED_TIMELINE,
    FinishedIds,
    Retained,
    finished_and_unplaced,
    sort_in_place,
)
from servetrace.analysis.streaming import analyze_streaming
from servetrace.cli import app
from servetrace.render.summary import render_json, report_dict
from servetrace.schema import TERMINAL_EVENTS, TICK_EVENTS
from servetrace.sources.canonical import read_events
from tests.factories import synthetic_events

runner = CliRunner()


def _reference(buffer: pl.DataFrame, needs_release: bool, frontier: int | None) -> tuple[set, set]:
    """The definitions as a group-by over every row (what the engine did before)."""
    event = pl.col("event")
    ending = event.is_in(TERMINAL_EVENTS)
    done = ending.any()
    if needs_release:
        ending = ending | (event == "release")
        done = done & (event == "release").any()
    if frontier is not None:
        done = done & (pl.col("ts").filter(ending).max() < frontier)
    status = buffer.group_by("request_id").agg(
        done.alias("done"),
        event.is_in(["admission", *TICK_EVENTS]).any().not_().alias("unplaced"),
    )
    finished = status.filter(pl.col("done"))
    return set(finished["request_id"]), set(finished.filter(pl.col("unplaced"))["request_id"])


def _random_rows(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    kinds = ["arrival", "admission", "first_token", "token", "preemption", "release"]
    kinds += list(TERMINAL_EVENTS)
    n = 400
    return pl.DataFrame(
        {
            "request_id": rng.integers(0, 60, n),
            "event": rng.choice(kinds, n, p=[0.1, 0.05, 0.05, 0.5, 0.05, 0.1, 0.05, 0.05, 0.05]),
            "ts": rng.integers(0, 1_000, n),
        }
    )


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("needs_release", [False, True])
@pytest.mark.parametrize("frontier", [None, 500, 1_000])
def test_finished_and_unplaced_equal_the_group_by_over_every_row(
    seed: int, needs_release: bool, frontier: int | None
) -> None:
    rows = _random_rows(seed)
    done, unplaced = finished_and_unplaced(rows, needs_release, frontier)
    expected_done, expected_unplaced = _reference(rows, needs_release, frontier)
    assert set(done) == expected_done
    assert set(unplaced) == expected_unplaced
    assert done.len() == len(expected_done)  # each id once


def test_an_unplaced_request_is_one_without_admission_or_tick() -> None:
    rows = pl.DataFrame(
        {
            "request_id": ["queued", "queued", "ticked", "ticked", "ticked", "admitted"],
            "event": ["arrival", "cancellation", "arrival", "token", "completion", "admission"],
            "ts": [1, 2, 1, 2, 3, 1],
        }
    )
    rows = rows.vstack(pl.DataFrame({"request_id": ["admitted"], "event": ["error"], "ts": [4]}))
    done, unplaced = finished_and_unplaced(rows, False, 10)
    assert sorted(done) == ["admitted", "queued", "ticked"]
    assert unplaced.to_list() == ["queued"]  # a token without first_token still places


@pytest.mark.parametrize("dtype", [pl.Int64, pl.String])
def test_finished_ids_answer_exactly_what_is_in_answers(dtype: pl.DataType) -> None:
    rng = np.random.default_rng(0)
    seen = FinishedIds()
    finished: list = []
    for batch in range(200):  # enough adds for several merges of the sorted levels
        ids = pl.Series(rng.choice(10_000, 40, replace=False)).cast(dtype)
        probe = pl.Series(rng.choice(10_000, 300, replace=False)).cast(dtype)
        expected = set(probe.filter(probe.is_in(pl.Series(finished, dtype=dtype).implode())))
        assert set(seen.among(probe)) == expected, batch
        seen.add(ids)
        finished.extend(ids.to_list())
    assert len(seen._levels) <= 12  # binary-counter merging: O(log adds) levels


def test_finished_ids_confirm_every_hash_match(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every id hashes to one of 3 values: nearly every probe matches a hash, and only the
    # comparison with the ids themselves may say which are finished.
    def colliding(ids: pl.Series) -> np.ndarray:
        return (ids.cast(pl.String).str.len_bytes().cast(pl.UInt64) % 3).to_numpy()

    monkeypatch.setattr(stream_state, "_hash_of", colliding)
    seen = FinishedIds()
    seen.add(pl.Series(["a", "bb", "ccc"]))
    seen.add(pl.Series(["dddd"]))
    got = seen.among(pl.Series(["a", "x", "yy", "dddd", "zzzzz"]))
    assert sorted(got) == ["a", "dddd"]


def test_sort_in_place_equals_sort() -> None:
    rng = np.random.default_rng(3)
    frame = pl.DataFrame(
        {
            "arrival_ns": pl.Series(rng.integers(0, 50, 1_000)).set(
                pl.Series(rng.random(1_000) < 0.1), None
            ),
            "request_id": [f"r{i}" for i in rng.permutation(1_000)],
            "value": rng.random(1_000),
            "outcome": rng.choice(["completed", "cancelled"], 1_000),
        }
    )
    expected = frame.sort("arrival_ns", "request_id", nulls_last=True)
    assert sort_in_place(frame.clone(), ["arrival_ns", "request_id"]).equals(expected)


def test_retained_compacts_without_changing_rows() -> None:
    kept = Retained()
    pieces = [pl.DataFrame({"a": [i, i + 1], "b": [None, f"x{i}"]}) for i in range(100)]
    pieces[5] = pl.DataFrame({"a": [5, 6], "b": [None, None]})  # a Null column: relaxed
    for piece in pieces:
        kept.append(piece)
    assert len(kept) < 10  # compacted as it went
    frame = kept.frame()
    assert frame.equals(pl.concat(pieces, how="diagonal_relaxed"))


def test_histogram_buckets_are_the_group_by_of_their_definition() -> None:
    rng = np.random.default_rng(5)
    values = pl.Series(
        np.concatenate([rng.lognormal(17, 1.5, 50_000), [0, 1, 2, 3, 2**50]]).astype(np.int64)
    )
    histogram = LogHistogram()
    histogram.add(values.head(20_000))
    histogram.add(values.tail(values.len() - 20_000))
    key = (pl.col("v").cast(pl.Float64).clip(lower_bound=0.0).log1p() * RESOLUTION).floor()
    expected = (
        values.to_frame("v")
        .group_by(key.cast(pl.Int64).alias("b"))
        .agg(
            pl.len().cast(pl.Int64).alias("n"),
            pl.col("v").min().alias("lo"),
            pl.col("v").max().alias("hi"),
        )
        .sort("b")
    )
    assert histogram.buckets.sort("b").equals(expected)
    wide = values.cast(pl.Int128)
    assert histogram.total == int(wide.sum())
    assert histogram.total_sq == int((wide * wide).sum())


# ------------------------------------------------------- the engine with what it retains
def _report(analysis: Analysis) -> dict:
    """The JSON report as users get it (every float as rendered)."""
    return json.loads(render_json(report_dict(analysis.summary, ())))


def _many_requests(tmp_path: Path) -> str:
    frame = synthetic_events(3_000, cancelled=120, mean_output=6)
    path = tmp_path / "many.parquet"
    frame.write_parquet(path)
    return str(path)


@pytest.mark.slow
def test_streamed_report_on_many_batches_equals_in_memory(tmp_path: Path) -> None:
    path = _many_requests(tmp_path)
    whole = analyze_paths([path])
    # ~120 batches: the retained pieces are compacted several times over
    streamed = analyze_streaming(read_events([path]), batch_rows=250)
    assert set(streamed.timeline.requests.columns) == set(RETAINED_TIMELINE)
    assert "_key" not in streamed.timeline.transitions.columns
    assert streamed.timeline.transitions["d_in_system"].dtype == pl.Int8
    assert streamed.requests.equals(whole.requests)
    assert _report(streamed) == _report(whole)


def test_streamed_groups_keep_their_spans_and_equal_in_memory(tmp_path: Path) -> None:
    frame = synthetic_events(1_500, cancelled=60, mean_output=6).with_columns(
        pl.when(pl.col("request_id").str.slice(1).cast(pl.Int64) % 3 == 0)
        .then(pl.lit("a"))
        .otherwise(pl.lit("b"))
        .alias("policy")
    )
    path = tmp_path / "grouped.parquet"
    frame.write_parquet(path)
    whole = analyze_paths([str(path)])
    streamed = analyze_streaming(read_events([str(path)]), batch_rows=300, by="policy")
    assert set(streamed.timeline.requests.columns) >= set(RETAINED_GROUPED) - {"release_ns"}
    assert streamed.requests.equals(whole.requests)
    expected = summarize_by(whole, "policy")
    got = summarize_by(streamed, "policy")
    assert got.keys() == expected.keys()
    for value, summary in expected.items():
        assert got[value].concurrency == summary.concurrency, value
        assert got[value].throughput == summary.throughput, value
        assert got[value].accounting == summary.accounting, value


def test_cli_requests_out_streamed_equals_in_memory(tmp_path: Path) -> None:
    path = _many_requests(tmp_path)
    outs = {}
    reports = {}
    for mode in ("--streaming", "--no-streaming"):
        out = tmp_path / f"requests{mode}.parquet"
        result = runner.invoke(
            app,
            [
                "analyze",
                path,
                mode,
                "--batch-rows",
                "1000",
                "--format",
                "json",
                "--requests-out",
                str(out),
            ],
        )
        assert result.exit_code == 0, result.output
        outs[mode] = pl.read_parquet(out)
        reports[mode] = json.loads(result.stdout)
    assert outs["--streaming"].equals(outs["--no-streaming"])
    assert reports["--streaming"] == reports["--no-streaming"]


@pytest.mark.slow
def test_kept_rows_are_spilled_read_back_equal_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _many_requests(tmp_path)
    whole = analyze_paths([path])
    spill_root = tmp_path / "tmpdir"
    spill_root.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spill_root))
    written: list[Path] = []
    write_ipc = pl.DataFrame.write_ipc

    def counting(self: pl.DataFrame, file: Path, **kwargs: object) -> None:
        written.append(Path(file))
        assert Path(file).parent.parent == spill_root
        write_ipc(self, file, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pl.DataFrame, "write_ipc", counting)
    monkeypatch.setattr(Retained, "COMPACT_EVERY", 4)
    streamed = analyze_streaming(read_events([path]), batch_rows=250)
    assert len(written) > 20  # every kind, many chunks
    assert {p.name.split("-")[0] for p in written} >= {"timeline", "transitions", "requests"}
    assert list(spill_root.iterdir()) == []  # the directory is gone with its files
    assert streamed.requests.equals(whole.requests)
    assert _report(streamed) == _report(whole)


def test_spill_directory_is_removed_on_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spill_root = tmp_path / "tmpdir"
    spill_root.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spill_root))
    with pytest.raises(RuntimeError), stream_state.spill_directory() as spill:
        (spill / "requests-000000.arrow").write_bytes(b"x")
        raise RuntimeError("boom")
    assert list(spill_root.iterdir()) == []


def test_a_spill_that_cannot_be_written_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: pl.DataFrame, file: Path, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", str(file))

    monkeypatch.setattr(pl.DataFrame, "write_ipc", full)
    kept = Retained(tmp_path, "requests")
    with pytest.raises(stream_state.InputError, match="No space left on device"):
        for i in range(Retained.COMPACT_EVERY):
            kept.append(pl.DataFrame({"a": [i]}))
