"""Hostile strings through every writer, by the CLI.

A trace whose request ids, attribute values and file name hold markup, spreadsheet
formulas, quotes, table pipes, Unicode line separators, control characters, emoji and a
very long string: every output must stay a valid document of its kind and say the
string back, neutralised only where the format demands it (a CSV text cell that a
spreadsheet would run as a formula).
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from tests.conftest import events, make_request
from tests.render.browser import assert_rendered, open_report

HOSTILE = [
    "<!--<script>",
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "&amp; &lt;",
    "say \"hi\", then 'bye'",
    "a|b|c",
    "=cmd|' /C calc'!A0",
    "+1",
    "-2",
    "@x",
    "\tlead tab",
    "\rlead cr",
    "line\u2028sep",
    "para\u2029sep",
    "next\u0085line",
    "ctl\x01\x1b\x1f\x7f",
    "emoji 🚀👩‍💻",
    "L" * 5000,
]
# What a spreadsheet takes for the start of a formula (OWASP, CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
runner = CliRunner()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two traces of the same hostile requests; the first one's path reads
    ``…/</script><!--<script>=x.parquet`` (a directory named ``<``)."""
    root = tmp_path_factory.mktemp("hostile")
    requests = [
        make_request(
            rid,
            arrival=10 * i,
            admission=10 * i + 1,
            first=10 * i + 3 + i,
            ticks=[10 * i + 5 + i, 10 * i + 7 + i],
            complete=10 * i + 8 + i,
            prompt_tokens=10,
            output_tokens=3,
            tenant=HOSTILE[(i + 1) % len(HOSTILE)],
        )
        for i, rid in enumerate(HOSTILE)
    ]
    frame = events(*requests)
    (root / "<").mkdir()
    first = root / "<" / "script><!--<script>=x.parquet"
    second = root / '=cmd|"q" @x \u2028.parquet'
    frame.write_parquet(first)
    frame.write_parquet(second)
    return [str(first), str(second)]


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


# ------------------------------------------------------------------------------- HTML
@pytest.mark.parametrize("how_many", [1, 2], ids=["one trace", "comparison"])
def test_html_report_draws_every_chart(
    browser: Any, traces: list[str], tmp_path: Path, how_many: int
) -> None:
    out = tmp_path / "report.html"
    _run("report", *traces[:how_many], "-o", str(out))
    opened = open_report(browser, out, timeout_ms=60_000)
    assert_rendered(opened.page)
    assert opened.errors == [] and opened.dialogs == [] and opened.outside == []
    embedded = json.loads(opened.page.locator("#servetrace-reports").text_content())
    assert set(traces[:how_many]) <= set(embedded)
    assert opened.page.title() == "servetrace report: " + ", ".join(traces[:how_many])
    assert opened.page.locator("script").count() == opened.page.evaluate(
        "document.querySelectorAll('script.vl-spec').length + 3"
    )  # the specs, the reports, the bundle and the page's own script: nothing injected
    opened.page.close()


# --------------------------------------------------------------------------- timeline
def test_timeline_is_json_holding_every_id(
    traces: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "timeline.json"
    # Relative to the working directory, the input keeps every hostile character.
    monkeypatch.chdir(Path(traces[0]).parents[1])
    _run("timeline", traces[0], "-o", str(out), "--ticks")
    doc = json.loads(out.read_text(encoding="utf-8"))
    named = {e["args"]["request_id"] for e in doc["traceEvents"] if "request_id" in e["args"]}
    assert named == set(HOSTILE)
    assert doc["otherData"]["inputs"] == ["</script><!--<script>=x.parquet"]


# -------------------------------------------------------------------------------- CSV
def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _assert_neutralised(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_START) or _is_number(cell), repr(cell)


def _requests_csv(traces: list[str], out: Path, *raw: str) -> list[list[str]]:
    _run("analyze", traces[0], "--requests-out", str(out), "-f", "json", *raw)
    return _csv_rows(out.read_bytes().decode("utf-8"))  # no newline translation


def _column(rows: list[list[str]], name: str) -> list[str]:
    return [row[rows[0].index(name)] for row in rows[1:]]


def test_requests_csv_neutralises_formulas_and_keeps_numbers(
    traces: list[str], tmp_path: Path
) -> None:
    rows = _requests_csv(traces, tmp_path / "requests.csv")
    _assert_neutralised(rows)
    ids = _column(rows, "request_id")
    # The neutralising quote is the one character added: take it off, the ids are back.
    assert {i[1:] if i.startswith("'") and i[1:].startswith(FORMULA_START) else i for i in ids} == (
        set(HOSTILE)
    )
    assert "'=cmd|' /C calc'!A0" in ids and "'-2" in ids and "'\tlead tab" in ids
    assert set(_column(rows, "tenant")) == set(ids)


def test_csv_raw_text_writes_text_as_it_is(traces: list[str], tmp_path: Path) -> None:
    rows = _requests_csv(traces, tmp_path / "requests.csv", "--csv-raw-text")
    assert set(_column(rows, "request_id")) == set(HOSTILE)


def test_parquet_output_is_never_altered(traces: list[str], tmp_path: Path) -> None:
    out = tmp_path / "requests.parquet"
    _run("analyze", traces[0], "--requests-out", str(out), "-f", "json")
    assert set(pl.read_parquet(out)["request_id"]) == set(HOSTILE)


def test_grouped_csv_neutralises_group_values(traces: list[str]) -> None:
    rows = _csv_rows(_run("analyze", traces[0], "--by", "tenant", "-f", "csv"))
    _assert_neutralised(rows)
    values = set(_column(rows, "tenant"))
    assert "'=cmd|' /C calc'!A0" in values and "'+1" in values and "'@x" in values
    assert "<!--<script>" in values  # not a formula: left alone
    raw = _csv_rows(_run("analyze", traces[0], "--by", "tenant", "-f", "csv", "--csv-raw-text"))
    assert set(_column(raw, "tenant")) == set(HOSTILE)


# --------------------------------------------------------------------------- Markdown
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
_CODE_SPAN = re.compile(r"`[^`]*`")


def _assert_markdown_safe(text: str) -> None:
    """Every row of a table has its header's columns, and no hostile markup is live."""
    columns = None
    for line in text.split("\n"):
        if not line.startswith("|"):
            columns = None
            continue
        count = len(_UNESCAPED_PIPE.findall(line))
        columns = columns or count
        assert count == columns, line
    live = _CODE_SPAN.sub("", text)
    for markup in ("<script", "</script", "<!--", "<img"):
        assert markup not in live


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "{0}", "-f", "markdown", "--by", "tenant"],
        ["analyze", "{0}", "{1}", "-f", "markdown"],
        ["compare", "{0}", "{1}", "-f", "markdown"],
        ["check", "{0}", "--slo", "ttft.p99<=1s", "--allow-inconclusive", "-f", "markdown"],
    ],
    ids=["by", "invalid ids", "compare", "check"],
)
def test_markdown_tables_keep_their_columns(traces: list[str], args: list[str]) -> None:
    text = _run(*(a.format(*traces) for a in args))
    assert "|" in text
    _assert_markdown_safe(text)


# ------------------------------------------------------------------------ JUnit, JSON
def test_junit_is_valid_xml(traces: list[str]) -> None:
    rules = ["--slo", "ttft.p99<=1s", "--slo", "e2e.p50>0ms", "--allow-inconclusive"]
    text = _run("check", traces[0], *rules, "-f", "junit")
    suites = ET.fromstring(text)
    assert len(suites.findall(".//testcase")) == 2


def test_json_says_every_string_back(traces: list[str]) -> None:
    doc = json.loads(_run("analyze", traces[0], "--by", "tenant", "-f", "json"))
    assert doc["inputs"] == [traces[0]]
    assert {g["value"] for g in doc["by"]["groups"]} == set(HOSTILE)
    worst = doc["formula"]["per_request"]["worst"]
    assert worst and {w["request_id"] for w in worst} <= set(HOSTILE)
