"""Step files: the canonical layout in each file form, Vidur's batches, the rules every
format obeys (bad files → one line naming file, record and rule), and detection."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from servetrace.errors import InputError
from servetrace.sources.steps.detect import detect_step_format
from servetrace.sources.steps.formats import read_steps
from servetrace.sources.steps.schema import STEP_SCHEMA

VIDUR = Path(__file__).parent.parent / "data" / "vidur"
STEPS = VIDUR / "steps"
VLLM = STEPS / "synthetic_arxiv_poisson_qps2.0_n1000__vllm_batches.csv.gz"

GOOD_CSV = (
    "step,replica,ts_start,ts_end,prefill_requests,prefill_tokens,decode_requests,"
    "decode_tokens,request_ids\n"
    "0,0,100,200,1,512,0,0,a\n"
    "1,0,200,230,0,0,2,2,a;b\n"
    "0,1,150,260,0,0,1,1,c\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_canonical_csv_ids_and_types(tmp_path: Path) -> None:
    steps = read_steps(_write(tmp_path, "s.csv", GOOD_CSV), "canonical")
    frame = steps.frame
    assert frame.schema == pl.Schema(STEP_SCHEMA)
    assert frame["request_ids"].to_list() == [["a"], ["a", "b"], ["c"]]
    assert frame["ts_end"].to_list() == [200, 230, 260]
    assert frame["kv_tokens"].null_count() == 3  # absent optional column: unknown
    assert steps.notes == ()


def test_canonical_parquet_and_jsonl_with_duration(tmp_path: Path) -> None:
    raw = pl.DataFrame(
        {
            "ts_end": [200, 230],
            "duration": [100, 30],
            "prefill_requests": [1, 0],
            "prefill_tokens": [512, 0],
            "decode_requests": [0, 2],
            "decode_tokens": [0, 2],
            "request_ids": [[7], [7, 8]],
        }
    )
    for name in ("s.parquet", "s.jsonl"):
        path = tmp_path / name
        raw.write_parquet(path) if name.endswith("parquet") else raw.write_ndjson(path)
        frame = read_steps(path, "canonical").frame
        assert frame["ts_start"].to_list() == [100, 200]
        assert frame["request_ids"].to_list() == [["7"], ["7", "8"]]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("0,0,100,90,0,0,1,1,a\n", "row 1 (step 0): rule negative_duration"),
        ("0,0,100,200,0,0,1,1,a\n1,0,200,230,0,-1,1,1,a\n", "row 2 (step 1): rule negative_count"),
        ("0,0,100,200,0,0,1,1,a\n1,0,90,95,0,0,1,1,a\n", "row 2 (step 1): rule step_out_of_order"),
        ("3,0,100,200,0,0,1,1,a\n2,0,200,230,0,0,1,1,a\n", "row 2 (step 2): rule step_out_of_"),
    ],
)
def test_bad_steps_name_file_record_rule(tmp_path: Path, body: str, message: str) -> None:
    header = GOOD_CSV.splitlines()[0] + "\n"
    path = _write(tmp_path, "bad.csv", header + body)
    with pytest.raises(InputError) as caught:
        read_steps(path, "canonical")
    assert caught.value.message.startswith(f"{path}: {message}")
    assert "\n" not in caught.value.message


def test_missing_required_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.csv", "ts_end,prefill_tokens\n1,2\n")
    with pytest.raises(InputError, match=r"bad.csv: rule missing_column: no column 'ts_start'"):
        read_steps(path, "canonical")


def test_unparseable_file_names_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.jsonl", '{"ts_end": 1}\n{"ts_end": \n')
    with pytest.raises(InputError, match=r"bad.jsonl: line 2"):
        read_steps(path, "canonical")


def test_overlap_is_a_finding_not_an_error(tmp_path: Path) -> None:
    header = GOOD_CSV.splitlines()[0] + "\n"
    path = _write(tmp_path, "o.csv", header + "0,0,100,200,0,0,1,1,a\n1,0,150,230,0,0,1,1,a\n")
    steps = read_steps(path, "canonical")
    assert steps.frame.height == 2
    assert steps.notes == (
        f"{path}: finding overlapping_steps: 1 steps start before the step above them on "
        "their replica ended (first: row 2 (step 1))",
    )


def test_vidur_batches_with_membership() -> None:
    steps = read_steps(VLLM, "vidur")
    frame = steps.frame
    assert frame.height == 12283
    first = frame.row(0, named=True)
    # batch 0: scheduled_at 0.51003 s… completed_at 0.744796 s, one prefill of 2927 tokens
    assert (first["ts_start"], first["ts_end"]) == (510030144, 744796016)
    assert (first["prefill_requests"], first["prefill_tokens"], first["decode_requests"]) == (
        1,
        2927,
        0,
    )
    assert first["request_ids"] == ["0"]
    # membership agrees with the batch's own counts wherever the batch has members
    sizes = pl.read_csv(gzip.decompress(VLLM.read_bytes()))
    joined = frame.join(sizes.rename({"batch_id": "step"}), on="step")
    assert (joined["prefill_requests"] + joined["decode_requests"] == joined["batch_size"]).all()
    assert (joined["decode_requests"] == joined["num_decode_tokens"]).all()
    # every token tick of the event log is the end of a batch
    ticks = pl.read_parquet(VIDUR / "synthetic_arxiv_poisson_qps2.0_n1000__vllm.parquet").filter(
        pl.col("event").is_in(["first_token", "token"])
    )
    assert ticks["ts"].is_in(frame["ts_end"].implode()).all()


def test_vidur_without_membership(tmp_path: Path) -> None:
    path = tmp_path / "run_batches.csv"
    path.write_text(
        "batch_id,replica_id,scheduled_at,completed_at,batch_size,num_prefill_tokens,"
        "num_decode_tokens\n0,0,0.5,0.75,3,1000,2\n"
    )
    frame = read_steps(path, "vidur").frame
    assert frame.select("ts_start", "ts_end", "prefill_requests", "decode_requests").row(0) == (
        500_000_000,
        750_000_000,
        1,
        2,
    )
    assert frame["request_ids"].to_list() == [None]


def test_detect(tmp_path: Path) -> None:
    assert detect_step_format(VLLM) == "vidur"
    assert detect_step_format(_write(tmp_path, "s.csv", GOOD_CSV)) == "canonical"
    with pytest.raises(InputError, match="not a step file servetrace knows"):
        detect_step_format(_write(tmp_path, "x.csv", "a,b\n1,2\n"))


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("vllm-lines.log", "vllm-log"),
        ("vllm-aligned.log", "vllm-log"),
        ("sglang.log", "sglang-log"),
        ("trtllm-iterations.jsonl", "trtllm-iterations"),
        ("forward-pass.msgpack", "forward-pass"),
    ],
)
def test_each_engine_format_is_told_by_its_first_bytes(name: str, fmt: str) -> None:
    from servetrace.sources.steps.detect import detect_step_format

    engines = Path(__file__).parents[1] / "data" / "engines" / "steps"
    assert detect_step_format(engines / name) == fmt
