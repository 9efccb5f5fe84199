"""``render._csv.rows_writer``: rows end with a line feed, and any line break is quoted."""

from __future__ import annotations

import csv
import io

from servetrace.render._csv import rows_writer


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
