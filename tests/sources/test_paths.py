"""Inputs resolve to unique real files, in order; globs finish; a name is a name."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sources.file_scan import resolve_paths
from tests.conftest import events, make_request

runner = CliRunner()


@pytest.fixture
def trace() -> pl.DataFrame:
    return events(
        make_request("a", admission=1, first=5, ticks=[6, 7], complete=7),
        make_request("b", arrival=2, admission=3, first=9, ticks=[12], complete=12),
    )


def _rows_read(*inputs: str) -> int:
    result = runner.invoke(app, ["analyze", *inputs, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["accounting"]["requests_invalid"] == 0  # no duplicate_arrival
    return int(report["accounting"]["rows"])


def test_a_file_matched_or_named_several_times_is_read_once(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    deep = tmp_path / "runs" / "a" / "b"
    deep.mkdir(parents=True)
    trace.write_parquet(deep / "t.parquet")
    runs = tmp_path / "runs"
    rows = trace.height
    assert _rows_read(f"{runs}/**/**/*.parquet") == rows  # ** ** matches it at many depths
    assert _rows_read(str(deep / "t.parquet"), str(deep / "t.parquet")) == rows
    assert _rows_read(str(runs), f"{runs}/**/*.parquet") == rows  # directory plus glob
    # the same file reached through a symlink is the same real file
    (tmp_path / "link.parquet").symlink_to(deep / "t.parquet")
    assert _rows_read(str(deep / "t.parquet"), str(tmp_path / "link.parquet")) == rows


def test_unique_files_keep_the_order_first_named(tmp_path: Path, trace: pl.DataFrame) -> None:
    for name in ("b.parquet", "a.parquet"):
        trace.write_parquet(tmp_path / name)
    b, a = str(tmp_path / "b.parquet"), str(tmp_path / "a.parquet")
    assert [str(p) for p in resolve_paths([b, f"{tmp_path}/*.parquet", a])] == [b, a]


def _glob_through_loop(root: str) -> None:
    resolve_paths([f"{root}/**/*.parquet"])


def test_glob_through_a_symlink_loop_finishes(tmp_path: Path, trace: pl.DataFrame) -> None:
    (tmp_path / "runs" / "day").mkdir(parents=True)
    trace.write_parquet(tmp_path / "runs" / "day" / "t.parquet")
    (tmp_path / "runs" / "day" / "again").symlink_to(tmp_path / "runs")  # a loop
    (tmp_path / "runs" / "self").symlink_to(".")
    # In a child process, so a regression hangs this test for 20 s, not the suite.
    child = multiprocessing.get_context("spawn").Process(
        target=_glob_through_loop, args=(str(tmp_path / "runs"),)
    )
    child.start()
    child.join(20)
    finished = not child.is_alive()
    if not finished:
        child.kill()
        child.join()
    assert finished, "a ** glob through a symlink loop did not finish in 20 s"
    assert child.exitcode == 0
    assert resolve_paths([f"{tmp_path}/runs/**/*.parquet"]) == [
        tmp_path / "runs" / "day" / "t.parquet"
    ]
    assert _rows_read(str(tmp_path / "runs")) == trace.height  # directories too


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl", ".arrow"])
def test_existing_file_whose_name_has_glob_characters_is_a_file(
    tmp_path: Path, trace: pl.DataFrame, suffix: str
) -> None:
    path = tmp_path / f"run[1]{suffix}"
    write = {
        ".parquet": trace.write_parquet,
        ".csv": trace.write_csv,
        ".jsonl": trace.write_ndjson,
        ".arrow": trace.write_ipc,
    }
    write[suffix](path)
    assert _rows_read(str(path)) == trace.height


def test_glob_still_matches_brackets_and_hidden_files_stay_out(
    tmp_path: Path, trace: pl.DataFrame
) -> None:
    for name in ("run1.parquet", "run2.parquet", ".hidden.parquet", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    trace.write_parquet(tmp_path / "run1.parquet")
    trace.write_parquet(tmp_path / "run2.parquet")
    found = resolve_paths([f"{tmp_path}/run[12].parquet"])
    assert found == [tmp_path / "run1.parquet", tmp_path / "run2.parquet"]
    assert resolve_paths([f"{tmp_path}/*"]) == found
    relative = os.path.relpath(tmp_path)
    assert resolve_paths([f"{relative}/run?.parquet"]) == [
        Path(relative) / "run1.parquet",
        Path(relative) / "run2.parquet",
    ]


def test_pattern_matching_nothing_exits_3(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", f"{tmp_path}/**/*.parquet"])
    assert result.exit_code == 3
    assert "the pattern matches no trace file" in result.stderr
