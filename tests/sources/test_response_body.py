"""vLLM's per-request figures in the response bodies AIPerf's raw export and GenAI-Perf's
profile export keep: canonical columns, unknown (null) where a body has none, refused when
not a number ≥ 0, and absent from the exports that carry none."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app
from servetrace.errors import InputError
from servetrace.sources import aiperf, genai_perf, response_body

DATA = Path(__file__).resolve().parents[1] / "data"
SPEC = DATA / "response_body" / "aiperf_spec_decode" / "profile_export_raw.jsonl"
PLAIN = DATA / "response_body" / "genai_perf_metrics" / "profile_export.json"
MS = 1_000_000

runner = CliRunner()


def _per_request(events: pl.DataFrame) -> dict[str, dict[str, object]]:
    """Each request's body figures; a column no request has is not emitted (None here)."""
    rows = events.filter(pl.col("event") == "arrival").select(
        "request_id",
        *(
            pl.col(c) if c in events.columns else pl.lit(None, pl.Int64).alias(c)
            for c in response_body.COLUMNS
        ),
    )
    return {row.pop("request_id"): row for row in rows.iter_rows(named=True)}


def test_aiperf_raw_bodies_become_columns() -> None:
    rows = _per_request(aiperf.read(SPEC).events)
    assert rows["a"] == {
        "cached_tokens": 32,
        "server_queue_wait_ns": 5 * MS,
        "server_prefill_ns": 20 * MS,
        "server_decode_ns": 27 * MS,
        "server_tpot_ns": 3 * MS,
        "spec_steps": 3,
        "spec_accepted_tokens": 6,
        "spec_draft_tokens": 9,
    }
    assert rows["b"]["server_queue_wait_ns"] == 40 * MS and rows["b"]["cached_tokens"] == 0
    assert rows["c"]["server_tpot_ns"] == 5_600_000 and rows["c"]["spec_accepted_tokens"] == 2
    # Cancelled before its usage chunk: unknown, not 0.
    assert set(rows["d"].values()) == {None}


def test_aiperf_raw_bodies_are_named_as_the_servers() -> None:
    warnings = " ".join(aiperf.read(SPEC).warnings)
    assert "3 of 4 requests carry vLLM's per-request figures" in warnings
    assert "not this client trace's queue wait" in warnings


def test_genai_perf_bodies_become_columns() -> None:
    rows = _per_request(genai_perf.read(PLAIN).events)
    p, q = rows["0"], rows["1"]
    assert (p["cached_tokens"], p["server_queue_wait_ns"], p["server_tpot_ns"]) == (
        16,
        12_500_000,
        9_750_000,
    )
    # A one-token answer: vLLM's mean_itl_ms is null (left out of the streamed chunk),
    # its generation time 0 (first token = last token), no speculative decoding.
    assert q["server_tpot_ns"] is None and q["server_decode_ns"] == 0
    assert q["spec_steps"] is None and q["server_prefill_ns"] == 22 * MS
    assert "spec_steps" not in genai_perf.read(PLAIN).events.columns


def test_exports_without_bodies_gain_no_column() -> None:
    run = aiperf.read(DATA / "peers" / "aiperf_s1_conc8" / "profile_export.jsonl.gz")
    assert not set(response_body.COLUMNS) & set(run.events.columns)
    done = genai_perf.read(DATA / "peers" / "genai_perf_s1_conc8" / "profile_export.json.gz")
    assert not set(response_body.COLUMNS) & set(done.events.columns)


def _with_metrics(tmp_path: Path, **metrics: object) -> Path:
    lines = SPEC.read_text().splitlines()
    record = json.loads(lines[0])
    usage = json.loads(record["responses"][-2]["packets"][0]["value"])
    usage["metrics"].update(metrics)
    record["responses"][-2]["packets"][0]["value"] = json.dumps(usage)
    path = tmp_path / "profile_export_raw.jsonl"
    path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    return path


# vLLM's own example of ``metrics.speculative_decoding`` (vllm-project/vllm
# docs/features/speculative_decoding/acceptance_metrics.md at
# 02cf515f0b62e6fc36d5ff8fb9b486a30e8dbe08): every count differs from the others and from
# ``num_spec_tokens``, so a field read from the wrong name cannot pass.
VLLM_SPEC_EXAMPLE = {
    "mean_acceptance_length": 1.2325581395348837,
    "draft_acceptance_rate": 0.07751937984496124,
    "acceptance_histogram": [39, 1, 0, 3],
    "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]},
    "num_spec_steps": 43,
    "num_accepted_draft_tokens": 10,
    "num_draft_tokens": 129,
    "num_spec_tokens": 3,
}


def test_vllms_spec_decode_example_reads_its_three_counts(tmp_path: Path) -> None:
    path = _with_metrics(tmp_path, speculative_decoding=VLLM_SPEC_EXAMPLE)
    a = _per_request(aiperf.read(path).events)["a"]
    steps, accepted, drafted = a["spec_steps"], a["spec_accepted_tokens"], a["spec_draft_tokens"]
    assert (steps, accepted, drafted) == (43, 10, 129)
    # vLLM's two derived figures follow from exactly these counts.
    assert isinstance(steps, int) and isinstance(accepted, int) and isinstance(drafted, int)
    assert 1 + accepted / steps == VLLM_SPEC_EXAMPLE["mean_acceptance_length"]
    assert accepted / drafted == VLLM_SPEC_EXAMPLE["draft_acceptance_rate"]


@pytest.mark.parametrize(
    ("value", "rule"),
    [(-1.0, "a finite number of ms ≥ 0"), ("soon", "a finite number of ms ≥ 0")],
)
def test_a_bad_time_names_file_record_and_field(tmp_path: Path, value: object, rule: str) -> None:
    path = _with_metrics(tmp_path, queue_time_ms=value)
    with pytest.raises(InputError) as caught:
        aiperf.read(path)
    message = str(caught.value)
    assert str(path) in message and "record 0 (line 1)" in message
    assert f"field 'metrics.queue_time_ms' must be {rule}" in message


def test_a_bad_count_exits_3_with_one_line(tmp_path: Path) -> None:
    lines = SPEC.read_text().splitlines()
    record = json.loads(lines[1])
    usage = json.loads(record["responses"][-2]["packets"][0]["value"])
    usage["metrics"]["speculative_decoding"]["num_spec_steps"] = 2.5
    record["responses"][-2]["packets"][0]["value"] = json.dumps(usage)
    path = tmp_path / "profile_export_raw.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    done = runner.invoke(app, ["analyze", str(path)])
    assert done.exit_code == 3
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert "record 1 (line 2)" in errors[0]
    assert "'metrics.speculative_decoding.num_spec_steps' must be a whole number ≥ 0" in errors[0]
