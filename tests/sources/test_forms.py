"""The same events in every form a trace can take give the identical report.

One trace is built once and written as Parquet, CSV, JSON Lines, gzip JSON Lines, a
directory of Parquet parts, integer milliseconds, ISO date-times and float seconds. Keys
are written only where they apply, so in JSON Lines ``output_tokens`` (on completion rows,
which come last) first appears after line 10,500, and ``prompt_tokens`` after line 100 of
the gzip file: a reader that guesses the schema from the first lines drops them.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from servetrace.cli import app

runner = CliRunner()
MS = 1_000_000
REQUESTS = 1_320


def _rows() -> list[dict[str, Any]]:
    """Requests on a whole-millisecond grid; the ticks-then-completions order puts every
    ``output_tokens`` key after line 10,500 and tied times within a request."""
    early: list[dict[str, Any]] = []
    late: list[dict[str, Any]] = []
    for i in range(REQUESTS):
        t0 = 3 * i
        policy = ("fcfs", "sjf")[i % 2]
        early.append(
            {"request_id": i, "event": "arrival", "ts": t0, "prompt_tokens": 10 + i % 7}
            | {"policy": policy}
        )
        early.append({"request_id": i, "event": "admission", "ts": t0 + 1 + i % 3})
        first = t0 + 5 + i % 4
        early.append({"request_id": i, "event": "first_token", "ts": first, "tokens": 1})
        for k in range(1, 6):
            # chunks of two tokens on some requests: TPOT uses output_tokens, ITL the gaps
            early.append(
                {"request_id": i, "event": "token", "ts": first + k * (1 + i % 5), "tokens": 2}
            )
        end = first + 5 * (1 + i % 5)
        late.append(
            {"request_id": i, "event": "completion", "ts": end, "output_tokens": 11 + i % 3}
        )
    return early + late


ROWS = _rows()
assert len(ROWS) - REQUESTS > 10_500  # the first completion row is after line 10,500


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    columns = ["request_id", "event", "ts", "tokens", "prompt_tokens", "output_tokens", "policy"]
    return pl.DataFrame(
        [{c: r.get(c) for c in columns} for r in rows],
        schema={
            "request_id": pl.Int64,
            "event": pl.String,
            "ts": pl.Int64,
            "tokens": pl.Int64,
            "prompt_tokens": pl.Int64,
            "output_tokens": pl.Int64,
            "policy": pl.String,
        },
    )


def _jsonl(rows: list[dict[str, Any]], ts: Any = lambda ms: ms * MS) -> bytes:
    """One object per line, with only the keys the row has (no nulls)."""
    return "".join(json.dumps(r | {"ts": ts(r["ts"])}) + "\n" for r in rows).encode()


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def write_every_form(folder: Path) -> dict[str, tuple[Path, list[str]]]:
    """Every form of the trace, with the flags it needs."""
    ns = _frame(ROWS).with_columns(pl.col("ts") * MS)
    forms: dict[str, tuple[Path, list[str]]] = {}

    def add(name: str, path: Path, *flags: str) -> Path:
        forms[name] = (path, list(flags))
        return path

    ns.write_parquet(add("parquet", folder / "t.parquet"))
    ns.write_csv(add("csv", folder / "t.csv"))
    add("jsonl", folder / "t.jsonl").write_bytes(_jsonl(ROWS))
    # gzip JSON Lines with prompt_tokens first seen after line 100
    head = [n for n, r in enumerate(ROWS) if "prompt_tokens" not in r][:150]
    taken = set(head)
    shuffled = [ROWS[n] for n in head] + [r for n, r in enumerate(ROWS) if n not in taken]
    add("jsonl.gz", folder / "t.jsonl.gz").write_bytes(gzip.compress(_jsonl(shuffled)))
    parts = folder / "parts"
    parts.mkdir()
    for n, part in enumerate(ns.iter_slices(ns.height // 3 + 1)):
        part.write_parquet(parts / f"part-{n}.parquet")
    add("directory", parts)
    _frame(ROWS).write_csv(add("integer ms", folder / "ms.csv", "--time-unit", "ms"))
    iso = _frame(ROWS).with_columns(pl.col("ts").map_elements(_iso, return_dtype=pl.String))
    iso.write_csv(add("ISO text", folder / "iso.csv"))
    add("float seconds", folder / "s.jsonl").write_bytes(_jsonl(ROWS, lambda ms: ms / 1000))
    return forms


def _report(path: Path, flags: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, ["analyze", str(path), "--format", "json", *flags])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    report.pop("inputs", None)  # the only thing that may differ: the file names
    return report


@pytest.mark.slow
def test_late_keys_and_every_form_give_the_identical_report(tmp_path: Path) -> None:
    forms = write_every_form(tmp_path)
    reference = _report(*forms["parquet"])
    assert reference["outcomes"]["completed"] == REQUESTS
    for name, (path, flags) in forms.items():
        assert _report(path, flags) == reference, name


@pytest.mark.slow
def test_by_grouping_is_identical_in_every_form(tmp_path: Path) -> None:
    forms = write_every_form(tmp_path)
    outputs = {}
    for name, (path, flags) in forms.items():
        result = runner.invoke(
            app, ["analyze", str(path), "--format", "json", "--by", "policy", *flags]
        )
        assert result.exit_code == 0, (name, result.stderr)
        report = json.loads(result.stdout)
        report.pop("inputs", None)
        outputs[name] = report
    assert all(report == outputs["parquet"] for report in outputs.values())


def test_jsonl_key_first_seen_after_line_10500_is_read(tmp_path: Path) -> None:
    from servetrace.sources.canonical import read_events

    path = tmp_path / "t.jsonl"
    path.write_bytes(_jsonl(ROWS))
    events = read_events([str(path)]).events.collect()
    done = events.filter(pl.col("event") == "completion")
    assert done["output_tokens"].null_count() == 0
    assert done["output_tokens"].sum() == sum(11 + i % 3 for i in range(REQUESTS))


def test_gzip_jsonl_key_first_seen_after_line_100_is_read(tmp_path: Path) -> None:
    from servetrace.sources.canonical import read_events

    rows = [{"request_id": i, "event": "arrival", "ts": i} for i in range(150)]
    rows.append({"request_id": 150, "event": "arrival", "ts": 150, "prompt_tokens": 7})
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(_jsonl(rows, lambda v: v)))
    events = read_events([str(path)]).events.collect()
    assert events["prompt_tokens"].to_list()[-2:] == [None, 7]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_id_that_becomes_text_after_line_10000_is_read(tmp_path: Path, suffix: str) -> None:
    """Never accepted early and refused late: every id is read, as text."""
    rows = [{"request_id": i, "event": "arrival", "ts": i} for i in range(10_050)]
    rows.append({"request_id": "req-x", "event": "arrival", "ts": 10_050})
    path = tmp_path / f"t{suffix}"
    if suffix == ".jsonl":
        path.write_bytes(_jsonl(rows, lambda v: v))
    else:
        lines = "".join(f"{r['request_id']},arrival,{r['ts']}\n" for r in rows)
        path.write_text("request_id,event,ts\n" + lines)
    result = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["accounting"]["rows"] == 10_051


def test_integer_ids_written_as_text_sort_like_integers(tmp_path: Path) -> None:
    """CSV has no integer type of its own: ids 2, 10 must not sort as "10" < "2"."""
    from servetrace.sources.canonical import read_events

    path = tmp_path / "t.csv"
    path.write_text("request_id,event,ts\n10,arrival,1\n2,arrival,2\n007,arrival,3\n")
    assert read_events([str(path)]).events.collect()["request_id"].dtype == pl.String
    path.write_text("request_id,event,ts\n10,arrival,1\n2,arrival,2\n")
    assert read_events([str(path)]).events.collect()["request_id"].dtype == pl.Int64
