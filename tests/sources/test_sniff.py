"""Format detection looks at the first lines, never the whole file: a 327 MB
JSON Lines trace was read whole into Python (677 MB peak) just to learn its format."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from servetrace.sources import registry, sniff
from tests.sources.conftest import AIPERF_CONC8, GENAI_PERF_CONC8


@pytest.fixture
def no_whole_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> str:
        raise AssertionError(f"{path} was read whole")

    monkeypatch.setattr(registry, "read_text", refuse)


def _canonical_lines(count: int) -> bytes:
    return b"".join(
        json.dumps({"request_id": i, "event": "arrival", "ts": i}).encode() + b"\n"
        for i in range(count)
    )


def test_json_lines_are_judged_by_their_first_lines(tmp_path: Path, no_whole_reads: None) -> None:
    path = tmp_path / "t.jsonl"
    # after the first lines, bytes that are not even UTF-8: detection must never see them
    path.write_bytes(_canonical_lines(3) + b"\xff\xfe" * 1000)
    assert registry.detect_format(path) is None
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(gzip.compress(_canonical_lines(50_000)))
    assert registry.detect_format(gz) is None
    assert registry.detect_format(AIPERF_CONC8) == "aiperf"
    raw = AIPERF_CONC8.with_name("profile_export_raw.jsonl.gz")
    assert registry.detect_format(raw) == "aiperf"


def test_not_json_is_not_read_whole(tmp_path: Path, no_whole_reads: None) -> None:
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(b"request_id,event,ts\n1,arrival,0\n"))
    assert registry.detect_format(path) is None


def test_documents_are_still_recognised(tmp_path: Path) -> None:
    assert registry.detect_format(GENAI_PERF_CONC8) == "genai-perf"
    one_line = tmp_path / "doc.json"
    one_line.write_text(json.dumps(json.loads(gzip.decompress(GENAI_PERF_CONC8.read_bytes()))))
    assert registry.detect_format(one_line) == "genai-perf"


def test_json_head_kinds(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"\xef\xbb\xbf" + _canonical_lines(2))
    head = sniff.json_head(path)
    assert head.kind == "lines" and head.first == {"request_id": 0, "event": "arrival", "ts": 0}
    path.write_text('{\n  "a": 1\n}\n')
    assert sniff.json_head(path).kind == "document"
    path.write_text("request_id,event\n")
    assert sniff.json_head(path).kind == "other"
