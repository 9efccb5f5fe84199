"""What the server reported about each request, beside what the trace measured
(``sources.response_body``: vLLM's per-request figures in a client export's response
body).

These are the engine's own figures, on its clock, never this trace's: a client trace's
``queue_wait`` and ``prefill`` stay unavailable (a client cannot see admission), and the
server's queue is ``server_queue_wait``, named apart in every view. Over the completed
requests carrying each figure:

- ``server_queue_wait``, ``server_prefill``, ``server_decode``, ``server_tpot``: vLLM's
  ``queue_time_ms``, ``time_to_first_token_ms`` (from scheduling), ``generation_time_ms``,
  ``mean_itl_ms`` (decode / (N − 1));
- ``ttft_outside_engine`` = the trace's ``ttft`` − ``server_queue_wait`` −
  ``server_prefill``: the part of the client's TTFT the engine did not see (network both
  ways, HTTP server, tokenisation before the engine queue, detokenisation after); both
  sides are durations, so no clock alignment is needed;
- the prefix cache: Σ ``cached_tokens`` over Σ ``prompt_tokens`` of the requests with both;
- speculative decoding: Σ accepted / Σ drafted tokens, vLLM's mean acceptance length
  ``1 + Σ accepted / Σ steps``, and the output tokens per decode step ``Σ (N − 1) / Σ S``
  (below the acceptance length when the last step's extra tokens were cut at a stop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from servetrace.analysis.metric_names import Distribution
from servetrace.sources.response_body import present
from servetrace.stats.describe import describe_sorted

# Metric id → what it is, for every view.
DEFINITIONS: dict[str, str] = {
    "server_queue_wait": "the engine's scheduler queue: scheduled − queued "
    "(vLLM metrics.queue_time_ms); not this trace's queue_wait",
    "server_prefill": "first token − scheduled, on the engine "
    "(vLLM metrics.time_to_first_token_ms, its TTFT from scheduling)",
    "server_decode": "last token − first token, on the engine (vLLM metrics.generation_time_ms)",
    "server_tpot": "server_decode / (output_tokens − 1) (vLLM metrics.mean_itl_ms)",
    "ttft_outside_engine": "ttft − server_queue_wait − server_prefill: network, HTTP server "
    "and tokenisation the engine does not see",
}
# The metrics read from a per-request column of their name (``<metric>_ns``).
READ = ("server_queue_wait", "server_prefill", "server_decode", "server_tpot")


@dataclass(frozen=True)
class ServerReported:
    """The server's per-request figures of one run, summarised (times in ns)."""

    completed: int  # completed requests
    metrics: dict[str, Distribution]  # only the metrics some completed request has
    prefix_cache: dict[str, Any] | None
    spec_decode: dict[str, Any] | None


def _column(frame: pl.DataFrame, name: str) -> pl.Expr:
    if name in frame.columns:
        return pl.col(name).cast(pl.Float64)
    return pl.lit(None, pl.Float64)


def server_reported(requests: pl.DataFrame) -> ServerReported | None:
    """The summary of ``requests`` (the per-request frame), None when no request carries a
    server-reported figure (every trace but the ones whose bodies had them)."""
    if not present(requests):
        return None
    done = requests.filter(pl.col("outcome") == "completed")
    ttft_outside = (
        _column(done, "ttft_ns")
        - _column(done, "server_queue_wait_ns")
        - _column(done, "server_prefill_ns")
    )
    values = done.select(
        *(_column(done, f"{m}_ns").alias(m) for m in READ),
        ttft_outside.alias("ttft_outside_engine"),
    )
    metrics: dict[str, Distribution] = {}
    for name in DEFINITIONS:
        sample = values[name].drop_nulls().sort().to_numpy()
        if sample.size:
            metrics[name] = describe_sorted(sample)
    return ServerReported(
        completed=done.height,
        metrics=metrics,
        prefix_cache=_prefix_cache(done),
        spec_decode=_spec_decode(done),
    )


def _prefix_cache(done: pl.DataFrame) -> dict[str, Any] | None:
    if "cached_tokens" not in done.columns:
        return None
    both = done.filter(pl.all_horizontal(pl.col("cached_tokens", "prompt_tokens").is_not_null()))
    if both.height == 0:
        return None
    cached, prompt = int(both["cached_tokens"].sum()), int(both["prompt_tokens"].sum())
    return {
        "requests": both.height,
        "cached_tokens": cached,
        "prompt_tokens": prompt,
        "hit_fraction": cached / prompt if prompt else None,
    }


def _spec_decode(done: pl.DataFrame) -> dict[str, Any] | None:
    names = ("spec_steps", "spec_accepted_tokens", "spec_draft_tokens")
    if any(n not in done.columns for n in names):
        return None
    counted = done.filter(pl.all_horizontal(pl.col(n).is_not_null() for n in names))
    if counted.height == 0:
        return None
    steps, accepted, drafted = (int(counted[n].sum()) for n in names)
    emitted = counted.filter(pl.col("output_tokens").is_not_null())
    after_first = int((emitted["output_tokens"] - 1).clip(lower_bound=0).sum())
    emitted_steps = int(emitted["spec_steps"].sum())
    return {
        "requests": counted.height,
        "steps": steps,
        "accepted_tokens": accepted,
        "draft_tokens": drafted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "mean_acceptance_length": 1 + accepted / steps if steps else None,
        "output_tokens_per_step": after_first / emitted_steps if emitted_steps else None,
    }
