"""Broken or unusual text traces: exit 3 naming file, line/row and column, never exit 4;
unusual but valid layouts (BOM, CR line ends, a final blank line) read normally."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
HEADER = "request_id,event,ts,tokens\n"
GOOD_CSV = HEADER + "a,arrival,0,\na,first_token,5,1\na,token,7,1\na,completion,7,\n"
GOOD_JSONL = "".join(
    json.dumps(r) + "\n"
    for r in (
        {"request_id": "a", "event": "arrival", "ts": 0},
        {"request_id": "a", "event": "first_token", "ts": 5, "tokens": 1},
        {"request_id": "a", "event": "token", "ts": 7, "tokens": 1},
        {"request_id": "a", "event": "completion", "ts": 7},
    )
)


def _analyze(path: Path, *flags: str) -> tuple[int, str, dict | None]:
    result = runner.invoke(app, ["analyze", str(path), "--format", "json", *flags])
    report = json.loads(result.stdout) if result.exit_code == 0 else None
    return result.exit_code, result.stderr, report


def _fails(path: Path, *needles: str) -> str:
    code, stderr, _ = _analyze(path)
    assert code == 3, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    first = stderr.splitlines()[0]
    assert first.startswith(f"error: {path}"), first
    for needle in needles:
        assert needle in first, first
    return first


def _clean(path: Path) -> dict:
    code, stderr, report = _analyze(path)
    assert code == 0, stderr
    assert report is not None
    assert report["accounting"]["requests_invalid"] == 0, report["accounting"]
    assert report["accounting"]["rows"] == 4
    return report


# --- exit 4 → exit 3 ------------------------------------------------------------------


def test_invalid_utf8_csv_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(HEADER.encode() + b"a,arrival,0,\na,first_tok\xff\xfeen,5,1\n")
    _fails(path, "line 3", "column 'event'", "not UTF-8")


def test_unterminated_quote_names_the_line_it_opens_on(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + 'a,arrival,0,\na,"first_token,5,1\na,completion,7,\n')
    _fails(path, "line 3", "quote")


def test_jsonl_line_that_is_a_scalar(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(GOOD_JSONL + "5\n")
    _fails(path, "line 5", "not a JSON object")


def test_list_typed_event_column(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"request_id": "a", "event": ["arrival"], "ts": 1}\n')
    _fails(path, "row 1", "column 'event'", "expected text")


def test_field_that_becomes_a_list_late_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(GOOD_JSONL + '{"request_id": "b", "event": "arrival", "ts": [1]}\n')
    _fails(path, "line 5", "field 'ts' is a list", "line 1")


# --- int64 wrap-around ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "flags", "needle"),
    [
        (str(2**70), (), "row 2"),  # JSON gives Int128: must not fail deep in the analysis
        (str(2**63 + 5), (), "row 2"),  # UInt64
        (str(2**62 + 1), (), "row 2"),  # fits Int64, but differences with it could wrap
        ("1e12", (), "row 2"),  # float seconds x 1e9 beyond range
        (str(10**13), ("--time-unit", "ms"), "row 2"),  # ms x 1e6 wraps Int64
    ],
)
def test_timestamps_that_do_not_fit_are_refused(
    tmp_path: Path, text: str, flags: tuple[str, ...], needle: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"request_id": "a", "event": "arrival", "ts": 0}\n'
        f'{{"request_id": "a", "event": "first_token", "ts": {text}}}\n'
    )
    code, stderr, _ = _analyze(path, *flags)
    assert code == 3, stderr
    assert needle in stderr and "column 'ts'" in stderr and str(path) in stderr


@pytest.mark.parametrize("value", [str(2**63), str(2**40), str(2**32), str(-(2**32)), "1e20"])
def test_token_counts_that_could_wrap_are_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        GOOD_JSONL.replace('"tokens": 1}', f'"tokens": {value}}}', 1).replace(
            '"ts": 7}', '"ts": 7, "output_tokens": 3}', 1
        )
    )
    _fails(path, "row 2", "column 'tokens'", "not a whole number below")


def test_epoch_nanoseconds_are_in_range(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    epoch = 1_767_225_600_000_000_000  # 2026-01-01
    path.write_text(GOOD_CSV.replace(",0,", f",{epoch},").replace(",5,", f",{epoch + 5},"))
    path.write_text(path.read_text().replace(",7,", f",{epoch + 7},"))
    _clean(path)


# --- valid layouts that used to break -------------------------------------------------


def test_csv_ending_in_blank_lines_has_no_phantom_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(GOOD_CSV + "\n\n")
    _clean(path)


def test_byte_order_mark_on_jsonl_and_csv(tmp_path: Path) -> None:
    for name, text in (("t.csv", GOOD_CSV), ("t.jsonl", GOOD_JSONL)):
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        _clean(path)
        gz = tmp_path / (name + ".gz")
        gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + text.encode()))
        _clean(gz)


def test_cr_only_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(GOOD_CSV.replace("\n", "\r").encode())
    _clean(path)
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(GOOD_CSV.replace("\n", "\r\n").encode())
    _clean(crlf)


def test_garbage_csv_gz_is_not_called_json(tmp_path: Path) -> None:
    path = tmp_path / "t.csv.gz"
    path.write_bytes(b"\xff\xfe\x00garbage that is not gzip at all")
    first = _fails(path)
    assert "JSON" not in first and "UTF-8" not in first
    corrupt = tmp_path / "c.csv.gz"
    corrupt.write_bytes(gzip.compress(GOOD_CSV.encode())[:-12])
    first = _fails(corrupt)
    assert "JSON" not in first


def _column_lookups_for_wide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> int:
    """How often ``DataFrame.columns`` (a new list of every name per call) is read while
    analysing a CSV with ``n`` attribute columns (and a blank line, checked per row)."""
    names = [f"c{i}" for i in range(n)]
    header = "request_id,event,ts," + ",".join(names) + "\n"
    row = ",".join("x" for _ in names)
    lines = [f"a,{kind},{ts},{row}\n" for kind, ts in (("arrival", 0), ("completion", 9))]
    path = tmp_path / f"wide{n}.csv"
    path.write_text(header + "".join(lines) + "\n")
    calls = 0
    original = pl.DataFrame.columns

    def counted(frame: pl.DataFrame) -> list[str]:
        nonlocal calls
        calls += 1
        return original.fget(frame)  # type: ignore[attr-defined,no-any-return]

    with monkeypatch.context() as patch:
        patch.setattr(pl.DataFrame, "columns", property(counted, original.fset))
        code, stderr, report = _analyze(path)
    assert code == 0, stderr
    assert report is not None and report["accounting"]["rows"] == 2
    return calls


@pytest.mark.slow  # several seconds: run by `pytest -m slow`
def test_wide_csv_is_not_quadratic_in_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Looking each attribute up in ``frame.columns`` made 100k columns run for minutes
    (a list of n names built n times); the number of such lookups must not grow with the
    number of columns. Measured after the fix: 100k columns in about 40 s on two busy
    cores, 10k in 7 s."""
    few = _column_lookups_for_wide(tmp_path, monkeypatch, 50)
    many = _column_lookups_for_wide(tmp_path, monkeypatch, 2_000)
    assert many <= few + 10, (few, many)
    started = time.perf_counter()
    _column_lookups_for_wide(tmp_path, monkeypatch, 20_000)
    assert time.perf_counter() - started < 120
