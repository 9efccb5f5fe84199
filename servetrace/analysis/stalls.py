"""Where ITL stalls come from: a trace's inter-token gaps joined to the engine's steps
(`stalls_join`) and their excess over the decode-step baseline split by cause
(`stalls_attribution`); with the consistency findings between the two streams.

`stall_analysis` builds the one `Stalls` every view reads (design §10). What the default
views read (the shares overall and in the tail, the worst stalls, the tail stalls per
request, the unjoined gaps) is summed a block of gaps at a time from the attribution's
own columns (`stalls_summary`); the per-gap frame with every column (``--stalls-out``,
the report's chart, `Stalls.gaps`) is made when first asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import polars as pl

from servetrace.analysis.stall_causes import CAUSES, UNJOINED_REASONS
from servetrace.analysis.stall_findings import Finding, Running, consistency
from servetrace.analysis.stalls_attribution import (
    Baseline,
    attribute,
    fit_baseline,
    shares_of,
    with_cause,
    with_step_baseline,
)
from servetrace.analysis.stalls_gaps import by_code, members, tick_gaps, ticks_of
from servetrace.analysis.stalls_join import composition, join_gaps, membership, prepare_steps
from servetrace.analysis.stalls_summary import StallSums, in_tail, largest, summarize_gaps
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
_members = members  # the tests' name for it


@dataclass(frozen=True)
class Joined:
    """What the stall join was made of: enough to make the per-gap frame again."""

    gaps: pl.DataFrame  # `tick_gaps`' gaps, with ``preempted``
    steps: pl.DataFrame  # the timed steps, with their fitted time
    prepared: pl.DataFrame  # `stalls_join.prepare_steps` of them
    codes: pl.DataFrame  # ``_rk, request_id, _pos``
    fit: Baseline

    def ids(self, rk: pl.Series) -> pl.Series:
        return self.codes["request_id"].cast(pl.String).gather(rk).alias("request_id")

    def every_column(self) -> pl.DataFrame:
        """One row per gap, in the per-request frame's order: `GAP_COLUMNS` first, then
        the join's and the causes'."""
        gaps = by_code(self.gaps, self.codes["_pos"].to_numpy())
        pairs = members(self.steps, self.codes)
        joined = attribute(join_gaps(gaps, self.steps, pairs, self.prepared), self.fit)
        joined = joined.drop("_rk").with_columns(self.ids(joined["_rk"]))
        rest = [c for c in joined.columns if c not in GAP_COLUMNS]
        return joined.select(*GAP_COLUMNS, *rest)


@dataclass(frozen=True)
class Stalls:
    """Every gap of the ITL metric joined to its covering steps, and its excess by cause."""

    steps_file: str
    steps_format: str
    steps: int
    replicas: int
    sums: StallSums = field(repr=False)  # what the default views read
    fit: Baseline
    tail_threshold_ns: int | None  # the pooled ITL p99
    source: Joined = field(repr=False, compare=False)
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    alignment_error_ns: int | None = None

    @cached_property
    def gaps(self) -> pl.DataFrame:
        """One row per gap: `GAP_COLUMNS` first, then the join's and causes' (made when
        first asked for)."""
        return self.source.every_column()

    @property
    def gap_count(self) -> int:
        return self.sums.gaps

    @property
    def joined_count(self) -> int:
        return self.sums.joined

    @property
    def joined(self) -> pl.DataFrame:
        return self.gaps.filter(pl.col("unjoined").is_null())

    @property
    def unjoined(self) -> dict[str, int]:
        """Unjoined gaps by reason (`stalls_join.UNJOINED_REASONS`), most first."""
        return dict(self.sums.unjoined)

    @property
    def tail(self) -> pl.DataFrame:
        """Joined gaps at or above the pooled ITL p99."""
        return self.gaps.filter(in_tail(self.tail_threshold_ns))

    def shares(self) -> dict[str, float | int | None]:
        return shares_of(self.sums.overall)

    def tail_shares(self) -> dict[str, Any]:
        height = self.sums.tail_gaps
        out: dict[str, Any] = {"threshold_ns": self.tail_threshold_ns, "tail_gaps": height}
        out["prefill_fraction"] = self.sums.tail_with_prefill / height if height else None
        return {**out, **shares_of(self.sums.tail)}

    def worst(self, n: int = WORST) -> pl.DataFrame:
        """The ``n`` joined gaps of largest excess, with their covering steps."""
        if n > self.sums.kept:
            return _ranked(self.gaps, n)
        few = largest(self.sums.candidates, n)
        few = with_cause(composition(few, self.source.prepared))
        return _ranked(few.with_columns(self.source.ids(few["_rk"])), n)

    def per_request(self, n: int = 5) -> dict[str, Any]:
        """Tail stalls per request: how many requests have any, the most, the worst few."""
        if self.tail_threshold_ns is None:
            return {"requests_with_tail_stalls": None, "max_tail_stalls": None, "top": []}
        per = self.sums.per_request
        per = per.select(self.source.ids(per["_rk"]), "tail_stalls", "excess_ns").sort(
            ["tail_stalls", "excess_ns", "request_id"], descending=[True, True, False]
        )
        return {
            "requests_with_tail_stalls": per.height,
            "max_tail_stalls": int(per["tail_stalls"].max()) if per.height else 0,  # type: ignore[arg-type]
            "top": per.head(n).to_dicts(),
        }


def _ranked(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """The ``n`` gaps of ``frame`` (`Stalls.gaps`' columns) of largest excess, in order."""
    return (
        frame.filter(pl.col("excess_ns").is_not_null())
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


def _replicas(steps: pl.DataFrame, gaps: pl.DataFrame, path: str) -> pl.DataFrame:
    """Steps on the trace's replicas: with one replica on each side, the names need not match."""
    named = steps["replica"].drop_nulls().unique()
    traced = gaps.select(pl.col("replica").unique()).to_series()  # no copy of a constant
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
    sums = summarize_gaps(
        gaps,
        steps,
        prepared,
        membership(gaps, steps, members(steps, codes)),
        fit,
        tail_threshold_ns=tail_threshold_ns,
        requests=codes.height,
        keep=WORST,
    )
    findings = consistency(steps, prepared, ticks, running, sums.gap_tokens)
    if any(f.name == "overlapping_steps" for f in findings):  # said once, as a finding
        notes = tuple(note for note in notes if OVERLAP_NOTE not in note)
    return Stalls(
        steps_file=path,
        steps_format=fmt,
        steps=steps.height,
        replicas=steps["replica"].n_unique(),
        sums=sums,
        fit=fit,
        tail_threshold_ns=tail_threshold_ns,
        source=Joined(gaps, steps, prepared, codes.select("_rk", "request_id", "_pos"), fit),
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
