"""Errored requests: a terminal ``error`` event, counted by its code.

An errored request failed (HTTP 429, a timeout, an engine error); it is not a
cancellation, which is what the client or the server chose to end. Its code is the
request's ``error_code`` attribute when it has one, else its ``error_type``, else
``unknown``. Like cancelled requests, errored ones have an e2e (time to the error) but
are left out of latency statistics, which describe completed requests.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from servetrace.analysis.output_counts import token_sum
from servetrace.stats.describe import describe

ERRORED = "errored"
UNKNOWN_CODE = "unknown"
EXAMPLES_SHOWN = 5


def error_key(columns: list[str] | tuple[str, ...]) -> pl.Expr:
    """The code an errored request is counted under, as a string."""
    parts: list[pl.Expr] = []
    if "error_code" in columns:
        parts.append(pl.col("error_code").cast(pl.String))
    if "error_type" in columns:
        parts.append(pl.col("error_type").cast(pl.String))
    return pl.coalesce(*parts, pl.lit(UNKNOWN_CODE)) if parts else pl.lit(UNKNOWN_CODE)


def error_counts(requests: pl.DataFrame) -> dict[str, int]:
    """``{code: requests}`` over errored requests, most frequent first (ties by code)."""
    errored = requests.filter(pl.col("outcome") == ERRORED)
    if errored.height == 0:
        return {}
    counts = (
        errored.select(error_key(errored.columns).alias("code"))
        .group_by("code")
        .len()
        .sort(["len", "code"], descending=[True, False])
    )
    return {str(code): int(n) for code, n in counts.iter_rows()}


def error_counts_by(requests: pl.DataFrame, column: str) -> dict[Any, dict[str, int]]:
    """``error_counts`` of every value of ``column`` in one pass."""
    errored = requests.filter(pl.col("outcome") == ERRORED)
    out: dict[Any, dict[str, int]] = {}
    if errored.height == 0:
        return out
    counts = (
        errored.select(column, error_key(errored.columns).alias("code"))
        .group_by(column, "code")
        .len()
        .sort([column, "len", "code"], descending=[False, True, False], nulls_last=True)
    )
    for value, code, n in counts.iter_rows():
        out.setdefault(value, {})[str(code)] = int(n)
    return out


def errored_report(requests: pl.DataFrame) -> dict[str, Any]:
    """Count, tokens delivered before the error, time to error (ns) and example ids."""
    errored = requests.filter(pl.col("outcome") == ERRORED)
    ordered = errored.sort("arrival_ns", "request_id", nulls_last=True)
    return {
        "count": errored.height,
        "output_tokens_delivered": token_sum(errored),
        "time_to_error_ns": describe(errored["e2e_ns"]),
        "examples": ordered["request_id"].head(EXAMPLES_SHOWN).to_list(),
    }


def code_label(code: str) -> str:
    """``429`` → ``HTTP 429``; other codes (``-1``, ``TimeoutError``) as they are."""
    try:
        number = int(code)
    except ValueError:
        return code
    return f"HTTP {number}" if 100 <= number <= 599 else f"code {number}"


def errors_phrase(errors: dict[str, int]) -> str:
    """``130 × HTTP 429, 2 × code -1``."""
    return ", ".join(f"{n:,} × {code_label(code)}" for code, n in errors.items())
