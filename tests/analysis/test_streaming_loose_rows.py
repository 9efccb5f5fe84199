"""Rows that belong to no request (no request_id, event or ts) never touch a request.

A row without a timestamp is quarantined under ``missing_timestamp`` by the in-memory
and partitioned engines and the request it names is analysed without it. The batched
engine kept such a row with its request, so a null-ts row read after the request had
finished was taken for "a row after the request finished" (``NotTimeOrdered``), and one
read before could decide whether the request was finished. Here every engine, in every
batch size, gives the in-memory answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from servetrace.analysis.dispatch import analyze_paths
from servetrace.analysis.streaming import analyze_streaming
from servetrace.sources.canonical import read_events

MS = 1_000_000
SCHEMA = {
    "request_id": pl.String,
    "event": pl.String,
    "ts": pl.Int64,
    "tokens": pl.Int64,
}


def _row(rid: str | None, event: str | None, ts: int | None, **extra: Any) -> dict[str, Any]:
    return {"request_id": rid, "event": event, "ts": ts, **extra}


def _request(rid: str, start: int, terminal: str, release: bool = False) -> list[dict[str, Any]]:
    rows = [
        _row(rid, "arrival", start * MS),
        _row(rid, "admission", (start + 1) * MS),
        _row(rid, "first_token", (start + 3) * MS, tokens=1),
        _row(rid, "token", (start + 5) * MS, tokens=2),
        _row(rid, terminal, (start + 6) * MS),
    ]
    if release:
        rows.append(_row(rid, "release", (start + 7) * MS))
    return rows


def _log(rows: list[dict[str, Any]], path: Path) -> str:
    frame = pl.DataFrame([{k: r.get(k) for k in SCHEMA} for r in rows], schema=SCHEMA, orient="row")
    frame.write_parquet(path)
    return str(path)


def _quarantine(analysis: Any) -> pl.DataFrame:
    rows = analysis.quarantine_rows.select("request_id", "event", "ts", "tokens", "rule")
    return rows.sort(rows.columns, nulls_last=True)


def _traces() -> dict[str, list[dict[str, Any]]]:
    """Logs in time order with loose rows in the middle of, and after, a request."""
    a, b = _request("a", 0, "completion"), _request("b", 2, "completion")
    ordered = sorted(a + b, key=lambda r: r["ts"])
    cases: dict[str, list[dict[str, Any]]] = {}
    for terminal in ("completion", "cancellation", "error"):
        c = _request("c", 20, terminal)
        rows = sorted(ordered + c, key=lambda r: r["ts"])
        # a's token and completion written without a timestamp, in the middle of the log
        # (while a is open) and again after a has finished.
        middle = [*rows[:3], _row("a", "token", None, tokens=1), *rows[3:]]
        late = [*middle, _row("a", "completion", None), _row("c", terminal, None)]
        cases[f"{terminal}-middle"] = middle
        cases[f"{terminal}-after-end"] = late
    # A null-ts terminal read before the real one must not finish the request early, and
    # a null-ts admission must not make an otherwise unadmitted request look placed.
    early = [_row("a", "completion", None), _row("a", "admission", None), *ordered]
    cases["terminal-first"] = early
    # No event kind, no request id: the same, under their own rules.
    cases["other-loose-rows"] = [
        *ordered[:4],
        _row("a", None, 4 * MS),
        _row(None, "token", 4 * MS, tokens=1),
        *ordered[4:],
        _row("b", None, 50 * MS),
    ]
    # Releases logged: a request is finished only once released.
    released = sorted(
        _request("a", 0, "completion", True) + _request("b", 2, "error", True),
        key=lambda r: r["ts"],
    )
    cases["released"] = [*released[:5], _row("a", "release", None), *released[5:]]
    later = _request("c", 30, "cancellation", True)
    cases["released-after-end"] = [*released, *later[:2], _row("b", "release", None), *later[2:]]
    return cases


TRACES = _traces()


@pytest.mark.parametrize("name", sorted(TRACES))
@pytest.mark.parametrize("batch_rows", [1, 2, 3, 5, 8, 1000])
def test_streamed_equals_in_memory_with_loose_rows(
    tmp_path: Path, name: str, batch_rows: int
) -> None:
    path = _log(TRACES[name], tmp_path / "log.parquet")
    whole = analyze_paths([path])
    streamed = analyze_streaming(read_events([path]), batch_rows=batch_rows)
    assert streamed.requests.equals(whole.requests)
    assert streamed.summary.accounting == whole.summary.accounting
    assert streamed.summary.violations == whole.summary.violations
    assert _quarantine(streamed).equals(_quarantine(whole))


def test_a_null_ts_row_is_quarantined_alone(tmp_path: Path) -> None:
    # The hand answer: a's null-ts rows are missing_timestamp; a, b and c are all valid.
    path = _log(TRACES["completion-after-end"], tmp_path / "log.parquet")
    streamed = analyze_streaming(read_events([path]), batch_rows=1)
    requests = streamed.requests
    assert sorted(requests["request_id"]) == ["a", "b", "c"]
    assert requests["outcome"].to_list() == ["completed"] * 3
    # a: first token at 3 ms, tokens 1 + 2 (the null-ts token is not counted).
    a = requests.filter(pl.col("request_id") == "a").row(0, named=True)
    assert a["ttft_ns"] == 3 * MS and a["output_tokens"] == 3
    quarantine = streamed.quarantine_rows
    assert quarantine.height == 3
    assert set(quarantine["rule"]) == {"missing_timestamp"}
