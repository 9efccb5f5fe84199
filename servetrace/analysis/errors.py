"""Errored requests: a terminal ``error`` event, counted by its code.

An errored request failed (HTTP 429, a timeout, an engine error); it is not a
cancellation, which is what the client or the server chose to end. Its code is the
request's ``error_code`` attribute when it has one, else its ``error_type``, else
``unknown``. Like cancelled requests, errored ones have an e2e (time to the error) but
are left out of latency statistics, which describe completed requests.
"""

from __future__ import annotations

import polars as pl

ERRORED = "errored"
UNKNOWN_CODE = "unknown"


def error_key(columns: list[str] | tuple[str, ...]) -> pl.Expr:
    """The code an errored request is counted under, as a string."""
    parts: list[pl.Expr] = []
    if "error_code" in columns:
        parts.append(pl.col("error_code").cast(pl.String))
    if "error_type" in columns:
        parts.append(pl.col("error_type").cast(pl.String))
    return pl.coalesce(*parts, pl.lit(UNKNOWN_CODE)) if parts else pl.lit(UNKNOWN_CODE)


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
