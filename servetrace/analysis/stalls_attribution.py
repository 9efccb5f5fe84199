"""Where an inter-token stall's time went (docs/design.md §10): the decode-step baseline
fitted from the steps themselves, each gap's excess over it, and that excess split by cause.

For a joined gap of length ``g`` whose request ran in ``n`` of its covering steps (the
membership, else the tokens its tick carries):

- ``between_steps``: the part of the gap inside no step (host or scheduler time);
- ``paused_for_prefill``: the part inside prefill-only covering steps (no decode in
  them) that did not run the request while it was running: a prefill-first engine ran
  other requests' prompts instead of its decode;
- ``skipped``: the rest of the part inside covering steps that did not run the request
  (preempted, or left out of the batch);
- ``large_batch``: ``n × (f(own batch) − f(usual batch))``: its step's decode batch is
  larger (or, negative, smaller) than the median one;
- ``prefill`` when the covering steps carry prefill tokens, else ``other``: the rest of the
  time of the request's own steps beyond ``n × f(own batch)``.

``f`` is the least-squares fit of decode-only steps' duration on their decode batch size
(and KV tokens, where every decode-only step gives them). The components add up to the
excess ``g − n × f(usual batch)`` exactly; a gap's cause is its largest component
(``none`` without excess, ``unjoined:REASON`` for a gap no step covers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.stall_causes import CAUSES, UNJOINED_REASONS

# Every value a gap's ``cause`` takes (an enum of these).
CAUSE_LABELS = ["none", *CAUSES, *(f"unjoined:{reason}" for reason in UNJOINED_REASONS)]
COMPONENT = {cause: f"{cause}_ns" for cause in CAUSES}
MIN_FIT_STEPS = 10


@dataclass(frozen=True)
class Baseline:
    """The decode-only step time ``intercept + per_request × batch + per_kv_token × kv``."""

    n: int  # decode-only steps fitted
    intercept_ns: float | None
    per_request_ns: float | None
    per_kv_token_ns: float | None  # None when the steps give no KV tokens
    residual_ns: float | None  # root-mean-square residual of the fit
    usual_batch: float | None  # median decode batch of the decode-only steps
    usual_kv_tokens: float | None
    unavailable: str | None = None  # why there is no fit

    def at(self, batch: pl.Expr, kv: pl.Expr) -> pl.Expr:
        """The fitted time of a decode-only step of ``batch`` requests and ``kv`` tokens."""
        value = pl.lit(self.intercept_ns) + pl.lit(self.per_request_ns) * batch
        if self.per_kv_token_ns is not None:
            value = value + pl.lit(self.per_kv_token_ns) * kv
        return value


def fit_baseline(steps: pl.DataFrame) -> Baseline:
    """Least squares of decode-only steps' duration on batch size (and KV tokens)."""
    # Only the columns fitted: the steps' membership lists are most of their memory.
    decode = steps.select("ts_start", "ts_end", "prefill_tokens", "decode_requests", "kv_tokens")
    decode = decode.filter(
        (pl.col("prefill_tokens") == 0)
        & (pl.col("decode_requests") > 0)
        & (pl.col("ts_end") > pl.col("ts_start"))
    )
    n = decode.height
    if n < MIN_FIT_STEPS:
        return Baseline(
            n, None, None, None, None, None, None, f"only {n} decode-only steps (need 10)"
        )
    kv = decode["kv_tokens"]
    use_kv = kv.null_count() == 0 and kv.n_unique() > 1
    y = (decode["ts_end"] - decode["ts_start"]).to_numpy().astype(np.float64)
    columns = [np.ones(n), decode["decode_requests"].to_numpy().astype(np.float64)]
    if use_kv:
        columns.append(kv.to_numpy().astype(np.float64))
    x = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = float(np.sqrt(np.mean((y - x @ coef) ** 2)))
    usual_kv = float(kv.median()) if use_kv else None  # type: ignore[arg-type]
    return Baseline(
        n=n,
        intercept_ns=float(coef[0]),
        per_request_ns=float(coef[1]),
        per_kv_token_ns=float(coef[2]) if use_kv else None,
        residual_ns=residual,
        usual_batch=float(decode["decode_requests"].median()),  # type: ignore[arg-type]
        usual_kv_tokens=usual_kv,
    )


def with_step_baseline(steps: pl.DataFrame, fit: Baseline) -> pl.DataFrame:
    """``baseline_ns``: each step's fitted decode-only time (null without a fit)."""
    if fit.unavailable is not None:
        return steps.with_columns(baseline_ns=pl.lit(None, pl.Int64))
    value = fit.at(pl.col("decode_requests"), pl.col("kv_tokens"))
    return steps.with_columns(baseline_ns=value.round().cast(pl.Int64))


def attribute(joined: pl.DataFrame, fit: Baseline) -> pl.DataFrame:
    """The joined gaps with ``baseline_ns``, ``excess_ns``, each cause's component (ns) and
    ``cause``; null for unjoined gaps or without a fit."""
    return with_cause(excess_by_cause(joined, fit))


def excess_by_cause(joined: pl.DataFrame, fit: Baseline) -> pl.DataFrame:
    """`attribute` without ``cause``. ``joined``: `stalls_join.join_gaps` or `join_core`
    (whose membership, where known, says which steps were the request's own, and whose
    steps carry their fitted time)."""
    if fit.unavailable is not None:
        nulls = {name: pl.lit(None, pl.Int64) for name in ("baseline_ns", "excess_ns")}
        return joined.with_columns(
            **nulls, **{c: pl.lit(None, pl.Int64) for c in COMPONENT.values()}
        )
    gap = pl.col("gap_end_ns") - pl.col("gap_start_ns")
    last = "last_ns" in joined.columns  # else the membership says it
    own_steps = pl.coalesce(
        pl.col("member_steps"), pl.min_horizontal(pl.col("tokens"), pl.col("steps"))
    )
    own_ns = (
        pl.coalesce(
            pl.col("member_ns"),
            pl.min_horizontal(pl.col("step_ns"), pl.col("tokens") * pl.col("last_ns")),
        )
        if last
        else pl.col("member_ns")
    )
    # One lazy query: its chained steps are evaluated together, not column set by set.
    frame = joined.lazy().with_columns(
        _own=own_steps if last else pl.col("member_steps"),
        _own_in_gap=pl.min_horizontal(pl.col("covered_ns"), own_ns),
    )
    frame = frame.with_columns(_paused=_paused(joined))
    usual = fit.at(pl.lit(fit.usual_batch), pl.lit(fit.usual_kv_tokens))
    own_fit = pl.col("last_baseline_ns").cast(pl.Float64)
    if "last_decode_requests" in joined.columns:  # steps without their fitted time
        own_fit = pl.coalesce(
            own_fit, fit.at(pl.col("last_decode_requests"), pl.col("last_kv_tokens"))
        )
    # The shared parts as columns first, each computed once.
    frame = frame.with_columns(
        _baseline=(pl.col("_own") * usual).round().cast(pl.Int64),
        _own_baseline=(pl.col("_own") * own_fit).round().cast(pl.Int64),
        _prefill=pl.col("steps_with_prefill").fill_null(0) > 0,
        _joined=pl.col("unjoined").is_null(),
    )
    baseline, own_baseline = pl.col("_baseline"), pl.col("_own_baseline")
    step_extra = pl.col("_own_in_gap") - own_baseline
    prefill, joined_row = pl.col("_prefill"), pl.col("_joined")
    components = {
        "between_steps_ns": pl.col("between_ns"),
        "paused_for_prefill_ns": pl.col("_paused"),
        "skipped_ns": pl.col("covered_ns") - pl.col("_own_in_gap") - pl.col("_paused"),
        "large_batch_ns": own_baseline - baseline,
        "prefill_ns": pl.when(prefill).then(step_extra).otherwise(0),
        "other_ns": pl.when(prefill).then(0).otherwise(step_extra),
    }
    frame = frame.with_columns(
        baseline_ns=pl.when(joined_row).then(baseline),
        excess_ns=pl.when(joined_row).then(gap - baseline),
        **{
            name: pl.when(joined_row).then(expr.cast(pl.Int64)) for name, expr in components.items()
        },
    ).drop("_own", "_own_in_gap", "_paused", "_baseline", "_own_baseline", "_prefill", "_joined")
    return frame.collect()


def with_cause(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (`excess_by_cause`) with each gap's ``cause``: its largest component
    (``none`` without excess, ``unjoined:REASON`` for a gap no step covers)."""
    largest = pl.max_horizontal([pl.col(COMPONENT[c]) for c in CAUSES])
    # The cause as a code into `CAUSE_LABELS`, then one gather into an enum: no string is
    # built per gap.
    code: Any = pl.when(pl.col("unjoined").is_null() & pl.col("excess_ns").is_null()).then(None)
    for reason in UNJOINED_REASONS:
        label = CAUSE_LABELS.index(f"unjoined:{reason}")
        code = code.when(pl.col("unjoined") == reason).then(label)
    code = code.when(pl.col("excess_ns") <= 0).then(0)
    for name in CAUSES:  # the first of equal largest components, in the order of CAUSES
        code = code.when(pl.col(COMPONENT[name]) == pl.col("_largest")).then(
            CAUSE_LABELS.index(name)
        )
    codes = frame.with_columns(_largest=largest).select(code.otherwise(None).cast(pl.UInt32))
    return frame.with_columns(cause=_labels().gather(codes.to_series()))


def _paused(joined: pl.DataFrame) -> pl.Expr:
    """The part of the time in covering steps without the request (``covered − own``)
    that prefill-only steps took while the request was running: their covered time less
    the request's own prefill-only steps (membership; else the last step's, where the
    request is taken to have run), none when it was preempted in the gap."""
    own = (
        pl.coalesce(
            pl.col("member_prefill_only_ns"),
            pl.min_horizontal(pl.col("_own_in_gap"), pl.col("last_prefill_only_ns").fill_null(0)),
        )
        if "last_prefill_only_ns" in joined.columns
        else pl.col("member_prefill_only_ns")
    )
    others = (pl.col("prefill_only_ns") - own).clip(lower_bound=0)
    paused = pl.min_horizontal(others, pl.col("covered_ns") - pl.col("_own_in_gap"))
    preempted = pl.col("preempted") if "preempted" in joined.columns else pl.lit(False)
    return pl.when(preempted).then(0).otherwise(paused.fill_null(0))


def _labels() -> pl.Series:
    return pl.Series("cause", CAUSE_LABELS, dtype=pl.Enum(CAUSE_LABELS))


def share_sums(gaps: pl.DataFrame, *within: pl.Expr | None) -> tuple[dict[str, int], ...]:
    """The count and total excess (ns) of the stalled gaps (excess > 0) of ``gaps`` (those
    in each of ``within``; None: all), and each cause's part of it: what `shares_of`
    divides, and what adds up over parts of the gaps. One pass for every ``within``."""
    names = ("gaps", "excess_ns", *CAUSES)
    exprs = []
    for i, part in enumerate(within or (None,)):
        stalled = pl.col("excess_ns") > 0
        if part is not None:
            stalled = stalled & part
        exprs += [
            stalled.sum().alias(f"{i}:gaps"),
            pl.col("excess_ns").filter(stalled).sum().alias(f"{i}:excess_ns"),
            *[pl.col(COMPONENT[c]).filter(stalled).sum().alias(f"{i}:{c}") for c in CAUSES],
        ]
    row = gaps.select(exprs).row(0, named=True)
    return tuple(
        {name: int(row[f"{i}:{name}"] or 0) for name in names} for i in range(len(within) or 1)
    )


def shares_of(sums: dict[str, int]) -> dict[str, float | int | None]:
    """Each cause's share of the total excess of the stalled gaps (`share_sums`), with
    that total (ns) and their count; shares are None when no gap stalled."""
    total = sums["excess_ns"]
    out: dict[str, float | int | None] = {"gaps": sums["gaps"], "excess_ns": total}
    for cause in CAUSES:
        out[f"{cause}_share"] = sums[cause] / total if total else None
    return out
