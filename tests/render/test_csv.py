"""``render._csv``: rows end with a line feed, any line break is quoted, and a text cell
that a spreadsheet would run as a formula is neutralised."""

from __future__ import annotations

import csv
import io

import polars as pl

from servetrace.render._csv import neutral_frame, rows_writer, write_text_raw


def test_values_with_line_breaks_are_quoted_and_rows_end_with_a_line_feed() -> None:
    out = io.StringIO()
    writer = rows_writer(out)
    writer.writerow(["a\rb", "plain", "c\nd", 'say "hi"', 1.5])
    writer.writerow(["x\r\ny", "", None])
    assert out.getvalue() == '"a\rb",plain,"c\nd","say ""hi""",1.5\n"x\r\ny",,\n'
    rows = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert rows == [["a\rb", "plain", "c\nd", 'say "hi"', "1.5"], ["x\r\ny", "", ""]]


def test_a_row_without_line_breaks_is_written_as_before() -> None:
    out = io.StringIO()
    rows_writer(out).writerows([["metric", "p50"], ["ttft", 12]])
    assert out.getvalue() == "metric,p50\nttft,12\n"


def test_text_that_would_start_a_formula_is_neutralised_numbers_are_not() -> None:
    out = io.StringIO()
    rows_writer(out).writerow(["=1+2", "+x", "-y", "@z", "\tt", "plain", -3, -1.5, "a=b"])
    row = next(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert row == ["'=1+2", "'+x", "'-y", "'@z", "'\tt", "plain", "-3", "-1.5", "a=b"]


def test_csv_raw_text_writes_every_cell_as_it_is() -> None:
    out = io.StringIO()
    try:
        write_text_raw(True)
        rows_writer(out).writerow(["=1+2", "@z"])
        frame = neutral_frame(pl.DataFrame({"id": ["=x"]}))
    finally:
        write_text_raw(False)
    assert out.getvalue() == "=1+2,@z\n" and frame["id"].to_list() == ["=x"]


def test_a_frame_keeps_its_numbers_and_neutralises_its_text() -> None:
    frame = pl.DataFrame({"id": ["=x", "-2", "ok", None], "n": [-1, 2, 3, 4]})
    got = neutral_frame(frame)
    assert got["id"].to_list() == ["'=x", "'-2", "ok", None]
    assert got["n"].to_list() == [-1, 2, 3, 4] and got.schema == frame.schema
