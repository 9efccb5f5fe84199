"""Workloads: the synthetic generator, the real-trace readers and their errors."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from servetrace.errors import InputError, UsageError
from servetrace.sim.readers import read_azure_2023, read_mooncake, read_workload
from servetrace.sim.synthetic import LengthDistribution, synthetic_workload
from servetrace.sim.workloads import WORKLOAD_SCHEMA, head, scale_rate

DATA = Path(__file__).resolve().parents[1] / "data" / "workloads"
AZURE = DATA / "azure_conv_2023_head300.csv"
MOONCAKE = DATA / "mooncake_conversation_head300.jsonl"
S = 1_000_000_000


# --------------------------------------------------------------------------- Azure


def test_azure_slice_exact_values() -> None:
    wl = read_azure_2023(AZURE)
    assert wl.schema == pl.Schema(WORKLOAD_SCHEMA)
    assert wl.height == 299
    # Hand-checked against lines 2, 3 and 300 of the file (see PROVENANCE.md).
    assert wl.row(0) == ("r0000", 0, 374, 44)
    assert wl.row(1) == ("r0001", 4_314_579_000, 396, 109)  # 50.9951690 - 46.6805900 s
    assert wl.row(-1) == ("r0298", 83_797_671_000, 1147, 413)  # 18:17:10.4782610
    assert wl["arrival_ns"].is_sorted()


def test_azure_timestamps_are_exact_to_the_tick(tmp_path: Path) -> None:
    # 100 ns apart, far from the epoch: float seconds would lose these ticks.
    path = tmp_path / "ticks.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
        "2223-11-16 18:15:46.6805900,1,1\r\n"
        "2223-11-16 18:15:46.6805901,2,2\r\n"
        "2223-11-16 18:15:46.6805903,3,3\r\n"
        "2223-11-17 00:00:00.0000000,4,4"
    )
    wl = read_azure_2023(path)
    assert wl["arrival_ns"].to_list() == [0, 100, 300, 20_653_319_410_000]
    # Agrees with Polars' own exact parser on the real slice.
    raw = pl.read_csv(AZURE, infer_schema=False)
    ns = raw["TIMESTAMP"].str.strptime(pl.Datetime("ns"), "%Y-%m-%d %H:%M:%S%.f").cast(pl.Int64)
    assert read_azure_2023(AZURE)["arrival_ns"].to_list() == (ns - ns[0]).to_list()


def test_azure_reader_handles_missing_final_newline_and_crlf() -> None:
    data = AZURE.read_bytes()
    assert b"\r\n" in data and not data.endswith(b"\n")
    assert read_azure_2023(AZURE).height == data.count(b"\n")  # 300 lines, header + 299


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.68,1\n", "missing column.*GeneratedTokens"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n"
            "16/11/2023 18:15,3,4\n",
            r"line 3: field 'TIMESTAMP' is not a timestamp",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 25:15:46.68,1,2\n",
            r"line 2: field 'TIMESTAMP'",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n"
            "2023-11-16 18:15:47.68,-5,2\n",
            r"line 3: field 'ContextTokens' is not a whole number.*'-5'",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2.5\n",
            r"line 2: field 'GeneratedTokens'",
        ),
    ],
)
def test_azure_malformed_files_are_input_errors(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=match) as info:
        read_azure_2023(path)
    assert str(path) in info.value.message


# --------------------------------------------------------------------------- Mooncake


def test_mooncake_slice_exact_values_and_ties() -> None:
    wl = read_mooncake(MOONCAKE)
    assert wl.height == 300
    assert wl.select(*WORKLOAD_SCHEMA).schema == pl.Schema(WORKLOAD_SCHEMA)
    assert wl.schema["prefix_blocks"] == pl.List(pl.Int64)
    # Lines 1-10 all arrive at 0 ms: ties are kept, in file order.
    first10 = wl.head(10)
    assert first10["arrival_ns"].to_list() == [0] * 10
    assert first10["request_id"].to_list() == [f"r{i:04d}" for i in range(10)]
    assert wl.row(0)[:4] == ("r0000", 0, 6758, 500)
    assert wl.row(10)[:4] == ("r0010", 3_000_000_000, 13544, 71)
    assert wl.row(-1)[:4] == ("r0299", 102_000_000_000, 979, 140)
    counts = dict(wl.group_by("arrival_ns").len().iter_rows())
    assert counts[3 * S] == 16 and counts[74_999_000_000] == 16
    # 512 tokens per hash id, one list per request.
    assert (
        wl["prefix_blocks"].list.len().cast(pl.Int64) == (wl["prompt_tokens"] + 511) // 512
    ).all()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (
            '{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1,',
            "line 2: not valid JSON",
        ),
        ('{"timestamp": 0, "input_length": 5}\n', "line 1: missing field 'output_length'"),
        (
            '{"timestamp": 0, "input_length": 5, "output_length": 2}\n\n'
            '{"timestamp": 1.5, "input_length": 5, "output_length": 2}\n',
            r"line 3: field 'timestamp' must be a whole number of milliseconds",
        ),
        ('{"timestamp": 0, "input_length": -1, "output_length": 2}\n', "field 'input_length'"),
        ('{"timestamp": 0, "input_length": "7", "output_length": 2}\n', "field 'input_length'"),
        ("[1, 2]\n", "line 1: expected a JSON object"),
        ("", "no requests"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": "x"}\n', "hash_ids"),
    ],
)
def test_mooncake_malformed_files_are_input_errors(
    tmp_path: Path, content: str, match: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=match) as info:
        read_mooncake(path)
    assert str(path) in info.value.message


def test_mooncake_without_hash_ids(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(
        '{"timestamp": 10, "input_length": 5, "output_length": 2}\n'
        '{"timestamp": 7, "input_length": 6, "output_length": 3}\n'
    )
    wl = read_mooncake(path)
    assert "prefix_blocks" not in wl.columns
    # Sorted by arrival, rebased to the first; ids keep the line order.
    assert wl.rows() == [("r0001", 0, 6, 3), ("r0000", 3_000_000, 5, 2)]


# --------------------------------------------------------------------------- dispatch


def test_read_workload_detects_the_format(tmp_path: Path) -> None:
    assert read_workload(AZURE).equals(read_azure_2023(AZURE))
    assert read_workload(MOONCAKE).equals(read_mooncake(MOONCAKE))
    # By content when the suffix says nothing.
    renamed = tmp_path / "trace.txt"
    renamed.write_bytes(MOONCAKE.read_bytes())
    assert read_workload(renamed).equals(read_mooncake(MOONCAKE))
    assert read_workload(renamed, fmt="mooncake").height == 300


def test_workload_tables_round_trip(tmp_path: Path) -> None:
    wl = synthetic_workload(50, 3.0, seed=5)
    wl.write_parquet(tmp_path / "w.parquet")
    wl.write_csv(tmp_path / "w.csv")
    assert read_workload(tmp_path / "w.parquet").equals(wl)
    assert read_workload(tmp_path / "w.csv").equals(wl)


def test_read_workload_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_workload(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="is a directory"):
        read_workload(tmp_path)
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match="cannot tell the workload format") as info:
        read_workload(odd)
    assert info.value.hint is not None and "azure" in info.value.hint
    with pytest.raises(UsageError, match="unknown workload format"):
        read_workload(AZURE, fmt="sharegpt")
    table = tmp_path / "t.csv"
    table.write_text("request_id,arrival_ns,prompt_tokens,output_tokens\na,0,5,0\n")
    with pytest.raises(InputError, match="'output_tokens' < 1"):
        read_workload(table)


# --------------------------------------------------------------------------- synthetic


def test_synthetic_is_seeded() -> None:
    a = synthetic_workload(200, 5.0, seed=1)
    assert a.equals(synthetic_workload(200, 5.0, seed=1))
    assert not a.equals(synthetic_workload(200, 5.0, seed=2))
    assert a.schema == pl.Schema(WORKLOAD_SCHEMA)
    assert a["arrival_ns"][0] == 0 and a["arrival_ns"].is_sorted()
    assert a["request_id"].n_unique() == 200


def test_synthetic_rate_and_lengths() -> None:
    wl = synthetic_workload(5000, 10.0, seed=3)
    mean_gap = wl["arrival_ns"][-1] / (wl.height - 1)
    assert mean_gap == pytest.approx(S / 10, rel=0.05)
    prompt = LengthDistribution(median=300, sigma=0.5, minimum=10, maximum=2000)
    lengths = synthetic_workload(5000, 10.0, seed=3, prompt=prompt)["prompt_tokens"]
    assert lengths.median() == pytest.approx(300, rel=0.05)
    assert lengths.min() >= 10 and lengths.max() <= 2000


def test_burstiness_changes_arrivals_not_lengths() -> None:
    poisson = synthetic_workload(3000, 10.0, seed=4)
    bursty = synthetic_workload(3000, 10.0, seed=4, burstiness=0.25)
    lengths = ["prompt_tokens", "output_tokens"]
    assert poisson.select(lengths).equals(bursty.select(lengths))

    def cv(wl: pl.DataFrame) -> float:
        gaps = wl["arrival_ns"].diff().drop_nulls().cast(pl.Float64)
        return float(gaps.std() / gaps.mean())  # type: ignore[operator]

    assert cv(poisson) == pytest.approx(1.0, abs=0.1)
    assert cv(bursty) == pytest.approx(2.0, abs=0.3)  # 1 / sqrt(shape)
    with pytest.raises(UsageError, match="burstiness"):
        synthetic_workload(3, 1.0, seed=0, burstiness=0)


def test_transformations() -> None:
    wl = synthetic_workload(100, 2.0, seed=6)
    fast = scale_rate(wl, 2.0)
    assert fast.drop("arrival_ns").equals(wl.drop("arrival_ns"))
    expected = [math.floor(t / 2 + 0.5) for t in wl["arrival_ns"].to_list()]
    assert all(abs(a - b) <= 1 for a, b in zip(fast["arrival_ns"], expected, strict=True))
    assert head(wl, 10).equals(wl.head(10))
    with pytest.raises(UsageError):
        scale_rate(wl, 0)
