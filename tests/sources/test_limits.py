"""Bounded reads: a line past the record cap, or gzip data expanding past the ratio cap,
is refused with exit 3 naming the file and the cap, before the rest is read; the caps are
set by environment variables, and a JSON document on one line is no record."""

from __future__ import annotations

import gzip
import json
import random
import re
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.errors import InputError
from servetrace.sources import limits, reading, sniff

runner = CliRunner()
ROWS = [
    {"request_id": "a", "event": "arrival", "ts": 0},
    {"request_id": "a", "event": "first_token", "ts": 5, "tokens": 1},
    {"request_id": "a", "event": "completion", "ts": 7},
]
JSONL = "".join(json.dumps(r) + "\n" for r in ROWS)
CSV = "request_id,event,ts,tokens\na,arrival,0,\na,first_token,5,1\na,completion,7,\n"


def _refused(path: Path, *needles: str) -> str:
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 3, result.stderr
    assert "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {path}: "), first
    for needle in needles:
        assert needle in first, first
    return first


def _reads(path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["accounting"]["rows"] == 3


def _bomb(path: Path, line_bytes: int) -> None:
    """A JSON Lines gzip file of one record ``line_bytes`` long, compressed ~1000-fold,
    written without holding the line in memory."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (1 << 20)
    with open(path, "wb") as out:
        out.write(packer.compress(b'{"request_id": "a", "event": "arrival", "ts": 0, "pad": "'))
        for _ in range(line_bytes >> 20):
            out.write(packer.compress(block))
        out.write(packer.compress(b'"}\n' + JSONL.encode()))
        out.write(packer.flush())


@pytest.mark.slow
def test_one_huge_gzipped_line_is_refused_at_the_record_cap(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    _bomb(path, 256 << 20)
    assert path.stat().st_size < 1 << 20
    _refused(path, "line 1", "record cap of 64 MiB", limits.RECORD_BYTES_VARIABLE)


@pytest.mark.parametrize("name", ["t.jsonl", "t.csv", "t.jsonl.gz", "t.csv.gz"])
def test_a_line_past_a_lowered_cap_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    text = (JSONL if ".jsonl" in name else CSV) + ("x" * 300) + "\n"
    data = text.encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    monkeypatch.setenv(limits.RECORD_BYTES_VARIABLE, "256")
    last = text.count("\n")
    _refused(path, f"line {last}", "record cap of 256 bytes")
    monkeypatch.setenv(limits.RECORD_BYTES_VARIABLE, "1000")  # the cap is the user's to raise
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert "record cap" not in result.stderr


@pytest.mark.parametrize("name", ["t.jsonl", "t.csv"])
def test_lines_within_the_cap_read_normally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    text = JSONL if name.endswith(".jsonl") else CSV
    width = max(len(line) for line in text.split("\n"))
    monkeypatch.setenv(limits.RECORD_BYTES_VARIABLE, str(width))
    path = tmp_path / name
    path.write_text(text)
    _reads(path)


def test_gzip_expanding_past_the_ratio_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress((JSONL * 200).encode()))
    _reads_rows = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert _reads_rows.exit_code == 0, _reads_rows.stderr
    monkeypatch.setattr(limits, "RATIO_EXEMPT_BYTES", 0)
    monkeypatch.setenv(limits.GZIP_RATIO_VARIABLE, "3")
    _refused(path, "expands more than 3-fold", limits.GZIP_RATIO_VARIABLE)


def test_an_imported_json_lines_record_past_the_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text('{"a": 1}\n{"a": "' + "é" * 100 + '"}\n')  # 200 bytes in 100 characters
    monkeypatch.setenv(limits.RECORD_BYTES_VARIABLE, "150")
    with pytest.raises(InputError, match="line 2 is longer than the record cap of 150 bytes"):
        list(reading.iter_json_lines(path))


def test_a_json_document_on_one_line_is_not_a_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "export.json.gz"
    document = {"records": [{"a": i} for i in range(100)]}
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    monkeypatch.setenv(limits.RECORD_BYTES_VARIABLE, "64")
    assert sniff.json_head(path).kind == "document"
    assert reading.load_json(path) == document


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1.5"])
def test_a_cap_that_is_not_a_whole_number_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(JSONL)
    monkeypatch.setenv(limits.RECORD_BYTES_VARIABLE, value)
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 2, result.stderr
    assert f"{limits.RECORD_BYTES_VARIABLE}={value}" in result.stderr.splitlines()[0]


@pytest.mark.parametrize("seed", range(40))
def test_line_watch_agrees_with_splitting_the_whole_text(seed: int) -> None:
    """Fed in random chunks, the watch refuses exactly the texts with a line past the cap,
    naming the first such line."""
    rng = random.Random(seed)
    data = b"".join(
        b"x" * rng.choice([0, 1, 5, 9, 10, 11, 30]) + rng.choice([b"\n", b"\r\n", b"\r"])
        for _ in range(rng.randint(1, 60))
    ) + b"y" * rng.randint(0, 12)
    cap = rng.choice([1, 3, 9, 10, 11, 25])
    watch = limits.LineWatch(Path("t"), cap)
    lines = re.split(rb"\r\n|\r|\n", data)
    over = [i for i, line in enumerate(lines) if len(line) > cap]
    cuts = sorted(rng.sample(range(len(data) + 1), min(len(data), rng.randint(0, 8))))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    refused = next((True for piece in pieces if watch.over(piece)), False)
    assert refused == bool(over)
    if not over:
        return
    ends = [m.end() for m in re.finditer(rb"\r\n|\r|\n", data)]
    start = ends[over[0] - 1] if over[0] else 0
    line = data.count(b"\n", 0, start) + 1
    assert watch.start == start
    assert f"line {line} is longer" in watch.refused(pieces).message
