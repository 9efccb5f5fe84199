"""Where ITL stalls come from: a trace's inter-token gaps joined to the engine's steps
(`stalls_join`) and their excess over the decode-step baseline split by cause
(`stalls_attribution`); with the consistency findings between the two streams.

`tick_gaps` turns the trace's events into the gaps the join reads (the gaps of the ITL
metric: completed requests, consecutive output ticks); `stall_analysis` builds the one
`Stalls` every view reads (design §10).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle_rules import KEY
from servetrace.analysis.stall_causes import CAUSES, UNJOINED_REASONS
from servetrace.analysis.stall_findings import Finding, Running, consistency
from servetrace.analysis.stalls_attribution import (
    Baseline,
    attribute,
    fit_baseline,
    shares,
    with_step_baseline,
)
from servetrace.analysis.stalls_join import join_gaps, prepare_steps
from servetrace.errors import InputError
from servetrace.sources.steps.formats import StepFile
from servetrace.sources.steps.validate import OVERLAP_NOTE

# The per-gap file (``--stalls-out``): these columns first, in this order.
GAP_COLUMNS = (
    "request_id",
    "gap_start_ns",
    "gap_end_ns",
    "steps",
    "prefill_tokens",
    "decode_tokens",
    "excess_ns",
    "cause",
)
WORST = 10


@dataclass(frozen=True)
class Stalls:
    """Every gap of the ITL metric joined to its covering steps, and its excess by cause."""

    steps_file: str
    steps_format: str
    steps: int
    replicas: int
    gaps: pl.DataFrame  # one row per gap: GAP_COLUMNS first, then the join's and causes'
    fit: Baseline
    tail_threshold_ns: int | None  # the pooled ITL p99
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    alignment_error_ns: int | None = None

    @property
    def joined(self) -> pl.DataFrame:
        return self.gaps.filter(pl.col("unjoined").is_null())

    @property
    def unjoined(self) -> dict[str, int]:
        """Unjoined gaps by reason (`stalls_join.UNJOINED_REASONS`)."""
        counts = self.gaps["unjoined"].drop_nulls().value_counts(sort=True)
        return {str(r): int(n) for r, n in counts.iter_rows()}

    @property
    def tail(self) -> pl.DataFrame:
        """Joined gaps at or above the pooled ITL p99."""
        if self.tail_threshold_ns is None:
            return self.joined.clear()
        gap = pl.col("gap_end_ns") - pl.col("gap_start_ns")
        return self.joined.filter(gap >= self.tail_threshold_ns)

    def shares(self) -> dict[str, float | int | None]:
        return shares(self.joined)

    def tail_shares(self) -> dict[str, Any]:
        tail = self.tail
        out: dict[str, Any] = {"threshold_ns": self.tail_threshold_ns, "tail_gaps": tail.height}
        with_prefill = int((tail["steps_with_prefill"].fill_null(0) > 0).sum())
        out["prefill_fraction"] = with_prefill / tail.height if tail.height else None
        return {**out, **shares(tail)}

    def worst(self, n: int = WORST) -> pl.DataFrame:
        """The ``n`` joined gaps of largest excess, with their covering steps."""
        return (
            self.joined.filter(pl.col("excess_ns").is_not_null())
            .sort(
                ["excess_ns", "request_id", "gap_start_ns"],
                descending=[True, False, False],
                maintain_order=True,
            )
            .head(n)
            .select(
                "request_id",
                "gap_start_ns",
                "gap_end_ns",
                (pl.col("gap_end_ns") - pl.col("gap_start_ns")).alias("gap_ns"),
                "excess_ns",
                "cause",
                "steps",
                "first_step",
                "last_step",
                "prefill_tokens",
                "decode_requests",
            )
        )

    def per_request(self, n: int = 5) -> dict[str, Any]:
        """Tail stalls per request: how many requests have any, the most, the worst few."""
        if self.tail_threshold_ns is None:
            return {"requests_with_tail_stalls": None, "max_tail_stalls": None, "top": []}
        per = (
            self.tail.group_by("request_id")
            .agg(pl.len().alias("tail_stalls"), pl.col("excess_ns").sum().alias("excess_ns"))
            .sort(["tail_stalls", "excess_ns", "request_id"], descending=[True, True, False])
        )
        return {
            "requests_with_tail_stalls": per.height,
            "max_tail_stalls": int(per["tail_stalls"].max()) if per.height else 0,  # type: ignore[arg-type]
            "top": per.head(n).to_dicts(),
        }


def tick_gaps(
    ticks: pl.DataFrame, per_request: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(gaps, ticks, codes) of the trace, every request by an integer key ``_rk``
    (its row in ``codes``: ``_rk, request_id, replica``), from the lifecycle's ``ticks``
    (``Timeline.ticks``: sorted by request and time, with ``gap_ns``; keyed as
    ``per_request``):

    - gaps: the ITL gaps of completed requests (``_rk``, ``replica``, ``gap_start_ns``,
      ``gap_end_ns``, ``tokens`` of the later tick), sorted by request and time;
    - ticks: every output tick of a valid request (``replica, ts, tokens, is_token``).
    """
    replica = (
        pl.col("replica").cast(pl.String).fill_null("")
        if "replica" in per_request.columns
        else pl.lit("", pl.String)
    )
    done = (pl.col("outcome") == "completed") & pl.col("itl_mean_ns").is_not_null()
    codes = per_request.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_rk"),
        KEY,
        "request_id",
        replica.alias("replica"),
        done.alias("_done"),
    )
    # The ticks are the lifecycle's, already in request and time order: an integer join
    # of the few request rows keeps that order, and no tick is sorted again.
    keyed = ticks.join(
        codes.select(KEY, "_rk", "replica", "_done"), on=KEY, how="inner", maintain_order="left"
    )
    gaps = keyed.filter(pl.col("_done") & pl.col("gap_ns").is_not_null()).select(
        "_rk",
        "replica",
        (pl.col("ts") - pl.col("gap_ns")).alias("gap_start_ns"),
        pl.col("ts").alias("gap_end_ns"),
        "tokens",
    )
    out = keyed.select("replica", "ts", "tokens", (~pl.col("is_first")).alias("is_token"))
    return _by_code(gaps), out, codes.select("_rk", "request_id", "replica")


def ticks_of(events: pl.LazyFrame, per_request: pl.DataFrame) -> pl.DataFrame:
    """The lifecycle's sorted ticks of ``events`` keyed as ``per_request`` (whose keys
    another call made, perhaps renumbered: matched by request id)."""
    from servetrace.analysis.lifecycle import PLACEABLE, sorted_ticks, with_request_key

    names = events.collect_schema().names()
    wanted = ["request_id", "event", "ts", *(["tokens"] if "tokens" in names else [])]
    keyed = with_request_key(events.select(wanted).filter(PLACEABLE).collect())
    ticks = sorted_ticks(keyed)
    ids = keyed.group_by(KEY).agg(pl.col("request_id").first())
    dtype = per_request.schema["request_id"]
    own = ids.with_columns(pl.col("request_id").cast(dtype)).join(
        per_request.select("request_id", pl.col(KEY).alias("_own")), on="request_id"
    )
    return (
        ticks.join(own.select(KEY, "_own"), on=KEY, how="inner", maintain_order="left")
        .drop(KEY)
        .rename({"_own": KEY})
    )


def _by_code(gaps: pl.DataFrame) -> pl.DataFrame:
    """``gaps`` (each request's in one run, in time order) with the runs in the order of
    the request codes ``_rk`` (the per-request frame's, which the per-gap file keeps):
    one gather of whole runs, no sort of the gaps."""
    rk = gaps["_rk"].to_numpy()
    if rk.shape[0] < 2 or bool(np.all(rk[1:] >= rk[:-1])):
        return gaps
    starts = np.flatnonzero(np.concatenate(([True], rk[1:] != rk[:-1])))
    lengths = np.diff(np.append(starts, rk.shape[0]))
    order = np.argsort(rk[starts], kind="stable")  # one per request
    first = np.repeat(starts[order], lengths[order])
    before = np.repeat(np.cumsum(lengths[order]) - lengths[order], lengths[order])
    return gaps[first + np.arange(rk.shape[0]) - before]


def _members(steps: pl.DataFrame, codes: pl.DataFrame) -> pl.DataFrame | None:
    """Every (request key, step row) pair of the steps' membership; None unless every
    step gives its requests."""
    ids = steps["request_ids"]
    if ids.null_count() or steps.is_empty():
        return None
    dtype = codes.schema["request_id"]
    pairs = (
        steps.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"), "request_ids")
        .explode("request_ids")
        .rename({"request_ids": "request_id"})
    )
    if dtype.is_integer():
        pairs = pairs.with_columns(pl.col("request_id").cast(dtype, strict=False))
        on = codes
    else:
        on = codes.with_columns(pl.col("request_id").cast(pl.String))
    return pairs.join(on.select("request_id", "_rk"), on="request_id").select("_rk", "_row")


def _replicas(steps: pl.DataFrame, gaps: pl.DataFrame, path: str) -> pl.DataFrame:
    """Steps on the trace's replicas: with one replica on each side, the names need not match."""
    named = steps["replica"].drop_nulls().unique()
    traced = gaps["replica"].unique()
    if traced.to_list() in ([""], []):
        if named.len() > 1:
            raise InputError(
                f"{path}: the steps come from {named.len()} replicas but the trace names "
                "no replica: rule replica_unknown",
                hint="give the trace a 'replica' request attribute (the engine rank)",
            )
        return steps.with_columns(replica=pl.lit(""))
    return steps.with_columns(pl.col("replica").fill_null(""))


def _aligned(steps: pl.DataFrame, instants: pl.Series, path: str) -> None:
    if steps.is_empty() or instants.is_empty():
        return
    start, end = int(steps["ts_start"].min()), int(steps["ts_end"].max())  # type: ignore[arg-type]
    first, last = int(instants.min()), int(instants.max())  # type: ignore[arg-type]
    if end < first or start > last:
        raise InputError(
            f"{path}: rule clocks_disjoint: the steps ({start} to {end} ns) and the trace's "
            f"token ticks ({first} to {last} ns) do not overlap in time: they are on "
            "different clocks and cannot be aligned",
            hint="write the steps on the trace's clock (Int64 ns), or give the format that "
            "aligns them (--steps-from)",
        )


def stall_analysis(
    gaps: pl.DataFrame,
    ticks: pl.DataFrame,
    codes: pl.DataFrame,
    step_file: StepFile,
    running: Running,
    *,
    path: str,
    fmt: str,
    tail_threshold_ns: int | None,
) -> Stalls:
    """Join ``gaps`` (`tick_gaps`, with its ``ticks`` and ``codes``) to the steps of
    ``step_file`` and attribute them; ``running``: what the trace has running, for the
    findings."""
    timed = step_file.frame.filter(
        pl.col("ts_start").is_not_null() & pl.col("ts_end").is_not_null()
    )
    untimed = step_file.frame.height - timed.height
    if timed.height == 0:
        raise InputError(
            f"{path}: no step has both a start and an end time, and a gap is covered by the "
            "steps that end in it, timed by their durations",
            hint="give step records with both times (the engine's step metrics or a trace)",
        )
    notes = step_file.notes
    if untimed:
        notes = (*notes, f"{untimed:,} steps without a start or an end time left out of the join")
    steps = _replicas(timed, gaps, path)
    _aligned(steps, ticks["ts"], path)
    fit = fit_baseline(steps)
    steps = with_step_baseline(steps, fit)
    prepared = prepare_steps(steps)
    joined = attribute(join_gaps(gaps, steps, _members(steps, codes), prepared), fit)
    ids = codes["request_id"].cast(pl.String).gather(joined["_rk"])
    joined = joined.drop("_rk").with_columns(request_id=ids)
    ordered = joined.select(*GAP_COLUMNS, *[c for c in joined.columns if c not in GAP_COLUMNS])
    findings = consistency(steps, prepared, ticks, running)
    if any(f.name == "overlapping_steps" for f in findings):  # said once, as a finding
        notes = tuple(note for note in notes if OVERLAP_NOTE not in note)
    return Stalls(
        steps_file=path,
        steps_format=fmt,
        steps=steps.height,
        replicas=steps["replica"].n_unique(),
        gaps=ordered,
        fit=fit,
        tail_threshold_ns=tail_threshold_ns,
        findings=findings,
        notes=notes,
        alignment_error_ns=step_file.alignment_error_ns,
    )


__all__ = [
    "CAUSES",
    "GAP_COLUMNS",
    "UNJOINED_REASONS",
    "Finding",
    "Stalls",
    "stall_analysis",
    "tick_gaps",
    "ticks_of",
]
