"""Outputs never overwrite inputs (exit 2, nothing written) and are written atomically."""

from __future__ import annotations

import csv
import gzip
import io
import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace import outputs
from servetrace.cli import app
from tests.conftest import events, make_request

runner = CliRunner()


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    frame = events(
        make_request("a", admission=10, first=50, ticks=[60, 70], complete=70),
        make_request("b", admission=5, first=20, complete=20),
        make_request("c", first=30, complete=30, admission=40),  # token_before_admission
    )
    path = tmp_path / "trace.parquet"
    frame.write_parquet(path)
    return path


def _refused(args: list[str], *protected: Path) -> str:
    before = {p: p.read_bytes() for p in protected}
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.stderr
    assert "refusing to overwrite" in result.stderr and "Traceback" not in result.stderr
    for path, content in before.items():
        assert path.read_bytes() == content, f"{path} was changed"
    return result.stderr


@pytest.mark.parametrize("flag", ["--requests-out", "--quarantine-out"])
def test_analyze_output_that_is_the_input(trace: Path, flag: str) -> None:
    stderr = _refused(["analyze", str(trace), flag, str(trace)], trace)
    assert flag in stderr


def test_validate_quarantine_out_is_the_input(trace: Path) -> None:
    _refused(["validate", str(trace), "--quarantine-out", str(trace)], trace)


def test_output_through_a_relative_path(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    _refused(["analyze", str(trace), "--quarantine-out", "../sub/../trace.parquet"], trace)


def test_output_through_a_symlink(trace: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.parquet"
    link.symlink_to(trace)
    _refused(["analyze", str(trace), "--requests-out", str(link)], trace)
    _refused(["analyze", str(link), "--requests-out", str(trace)], trace)


def test_output_that_is_a_hard_link_of_the_input(trace: Path, tmp_path: Path) -> None:
    hard = tmp_path / "hard.parquet"
    os.link(trace, hard)
    _refused(["analyze", str(trace), "--requests-out", str(hard)], trace)


def test_output_inside_an_input_directory(tmp_path: Path, trace: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    part = parts / "part-0.parquet"
    trace.rename(part)
    stderr = _refused(["analyze", str(parts), "--requests-out", str(parts / "out.parquet")], part)
    assert "inside the input directory" in stderr
    assert not (parts / "out.parquet").exists()


def test_output_matched_by_an_input_glob(tmp_path: Path, trace: Path) -> None:
    _refused(["analyze", str(tmp_path / "*.parquet"), "--quarantine-out", str(trace)], trace)


def test_two_outputs_naming_one_file(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    result = runner.invoke(
        app, ["analyze", str(trace), "--requests-out", str(out), "--quarantine-out", str(out)]
    )
    assert result.exit_code == 2 and "same file" in result.stderr
    assert not out.exists()


def test_check_output_that_is_the_trace_or_the_baseline(trace: Path, tmp_path: Path) -> None:
    base = tmp_path / "base.parquet"
    base.write_bytes(trace.read_bytes())
    common = ["check", str(trace), "--slo", "ttft.p99<=1s", "--baseline", str(base)]
    _refused([*common, "--output", str(trace)], trace, base)
    _refused([*common, "--output", str(base)], trace, base)


def test_check_output_that_is_the_config(trace: Path, tmp_path: Path) -> None:
    config = tmp_path / "servetrace.toml"
    config.write_text('[check]\nslo = ["ttft.p99<=1s"]\n', encoding="utf-8")
    _refused(["check", str(trace), "--config", str(config), "-o", str(config)], trace, config)


def test_import_output_that_is_the_input(tmp_path: Path) -> None:
    export = Path(__file__).parent.parent / "data" / "peers" / "aiperf_s1_conc8"
    plain = tmp_path / "export.jsonl"  # a .jsonl export is also a valid output suffix
    plain.write_bytes(gzip.decompress((export / "profile_export.jsonl.gz").read_bytes()))
    _refused(["import", "aiperf", str(plain), "-o", str(plain)], plain)


def test_simulate_output_that_is_the_workload(tmp_path: Path) -> None:
    workload = tmp_path / "workload.csv"
    pl.DataFrame(
        {"arrival_ns": [0, 10], "prompt_tokens": [5, 6], "output_tokens": [2, 3]}
    ).write_csv(workload)
    _refused(["simulate", "--workload", str(workload), "-o", str(workload)], workload)


def test_allowed_output_is_written_and_no_temporary_is_left(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "requests.csv"
    out.parent.mkdir()
    result = runner.invoke(app, ["analyze", str(trace), "--requests-out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert pl.read_csv(out).height >= 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["requests.csv"]


def test_a_failed_write_leaves_the_old_file_whole(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "report.parquet"
    target.write_bytes(b"previous content")

    def fail(self: pl.DataFrame, path: Path) -> None:
        Path(path).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", fail)
    with pytest.raises(outputs.UsageError, match="No space left"):
        outputs.write_frame(pl.DataFrame({"a": [1]}), target)
    assert target.read_bytes() == b"previous content"
    assert [p.name for p in tmp_path.iterdir()] == ["report.parquet"]


def test_write_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    outputs.write_text("new", link)
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "new"


def test_a_csv_field_keeps_its_carriage_return(tmp_path: Path) -> None:
    # A group value with a carriage return: the report goes to stdout as written (rich's
    # console would strip the \r and change the value), and the value is quoted (an RFC
    # 4180 reader ends a row at a bare \r).
    frame = events(
        make_request("a", admission=1, first=5, ticks=[6], complete=6, pool="east\rwest"),
        make_request("b", admission=1, first=5, ticks=[7], complete=7, pool="north"),
    )
    path = tmp_path / "trace.parquet"
    frame.write_parquet(path)
    result = runner.invoke(app, ["analyze", str(path), "--by", "pool", "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert '\n"east\rwest",queue_wait,' in result.stdout
    assert result.stdout.endswith("\n") and not result.stdout.endswith("\n\n")
    rows = list(csv.reader(io.StringIO(result.stdout, newline="")))
    assert {row[0] for row in rows[1:]} == {"east\rwest", "north"}
    assert len({len(row) for row in rows}) == 1


@pytest.mark.parametrize("value", ["[/x] east", "[bold]north", ":smile:"])
def test_group_values_and_file_names_are_shown_as_written(tmp_path: Path, value: str) -> None:
    # rich markup in a user's string used to raise (exit 4) or restyle the table title.
    frame = events(make_request("a", admission=1, first=5, ticks=[6], complete=6, pool=value))
    path = tmp_path / "[bold]trace :smile:.parquet"
    frame.write_parquet(path)
    result = runner.invoke(app, ["analyze", str(path), "--by", "pool"])
    assert result.exit_code == 0, result.output
    assert f"pool = {value}\n" in result.stdout
    assert f"{path}\n" in result.stdout
