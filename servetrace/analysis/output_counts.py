"""Output-token counts a trace does not know: *unknown*, never a guess of 1.

In a trace with per-token times a request's output count is the authoritative count on
its terminal row, else Σ ``tokens`` over its ticks (DESIGN §2). A *request-level* trace
(``ticks_available=False``) has one synthetic tick, the first token, so Σ ``tokens`` is 1
by construction and says nothing: a request that reached its first token and whose
terminal row carries no ``output_tokens`` has an **unknown** count (null). That is the
case of ``--from requests`` without an ``output_tokens`` column and of TensorRT-LLM's perf
metrics, and of any request-level request whose tool reported no usage (an OTLP span
without ``gen_ai.usage.output_tokens``, an SGLang record without ``completion_tokens``).
A request that never reached a first token delivered nothing: its 0 is known.

From an unknown count follow (analysis/unavailable.py gives the reason code):

- the request's ``output_tokens``, ``tpot`` and formula residual are null;
- the trace's output and total tok/s are null when *any* completed request's count is
  unknown (a sum over the known ones would be an undercount presented as a rate);
- ``output_tokens``, ``tpot`` and the per-request formula check are unavailable when
  *every* completed request's count is unknown (otherwise they describe the counted ones,
  and their ``count`` says how many);
- tokens delivered by cancelled, in-flight or errored requests are null when one of them
  has an unknown count.

A canonical log with token events is never affected: its ticks are real.
"""

from __future__ import annotations

import polars as pl


def known_count(no_ticks: pl.Expr, reported: pl.Expr, ticks: pl.Expr) -> pl.Expr:
    """True where the output count is known (see the module docstring)."""
    return ~no_ticks | reported.is_not_null() | (ticks.fill_null(0) == 0)


def token_sum(frame: pl.DataFrame) -> int | None:
    """Σ ``output_tokens`` of ``frame``; None when one of its counts is unknown."""
    column = frame["output_tokens"]
    if column.null_count():
        return None
    return int(column.sum())
