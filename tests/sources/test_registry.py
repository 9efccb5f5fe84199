"""The importer registry: detection by content, import_file, wrong or unknown formats,
and the invariants every importer keeps (no fabricated events, one schema)."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from servetrace.errors import ExitCode, InputError, UsageError
from servetrace.settings import IMPORT_FORMATS
from servetrace.sources.registry import FORMATS, ImportResult, detect_format, import_file

from .conftest import (
    AIPERF_CANCEL20,
    AIPERF_CONC8,
    AIPERF_RUN1,
    GENAI_PERF_CONC8,
    GUIDELLM_CONC8,
    LLMPERF,
    PEERS,
    VLLM_DEEPSEEK_INF,
    VLLM_LLAMA_QPS4,
    assert_lifecycle_is_plausible,
)

FILES = {
    "aiperf-run1": (AIPERF_RUN1, "aiperf"),
    "aiperf-conc8": (AIPERF_CONC8, "aiperf"),
    "aiperf-cancel20-raw": (AIPERF_CANCEL20.with_name("profile_export_raw.jsonl.gz"), "aiperf"),
    "genai-perf": (GENAI_PERF_CONC8, "genai-perf"),
    "vllm-llama": (VLLM_LLAMA_QPS4, "vllm-bench"),
    "vllm-deepseek": (VLLM_DEEPSEEK_INF, "vllm-bench"),
    "guidellm": (GUIDELLM_CONC8, "guidellm"),
    "llmperf-lepton": (LLMPERF / "lepton_7b.json", "llmperf"),
}
COMMON = {
    "request_id": pl.Utf8,
    "event": pl.Utf8,
    "ts": pl.Int64,
    "tokens": pl.Int64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "source": pl.Utf8,
    "tool": pl.Utf8,
    "ticks_available": pl.Boolean,
    "arrival_known": pl.Boolean,
    "terminal_known": pl.Boolean,
    "error_code": pl.Int64,
    "error": pl.Utf8,
}


@pytest.fixture(scope="module", params=list(FILES), ids=list(FILES))
def imported(request: pytest.FixtureRequest) -> tuple[ImportResult, str]:
    path, fmt = FILES[request.param]
    return import_file(path), fmt


def test_registry_lists_every_format_the_cli_offers() -> None:
    # --from and `servetrace import` list IMPORT_FORMATS without loading the importers.
    assert tuple(FORMATS) == IMPORT_FORMATS
    assert "requests" in FORMATS  # one row per request, columns named with --column


@pytest.mark.parametrize("key", list(FILES))
def test_detect_format_by_content(key: str) -> None:
    path, fmt = FILES[key]
    assert detect_format(path) == fmt


def test_import_file_detects_and_reports(imported: tuple[ImportResult, str]) -> None:
    result, fmt = imported
    assert result.format == fmt
    assert result.records > 0
    assert result.tool_summary, "every copied file has the tool's own summary"
    assert result.events["tool"].unique().to_list() == [fmt]


def test_every_import_has_the_common_schema(imported: tuple[ImportResult, str]) -> None:
    result, _ = imported
    for name, dtype in COMMON.items():
        assert result.events.schema[name] == dtype, name
    assert list(result.events.columns[: len(COMMON)]) == list(COMMON)


def test_no_fabricated_events(imported: tuple[ImportResult, str]) -> None:
    result, _ = imported
    assert_lifecycle_is_plausible(result.events)
    arrivals = result.events.filter(pl.col("event") == "arrival")
    assert arrivals.height == result.records
    if result.request_level:
        ticks = result.events.filter(pl.col("event").is_in(["first_token", "token"]))
        assert ticks.group_by("request_id").len()["len"].max() == 1
    assert result.events["ticks_available"].unique().to_list() == [not result.request_level]
    assert result.events["arrival_known"].unique().to_list() == [result.arrival_known]


def test_attributes_are_constant_per_request(imported: tuple[ImportResult, str]) -> None:
    result, _ = imported
    attributes = result.events.columns[6:]
    varying = (
        result.events.group_by("request_id")
        .agg(pl.col(c).n_unique() for c in attributes)
        .select(pl.all().exclude("request_id").max())
    )
    assert all(value == 1 for value in varying.row(0))


def test_unknown_format_names_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("request_id,event,ts\n1,arrival,0\n")
    assert detect_format(path) is None
    with pytest.raises(InputError) as caught:
        import_file(path)
    assert "trace.csv" in caught.value.message
    assert caught.value.hint is not None
    assert "--from" in caught.value.hint and "vllm-bench" in caught.value.hint
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT


def test_other_json_lines_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"request_id": 1, "event": "arrival", "ts": 0}\n' * 3)
    assert detect_format(path) is None


def test_unknown_json_names_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"hello": "world"}')
    with pytest.raises(InputError, match=r"other\.json: not a file servetrace can import"):
        import_file(path)


@pytest.mark.parametrize(
    ("summary", "points_to"),
    [
        (PEERS / "aiperf_s1_conc8" / "profile_export_aiperf.json", "profile_export.jsonl"),
        (PEERS / "genai_perf_s1_conc8" / "profile_export_genai_perf.json", "profile_export.json"),
        (LLMPERF.parent / "summary" / "lepton_7b.json", "individual_responses"),
    ],
    ids=["aiperf", "genai-perf", "llmperf"],
)
def test_a_summary_file_points_to_the_per_request_file(summary: Path, points_to: str) -> None:
    with pytest.raises(InputError) as caught:
        import_file(summary)
    assert caught.value.hint is not None and points_to in caught.value.hint


@pytest.mark.parametrize(
    ("path", "wrong", "right"),
    [
        (VLLM_LLAMA_QPS4, "llmperf", "vllm-bench"),
        (GUIDELLM_CONC8, "genai-perf", "guidellm"),
        (AIPERF_RUN1, "vllm-bench", "aiperf"),
        (LLMPERF / "lepton_7b.json", "aiperf", "llmperf"),
        (GENAI_PERF_CONC8, "guidellm", "genai-perf"),
    ],
)
def test_wrong_format_names_the_file_and_suggests_the_right_one(
    path: Path, wrong: str, right: str
) -> None:
    with pytest.raises(InputError) as caught:
        import_file(path, wrong)
    assert path.name in caught.value.message
    assert caught.value.hint == f"it looks like {right} output: use --from {right}"
    assert caught.value.exit_code == ExitCode.UNREADABLE_INPUT


def test_unknown_format_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as caught:
        import_file(VLLM_LLAMA_QPS4, "tgi")
    assert caught.value.exit_code == ExitCode.USAGE
    assert caught.value.hint is not None and "aiperf" in caught.value.hint


def test_truncated_json_names_file_line_and_column(tmp_path: Path) -> None:
    text = gzip.decompress(GUIDELLM_CONC8.read_bytes())
    path = tmp_path / "benchmarks.json"
    path.write_bytes(text[: len(text) // 3])
    with pytest.raises(InputError) as caught:
        import_file(path)
    message = caught.value.message
    assert message.startswith(f"{path}: not valid JSON at line ")
    assert "column" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nothing\.json: no such file"):
        import_file(tmp_path / "nothing.json", "llmperf")


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        import_file(tmp_path, "guidellm")


def test_binary_garbage(tmp_path: Path) -> None:
    path = tmp_path / "garbage.json"
    path.write_bytes(b"\xff\xfe\x00\x01garbage")
    with pytest.raises(InputError, match=r"garbage\.json: not UTF-8"):
        import_file(path)
