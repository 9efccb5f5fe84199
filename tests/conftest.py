"""Builders that write request lifecycles in one line, in milliseconds.

``make_request("r1", arrival=0, admission=30, first=80, ticks=[85, 90], complete=90)``
gives the canonical event rows of one request; ``events(...)`` turns rows into a frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl
import pytest

MS = 1_000_000

Row = dict[str, Any]


def make_request(
    rid: str | int,
    *,
    arrival: float | None = 0,
    admission: float | Sequence[float] | None = None,
    first: float | None = None,
    ticks: Iterable[float] = (),
    tokens: Sequence[int] | None = None,
    preempt: Sequence[float] = (),
    complete: float | None = None,
    cancel: float | None = None,
    release: float | None = None,
    prompt_tokens: int | None = None,
    output_tokens: int | None = None,
    **attributes: Any,
) -> list[Row]:
    """Event rows of one request; times in ms, stored as integer ns."""
    rows: list[Row] = []

    def add(event: str, t: float, **extra: Any) -> None:
        rows.append({"request_id": rid, "event": event, "ts": round(t * MS), **extra})

    if arrival is not None:
        add("arrival", arrival, prompt_tokens=prompt_tokens, **attributes)
    admissions = [admission] if isinstance(admission, (int, float)) else list(admission or [])
    for t in admissions:
        add("admission", t)
    for t in preempt:
        add("preemption", t)
    tick_times = ([first] if first is not None else []) + list(ticks)
    chunk = list(tokens) if tokens is not None else [1] * len(tick_times)
    for i, t in enumerate(tick_times):
        kind = "first_token" if i == 0 and first is not None else "token"
        add(kind, t, tokens=chunk[i])
    if complete is not None:
        add("completion", complete, output_tokens=output_tokens)
    if cancel is not None:
        add("cancellation", cancel)
    if release is not None:
        add("release", release)
    return rows


SCHEMA = {
    "request_id": pl.String,
    "event": pl.String,
    "ts": pl.Int64,
    "tokens": pl.Int64,
    "prompt_tokens": pl.Int64,
    "output_tokens": pl.Int64,
}


def events(*requests: list[Row], id_type: type[pl.DataType] = pl.String) -> pl.DataFrame:
    rows = [row for request in requests for row in request]
    extra = sorted({k for row in rows for k in row} - set(SCHEMA))
    schema = {**SCHEMA, "request_id": id_type, **{k: pl.String for k in extra}}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def worked_example_rows() -> list[Row]:
    """The lesson's worked example: arrival 0, admission 30, first token 80, then 100
    tokens 5 ms apart (last at 580 ms)."""
    return make_request(
        "r1",
        arrival=0,
        admission=30,
        first=80,
        ticks=[80 + 5 * i for i in range(1, 101)],
        complete=580,
        prompt_tokens=512,
        output_tokens=101,
    )


@pytest.fixture
def worked_example() -> pl.DataFrame:
    return events(worked_example_rows())
