"""Streamed chunks of OpenAI-compatible servers (server-sent events), as Polars
expressions: a chunk's JSON payload, whether it carries output, and its usage counts;
and a stream's chunks summed up per request (``per_request``), for every client export
that keeps them (GenAI-Perf, AIPerf's raw export).
"""

from __future__ import annotations

import polars as pl

from servetrace.sources import response_body as body

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


def usage_count(payload: pl.Expr, key: str) -> pl.Expr:
    """``usage.<key>`` of a chunk as Int64 (null when the chunk has no usage)."""
    return payload.str.json_path_match(f"$.usage.{key}").cast(pl.Int64, strict=False)


def is_content_chunk(payload: pl.Expr) -> pl.Expr:
    """True when a chunk's JSON payload carries generated text (or reasoning).

    Chunks that only close the stream (``finish_reason`` with an empty delta), carry usage
    (``choices: []``), or the ``[DONE]`` sentinel are not output tokens.
    """
    return pl.any_horizontal(
        payload.str.json_path_match(path).str.len_chars().fill_null(0) > 0
        for path in _CONTENT_PATHS
    )


def per_request(parts: pl.DataFrame) -> pl.DataFrame:
    """One row per request of ``parts`` (one row per SSE payload: ``request_id``, ``_chunk``
    the chunk it belongs to, ``time_ns`` when that chunk arrived, ``payload``): the sorted
    times of the chunks that carry output (``ticks_ns``), the stream's last usage counts,
    and the response body's figures as text (``response_body.typed``)."""
    payload = pl.col("payload")
    return (
        parts.with_columns(
            *body.chunk_fields(payload),
            content=is_content_chunk(payload),
            completion_tokens=usage_count(payload, "completion_tokens"),
            prompt_tokens=usage_count(payload, "prompt_tokens"),
        )
        .group_by("request_id", "_chunk", maintain_order=True)
        .agg(
            pl.col("time_ns").first(),
            pl.col("content").any(),
            pl.col("completion_tokens", "prompt_tokens").drop_nulls().last(),
            *body.last_fields(),
        )
        .group_by("request_id", maintain_order=True)
        .agg(
            *body.last_fields(),
            ticks_ns=pl.col("time_ns").filter(pl.col("content")).sort(),
            completion_tokens=pl.col("completion_tokens").drop_nulls().last(),
            prompt_tokens=pl.col("prompt_tokens").drop_nulls().last(),
        )
    )
