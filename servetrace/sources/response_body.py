"""What vLLM reports about a request in its response body, read from the client exports
that keep the body: prefix-cache hits, the engine's own timings, speculative decoding.

Pinned to vllm-project/vllm:

- ``usage.prompt_tokens_details.cached_tokens`` (``--enable-prompt-tokens-details``):
  ``PromptTokenUsageInfo`` in ``vllm/entrypoints/openai/engine/protocol.py`` at
  d7e52523a55cfd60207c99d9f3b7ed527d2115b7;
- ``metrics`` (``--enable-per-request-metrics`` on the server *and* ``include_metrics:
  true`` in the request; pull request #46768): ``docs/features/per_request_metrics.md`` at
  e4deb7cde37053d758e6f090f66cc55104f4fe1c, and ``build_per_request_timing_metrics`` in
  ``vllm/entrypoints/openai/engine/serving.py``, which computes each field from the
  engine's ``RequestStateStats`` timestamps (float seconds on the engine's clock):
  ``queue_time_ms`` = scheduled − queued, ``time_to_first_token_ms`` = first token −
  scheduled (vLLM's TTFT starts at scheduling: it is our *prefill*), ``generation_time_ms``
  = last token − first token (our *decode*), ``mean_itl_ms`` = generation / (N − 1) (per
  token: our *tpot*, not our per-tick ``itl_mean``); each is null where a timestamp is
  missing. Streaming puts the object on the final usage chunk, a full response on its
  body; vLLM leaves it out for ``n > 1`` and multi-prompt requests;
- ``metrics.speculative_decoding`` (``--per-request-spec-decode-metrics summary`` or
  ``detailed``; pull request #48915; the fields as
  ``docs/features/speculative_decoding/acceptance_metrics.md`` at
  02cf515f0b62e6fc36d5ff8fb9b486a30e8dbe08 lists them): ``num_spec_steps`` (verify steps),
  ``num_accepted_draft_tokens``, ``num_draft_tokens`` (and ``num_spec_tokens``,
  ``mean_acceptance_length`` = 1 + accepted / steps, ``draft_acceptance_rate``,
  ``acceptance_histogram``, ``acceptance_histogram_by_draft_length``, not read: they
  follow from the three counts or the config).

The metrics object holds no prefix-cache figure: cached tokens come from ``usage``. Each
field becomes one canonical per-request column (``FIELDS``), null where the body has none,
so a request without them (another server, the flags off, a cancelled stream) is
*unknown*, never 0. The times are the engine's, measured on its clock: the ``server_``
columns never replace this trace's own client-side figures (``analysis.server_reported``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from servetrace.errors import InputError
from servetrace.sources.times import checked_ns
from servetrace.units import NS_PER_MS

Where = Callable[[int], str]


@dataclass(frozen=True)
class BodyField:
    """One per-request figure of the body: its canonical column, where the body has it,
    and its unit (ms, converted to ns once; None for a count of tokens or steps)."""

    column: str
    path: str
    unit_ns: int | None

    @property
    def name(self) -> str:
        """The field as the body spells it (``metrics.queue_time_ms``)."""
        return self.path.removeprefix("$.")

    @property
    def text(self) -> str:
        return f"_body_{self.column}"


_SPEC = "$.metrics.speculative_decoding"
FIELDS: tuple[BodyField, ...] = (
    BodyField("cached_tokens", "$.usage.prompt_tokens_details.cached_tokens", None),
    BodyField("server_queue_wait_ns", "$.metrics.queue_time_ms", NS_PER_MS),
    BodyField("server_prefill_ns", "$.metrics.time_to_first_token_ms", NS_PER_MS),
    BodyField("server_decode_ns", "$.metrics.generation_time_ms", NS_PER_MS),
    BodyField("server_tpot_ns", "$.metrics.mean_itl_ms", NS_PER_MS),
    BodyField("spec_steps", f"{_SPEC}.num_spec_steps", None),
    BodyField("spec_accepted_tokens", f"{_SPEC}.num_accepted_draft_tokens", None),
    BodyField("spec_draft_tokens", f"{_SPEC}.num_draft_tokens", None),
)
COLUMNS: tuple[str, ...] = tuple(f.column for f in FIELDS)


def chunk_fields(payload: pl.Expr) -> list[pl.Expr]:
    """Per chunk (its JSON payload), each field's text, null where the chunk has none."""
    return [payload.str.json_path_match(f.path).alias(f.text) for f in FIELDS]


def last_fields() -> list[pl.Expr]:
    """Aggregations keeping each field's last value among a group's chunks: the final
    usage chunk's, the one vLLM writes them on."""
    return [pl.col(f.text).drop_nulls().last() for f in FIELDS]


def typed(frame: pl.DataFrame, where_of: Where) -> pl.DataFrame:
    """``frame`` (one row per record, with the fields' text from :func:`last_fields`) with
    the canonical columns instead: counts Int64, times Int64 ns. A value that is not a
    number ≥ 0 is an input error naming the record (``where_of(row)``) and the field."""
    columns = []
    for f in FIELDS:
        text = frame[f.text]
        if f.unit_ns is None:
            values = text.cast(pl.Int64, strict=False)
            rule = "a whole number ≥ 0"
            bad = text.is_not_null() & (values.is_null() | (values < 0))
        else:
            values = text.cast(pl.Float64, strict=False)
            rule = "a finite number of ms ≥ 0"
            bad = text.is_not_null() & (values.is_null() | ~values.is_finite() | (values < 0))
        rows = bad.fill_null(True).arg_true()
        if len(rows):
            row = int(rows[0])
            raise InputError(f"{where_of(row)}: field '{f.name}' must be {rule}, got {text[row]}")
        if f.unit_ns is not None:
            values = checked_ns(values, f.unit_ns, where_of, field=f.name)
        columns.append(values.cast(pl.Int64).alias(f.column))
    return frame.drop(f.text for f in FIELDS).with_columns(columns)


def present(frame: pl.DataFrame) -> list[str]:
    """The canonical columns some request of ``frame`` has a value in: only those become
    attributes, so an export without them reads exactly as before."""
    return [c for c in COLUMNS if c in frame.columns and frame[c].is_not_null().any()]


def note(frame: pl.DataFrame) -> str | None:
    """What the body's figures are, for the import warnings (None when there are none)."""
    shown = present(frame)
    if not shown:
        return None
    carrying = frame.select(pl.any_horizontal(pl.col(c).is_not_null() for c in shown).sum()).item()
    return (
        f"{carrying} of {frame.height} requests carry vLLM's per-request figures in the "
        f"response body ({', '.join(shown)}): the server_ times are the engine's own, on its "
        "clock (server_queue_wait is its scheduler queue, not this client trace's queue "
        "wait, which stays unavailable); the others are unknown, not 0"
    )
