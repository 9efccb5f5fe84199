"""Streamed chunks of OpenAI-compatible servers (server-sent events), as Polars
expressions: a chunk's JSON payload, whether it carries output, and its usage counts.
"""

from __future__ import annotations

import polars as pl

# Where a chunk's generated text can be, by API: chat (content, and reasoning under either
# of its two spellings), completions, a non-streamed chat body, Triton's generate endpoint.
_CONTENT_PATHS = (
    "$.choices[0].delta.content",
    "$.choices[0].delta.reasoning_content",
    "$.choices[0].delta.reasoning",
    "$.choices[0].text",
    "$.choices[0].message.content",
    "$.text_output",
)


def sse_payload(expr: pl.Expr) -> pl.Expr:
    """The JSON payload of one SSE ``data:`` line (prefix and blanks removed)."""
    return expr.str.strip_chars().str.strip_prefix("data:").str.strip_chars()


def is_content_chunk(payload: pl.Expr) -> pl.Expr:
    """True when a chunk's JSON payload carries generated text (or reasoning).

    Chunks that only close the stream (``finish_reason`` with an empty delta), carry usage
    (``choices: []``), or the ``[DONE]`` sentinel are not output tokens.
    """
    return pl.any_horizontal(
        payload.str.json_path_match(path).str.len_chars().fill_null(0) > 0
        for path in _CONTENT_PATHS
    )


def chunk_columns(payload: pl.Expr) -> dict[str, pl.Expr]:
    """Per chunk: ``content`` (carries output), and the usage ``completion_tokens`` and
    ``prompt_tokens`` (null without usage)."""
    return {
        "content": is_content_chunk(payload),
        "completion_tokens": usage_count(payload, "completion_tokens"),
        "prompt_tokens": usage_count(payload, "prompt_tokens"),
    }


def usage_count(payload: pl.Expr, key: str) -> pl.Expr:
    """``usage.<key>`` of a chunk as Int64 (null when the chunk has no usage)."""
    return payload.str.json_path_match(f"$.usage.{key}").cast(pl.Int64, strict=False)
