"""A text trace is parsed once, with the full-file schema, in memory or spilled to disk.

Before, each query on a lazy text scan parsed the file again (seven passes over a JSONL
for one ``analyze``). The tests check that the source is not read again after
``read_events``, and that every text guarantee (late keys, late type changes, broken
lines named, blank lines, every form identical) holds on both sides of the in-memory
limit: ``spilled`` forces the on-disk Arrow copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from servetrace.errors import InputError
from servetrace.sources import parsed
from servetrace.sources.canonical import read_events
from tests.sources import test_bad_text as bad
from tests.sources import test_forms as forms

JSONL = "".join(
    json.dumps(r) + "\n"
    for r in (
        {"request_id": "a", "event": "arrival", "ts": 0},
        {"request_id": "a", "event": "first_token", "ts": 5, "tokens": 1},
        {"request_id": "a", "event": "completion", "ts": 7, "output_tokens": 1},
    )
)
CSV = "request_id,event,ts,tokens\na,arrival,0,\na,first_token,5,1\na,completion,7,\n"


@pytest.fixture(params=["in memory", "spilled"])
def where(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "spilled":
        monkeypatch.setattr(parsed, "IN_MEMORY_BYTES", 0)
    return str(request.param)


@pytest.mark.parametrize(
    ("name", "text"), [("t.jsonl", JSONL), ("t.csv", CSV)], ids=["jsonl", "csv"]
)
def test_the_source_is_not_read_again_after_read_events(
    tmp_path: Path, where: str, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    trace = read_events([str(path)])
    first = trace.events.collect()
    # Every later query (the analysis, the outputs) reads the parsed copy: a source that
    # changes or disappears afterwards changes nothing.
    path.write_text(text.replace("first_token", "garbage!!"))
    assert trace.events.collect().equals(first)
    path.unlink()
    assert trace.events.collect().equals(first)
    assert first["event"].to_list() == ["arrival", "first_token", "completion"]


def test_a_large_text_file_is_spilled_as_arrow_not_held_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parsed, "IN_MEMORY_BYTES", len(JSONL) - 1)
    path = tmp_path / "t.jsonl"
    path.write_text(JSONL)
    events = read_events([str(path)]).events
    spilled = list(parsed._spill_directory().glob("*.arrow"))
    assert spilled, "the file above the limit is spilled"
    assert any(pl.read_ipc(f).height == 3 for f in spilled)
    assert events.collect().height == 3
    # At the limit or below: nothing more is written.
    monkeypatch.setattr(parsed, "IN_MEMORY_BYTES", len(JSONL))
    before = set(parsed._spill_directory().glob("*.arrow"))
    read_events([str(path)]).events.collect()
    assert set(parsed._spill_directory().glob("*.arrow")) == before


def test_the_spill_directory_is_removed_when_the_process_exits(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(JSONL)
    script = (
        "import sys\n"
        "from servetrace.sources import parsed\n"
        "from servetrace.sources.canonical import read_events\n"
        "parsed.IN_MEMORY_BYTES = 0\n"
        "assert read_events([sys.argv[1]]).events.collect().height == 3\n"
        "print(parsed._spill_directory())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    directory = Path(done.stdout.strip())
    assert directory.name.startswith("servetrace-parsed-")
    assert not directory.exists()


def test_a_spill_that_fails_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parsed, "IN_MEMORY_BYTES", 0)
    path = tmp_path / "t.jsonl"
    path.write_text(JSONL + "5\n")  # a scalar line: Polars refuses it while spilling
    before = set(parsed._spill_directory().glob("*"))
    with pytest.raises(InputError, match="line 4"):
        read_events([str(path)])
    assert set(parsed._spill_directory().glob("*")) == before


@pytest.mark.parametrize(
    "case",
    [
        bad.test_invalid_utf8_csv_names_line_and_column,
        bad.test_unterminated_quote_names_the_line_it_opens_on,
        bad.test_jsonl_line_that_is_a_scalar,
        bad.test_list_typed_event_column,
        bad.test_field_that_becomes_a_list_late_names_both_lines,
        bad.test_csv_ending_in_blank_lines_has_no_phantom_row,
        bad.test_cr_only_line_endings,
        forms.test_jsonl_key_first_seen_after_line_10500_is_read,
        forms.test_integer_ids_written_as_text_sort_like_integers,
    ],
    ids=lambda case: case.__name__,
)
def test_text_guarantees_hold_in_memory_and_spilled(
    tmp_path: Path, where: str, case: Callable[[Path], None]
) -> None:
    case(tmp_path)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_late_type_change_is_read_in_memory_and_spilled(
    tmp_path: Path, where: str, suffix: str
) -> None:
    forms.test_id_that_becomes_text_after_line_10000_is_read(tmp_path, suffix)


@pytest.mark.slow
def test_every_form_gives_the_identical_report_when_spilled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = forms.write_every_form(tmp_path)
    reference = forms._report(*written["parquet"])
    monkeypatch.setattr(parsed, "IN_MEMORY_BYTES", 0)
    reports: dict[str, Any] = {name: forms._report(p, f) for name, (p, f) in written.items()}
    assert all(report == reference for report in reports.values())
