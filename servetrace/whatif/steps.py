"""The engine steps a server-side trace implies, when no step records are given.

A continuously batching engine emits every token of a step at the step's end, so the
distinct instants of ``first_token``/``token`` events are the step ends. A request whose
first token is at an end was prefilled in that step (prefill-first engines prefill a
whole prompt in one step); the others with a token there decoded in it. A step starts
where the previous one ended, or, after the engine was idle, at the last admission
before its end. The context a decoding request reads is its prompt plus the tokens it
has generated before this one.

This reconstruction is exact for a prefill-first engine with one replica that streams
every token (the simulator's ``fcfs`` and Vidur's vLLM scheduler); chunked prefill
spreads a prompt over steps the events do not name, so such traces need step records.
"""

from __future__ import annotations

import polars as pl

from servetrace.errors import InputError

TICKS = ("first_token", "token")


def implied_steps(events: pl.DataFrame, label: str) -> pl.DataFrame:
    """One row per implied step: ``ts_start, ts_end, duration, prefill_requests,
    prefill_tokens, decode_requests, context_tokens`` (Int64; ns for times)."""
    kinds = set(events["event"].unique().to_list())
    if "admission" not in kinds:
        raise InputError(
            f"{label}: the trace has no admission events (a client-side trace), so the "
            "engine's steps cannot be told from the wait before them",
            hint="give the engine's step records with --steps, or a server-side trace",
        )
    if (
        "prompt_tokens" not in events.columns
        or events.filter((pl.col("event") == "arrival") & pl.col("prompt_tokens").is_null()).height
    ):
        raise InputError(
            f"{label}: arrivals without prompt_tokens: the prefill cost cannot be fitted",
            hint="give prompt_tokens on every arrival",
        )
    prompts = events.filter(pl.col("event") == "arrival").select("request_id", "prompt_tokens")
    tokens = pl.col("tokens").fill_null(1) if "tokens" in events.columns else pl.lit(1)
    ticks = (
        events.filter(pl.col("event").is_in(TICKS))
        .select("request_id", "ts", "event", tokens.cast(pl.Int64).alias("tokens"))
        .sort("ts", maintain_order=True)
        .join(prompts, on="request_id", how="left")
        .with_columns(before=pl.col("tokens").cum_sum().over("request_id") - pl.col("tokens"))
    )
    first = pl.col("event") == "first_token"
    steps = (
        ticks.group_by("ts")
        .agg(
            prefill_requests=first.sum().cast(pl.Int64),
            prefill_tokens=pl.col("prompt_tokens").filter(first).sum().cast(pl.Int64),
            decode_requests=(~first).sum().cast(pl.Int64),
            context_tokens=(pl.col("prompt_tokens") + pl.col("before"))
            .filter(~first)
            .sum()
            .cast(pl.Int64),
        )
        .rename({"ts": "ts_end"})
        .sort("ts_end")
    )
    admissions = (
        events.filter(pl.col("event") == "admission").select(admitted=pl.col("ts")).sort("admitted")
    )
    steps = steps.join_asof(
        admissions,
        left_on="ts_end",
        right_on="admitted",
        strategy="backward",
        allow_exact_matches=False,
    ).with_columns(
        ts_start=pl.max_horizontal(pl.col("ts_end").shift(1), "admitted"),
    )
    return _fit_columns(steps, pl.col("context_tokens")).filter(
        pl.col("duration").is_not_null() & (pl.col("duration") > 0)
    )


def _fit_columns(steps: pl.DataFrame, context: pl.Expr) -> pl.DataFrame:
    """The columns the fit reads, ``context`` naming where the decodes' context comes from."""
    return steps.select(
        "ts_start",
        "ts_end",
        duration=pl.col("ts_end") - pl.col("ts_start"),
        prefill_requests="prefill_requests",
        prefill_tokens="prefill_tokens",
        decode_requests="decode_requests",
        context_tokens=context,
    )


def from_step_records(steps: pl.DataFrame, events: pl.DataFrame, label: str) -> pl.DataFrame:
    """Step records in the canonical layout, in the columns the fit reads. Where a record
    has no ``kv_tokens``, the context its decodes read comes from the trace: the implied
    step ending at the same instant (records and ticks share step ends); a record with
    neither is left out of the fit, never read as an empty cache."""
    frame = _fit_columns(steps, pl.col("kv_tokens"))
    if frame["context_tokens"].null_count():
        implied = implied_steps(events, label).select("ts_end", implied="context_tokens")
        frame = (
            frame.join(implied, on="ts_end", how="left")
            .with_columns(pl.col("context_tokens").fill_null(pl.col("implied")))
            .drop("implied")
        )
    return frame.drop_nulls().filter(pl.col("duration") > 0)


def looks_chunked(steps: pl.DataFrame) -> bool:
    """Whether prefill shares steps with decodes often enough to be chunked prefill (a
    prefill-first engine pauses decodes in a prefill step)."""
    prefill = steps.filter(pl.col("prefill_requests") > 0)
    if prefill.height == 0:
        return False
    mixed = prefill.filter(pl.col("decode_requests") > 0).height
    return mixed / prefill.height > 0.5
