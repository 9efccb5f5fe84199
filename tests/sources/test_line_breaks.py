"""JSON Lines are split at line feeds (and CR line ends), never at the Unicode line
separators ``str.splitlines`` also breaks at: U+2028, U+2029 and U+0085 are valid raw
inside a JSON string, so a record holding one is still one record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.sources.reading import iter_json_lines

runner = CliRunner()
SEPARATORS = ("\u2028", "\u2029", "\u0085")


@pytest.mark.parametrize("separator", SEPARATORS)
def test_json_lines_keep_a_unicode_separator_inside_a_string(
    tmp_path: Path, separator: str
) -> None:
    path = tmp_path / "t.jsonl"
    text = f'{{"a": "x{separator}y"}}\n\n{{"a": "z"}}\n'
    path.write_text(text, encoding="utf-8")
    assert list(iter_json_lines(path)) == [(1, {"a": f"x{separator}y"}), (3, {"a": "z"})]


def test_json_lines_with_cr_line_ends_are_still_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\r{"a": 2}\r\n{"a": 3}\r')
    assert [record for _, record in iter_json_lines(path)] == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_a_broken_line_after_a_separator_is_named_by_its_line_feed_count(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": "x\u2028y"}\n{"a": \n', encoding="utf-8")
    with pytest.raises(Exception, match="line 2: not valid JSON"):
        list(iter_json_lines(path))


def test_request_table_in_json_lines_with_a_separator_in_a_field(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    rows = [
        {"rid": 1, "t0": 10.0, "ttft": 0.25, "e2e": 1.25, "out": 5, "prompt": "a\u2028b"},
        {"rid": 2, "t0": 11.0, "ttft": 0.5, "e2e": 2.5, "out": 9, "prompt": "c\u2029d"},
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    columns = ["request_id=rid", "arrival=t0", "ttft=ttft", "e2e=e2e", "output_tokens=out"]
    flags = [part for column in columns for part in ("--column", column)]
    result = runner.invoke(
        app, ["analyze", str(path), "--from", "requests", *flags, "--format", "json"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["accounting"]["requests_valid"] == 2
