"""One summary per value of a request attribute (``--by policy``), for every group at once.

Each figure is one pass over all groups — a ``group_by``, or one sort by (group, value)
and index arithmetic over flat arrays — never a filter per group, so 300 groups cost
about what one summary costs (``benchmarks/bench_by.py``). The definitions are those
of ``summary.py`` applied to each group as if it were the whole trace: a group's
throughput and concurrency run over its **own** span (its first arrival to its last
event), so ``--by policy`` on a file of four policies gives each policy the figures of
analysing it alone (``tests/analysis/test_groups.py``). Only the requests of a group are
in it: invalid requests and unplaceable rows belong to no group (they are in the
trace-level summary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import polars as pl

from servetrace.analysis import grouped_censoring
from servetrace.analysis.collector import paused
from servetrace.analysis.concurrency import no_concurrency
from servetrace.analysis.concurrency_groups import concurrency_of_groups
from servetrace.analysis.errors import ERRORED, error_counts_by
from servetrace.analysis.figures import (
    CANCEL_STAGES,
    OUTCOMES,
    THROUGHPUT_KEYS,
    failed,
    rates,
    summary_notes,
)
from servetrace.analysis.grouped_figures import (
    G,
    empty_distribution,
    examples,
    rows_by_group,
)
from servetrace.analysis.grouped_formula import formula_of_groups
from servetrace.analysis.grouped_gaps import CODE, codes, describe_sample, gap_sample, samples_of
from servetrace.analysis.grouped_outcomes import Outcomes, error_flags
from servetrace.analysis.grouped_spans import spans_of, windows_of
from servetrace.analysis.lifecycle import KEY, Timeline
from servetrace.analysis.metrics import LATENCY_METRICS
from servetrace.analysis.summary import (
    Accounting,
    Distribution,
    GoodputReport,
    GoodputTarget,
    Summary,
    goodput,
)
from servetrace.analysis.unavailable import blank_unavailable
from servetrace.stats.grouped_moments import float_moments_of
from servetrace.stats.grouped_order import GroupedSample


def _throughput(
    requests: pl.DataFrame, values: Sequence[Any], known: Mapping[Any, bool], met: Mapping[Any, int]
) -> dict[Any, dict[str, float | None]]:
    """``summary.throughput`` per group: completed requests over first arrival → last end."""
    rows = windows_of(requests, values)
    return {
        value: rates(rows[value], met.get(value))
        if known[value]
        else dict.fromkeys(THROUGHPUT_KEYS)
        for value in values
    }


def _delivered(row: Mapping[str, Any]) -> int | None:
    """Tokens delivered by a group's ended requests; None when a count is unknown."""
    return None if row.get("uncounted") else int(row["tokens"] or 0)


def _errored_by(outcomes: Outcomes) -> dict[Any, dict[str, Any]]:
    """``errors.errored_report`` per group."""
    rows = outcomes.mask(ERRORED)
    counts, ids = outcomes.ended(rows), outcomes.examples(rows)
    times = outcomes.describe(rows, outcomes.requests["e2e_ns"])
    return {
        v: {
            "count": int(counts[v]["count"]),
            "output_tokens_delivered": _delivered(counts[v]),
            "time_to_error_ns": times.get(v, empty_distribution()),
            "examples": ids.get(v, []),
        }
        for v in outcomes.values
    }


def _goodput_by(
    completed: pl.DataFrame, targets: Sequence[GoodputTarget]
) -> dict[Any, GoodputReport]:
    """``summary.goodput`` of each group with completed requests, in one ``group_by``; a
    target no completed request of a group can be judged on is the same UsageError."""
    if not targets:
        return {}
    found = completed.group_by(G, maintain_order=True).agg(
        pl.len().alias("_n"),
        pl.all_horizontal([t.expr() for t in targets]).sum().alias("_met"),
        *[t.expr().mean().alias(f"_share{i}") for i, t in enumerate(targets)],
        *[
            pl.col(f"{t.metric}_ns").null_count().alias(f"_unknown{i}")
            for i, t in enumerate(targets)
        ],
    )
    out: dict[Any, GoodputReport] = {}
    for row in found.iter_rows(named=True):
        n, met = int(row["_n"]), int(row["_met"])
        if any(row[f"_unknown{i}"] == n for i in range(len(targets))):
            goodput(completed.filter(pl.col(G).eq_missing(row[G])), targets)  # raises
        out[row[G]] = {
            "targets": [t.text() for t in targets],
            "requests_met": met,
            "requests_completed": n,
            "fraction": met / n,
            "attainment_by_target": {t.text(): row[f"_share{i}"] for i, t in enumerate(targets)},
        }
    return out


def _gaps(
    gaps: pl.DataFrame | Mapping[Any, Distribution], requests: pl.DataFrame, values: list[Any]
) -> tuple[GroupedSample | None, dict[Any, Distribution]]:
    """Each group's gaps sorted once (``grouped_gaps``), and their ITL distribution; streamed,
    no gaps but the distribution of each group (``gaps``)."""
    if not isinstance(gaps, pl.DataFrame):
        return None, dict(gaps)
    sample = gap_sample(gaps, requests, len(values))
    return sample, describe_sample(sample, values)


def _flag(requests: pl.DataFrame, column: str) -> pl.Expr:
    if column not in requests.columns:
        return pl.lit(True).alias(column)
    return pl.col(column).fill_null(True).all().alias(column)


def _flags(requests: pl.DataFrame) -> dict[Any, dict[str, Any]]:
    """Per group: whether every arrival and tick time is known, and the sources."""
    return rows_by_group(
        requests.group_by(G).agg(
            _flag(requests, "arrival_known"),
            _flag(requests, "ticks_available"),
            (
                pl.col("source").drop_nulls().cast(pl.String).unique().sort().str.join(",")
                if "source" in requests.columns
                else pl.lit("")
            ).alias("source"),
        )
    )


@paused
def summarize_groups(
    timeline: Timeline,
    requests: pl.DataFrame,
    gaps: pl.DataFrame | Mapping[Any, Distribution],
    column: str,
    targets: Sequence[GoodputTarget] = (),
    formula_tolerance: tuple[int, float] = (1_000_000, 0.01),
) -> dict[Any, Summary]:
    """Every group's ``Summary``, nulls last; ``gaps`` is the gap frame or, streamed, the
    ITL distribution of each value."""
    requests = requests.with_columns(pl.col(column).alias(G))
    values = requests[G].unique().sort(nulls_last=True).to_list()
    requests = codes(requests, G, values)
    # The gaps (most of the rows) are sorted by (group, value) beside the per-request
    # figures: NumPy's sort and Polars' queries release the GIL, so the second core works.
    with ThreadPoolExecutor(max_workers=1) as beside:
        sorting = beside.submit(_gaps, gaps, requests, values)
        return _summaries(timeline, requests, values, targets, formula_tolerance, sorting)


def _summaries(
    timeline: Timeline,
    requests: pl.DataFrame,
    values: list[Any],
    targets: Sequence[GoodputTarget],
    formula_tolerance: tuple[int, float],
    sorting: Future[tuple[GroupedSample | None, dict[Any, Distribution]]],
) -> dict[Any, Summary]:
    """``summarize_groups`` once the requests carry their group codes; ``sorting`` yields
    the gaps' sample and ITL distributions (``_gaps``) when they are needed."""
    group_spans = spans_of(timeline.requests, requests, values)
    flags: dict[Any, dict[str, Any]] = (
        {v: {"arrival_known": True, "ticks_available": True, "source": ""} for v in values}
        if not {"arrival_known", "ticks_available", "source"} & set(requests.columns)
        else _flags(requests)
    )
    known = {v: bool(flags[v]["arrival_known"]) for v in values}
    completed = requests.filter(pl.col("outcome") == "completed")
    per_request = [s.column for s in LATENCY_METRICS if s.per != "gap"]
    samples = samples_of(completed, [*per_request, "output_tokens", "prompt_tokens"], len(values))
    described = {
        c: describe_sample(
            sample,
            values,
            None if completed.schema[c].is_integer() else float_moments_of(sample),
        )
        for c, sample in samples.items()
    }
    admissions = {v: bool(group_spans[v]["admissions"]) and timeline.has_admissions for v in values}
    busy = concurrency_of_groups(
        timeline.transitions,
        requests,
        values,
        {v: group_spans[v] for v in values if known[v]},
        admissions,
        CODE,
    )
    formulas = formula_of_groups(completed, values, *formula_tolerance)
    goodputs: dict[Any, GoodputReport | None] = dict(_goodput_by(completed, targets))
    met = {v: g["requests_met"] for v, g in goodputs.items() if g is not None}
    if targets:
        met |= {v: 0 for v in values if v not in goodputs}
    rates = _throughput(requests, values, known, met)
    outcomes = Outcomes.of(requests, values)
    cancelled_rows = outcomes.mask("cancelled")
    cancels = outcomes.ended(cancelled_rows, error_flags(requests, failed(requests.columns)))
    cancel_ids = outcomes.examples(cancelled_rows)
    to_cancel = outcomes.describe(cancelled_rows, requests["e2e_ns"])
    flying_rows = outcomes.mask("in_flight")
    flying, flying_ids = outcomes.ended(flying_rows), outcomes.examples(flying_rows)
    group_end = pl.Series([group_spans[v]["end"] for v in values], dtype=pl.Int64)
    ages = outcomes.describe(flying_rows, group_end.gather(requests[CODE]) - requests["arrival_ns"])
    leaked_count: dict[Any, int] = {}
    leaked_ids: dict[Any, list[Any]] = {}
    if timeline.has_releases:  # without releases no group reports leaked state
        leaked_rows = (
            timeline.requests.drop(G, strict=False)
            .join(requests.select(KEY, G), on=KEY, how="inner")
            .filter(
                pl.col("rule").is_null()
                & pl.col("terminal_ns").is_not_null()
                & (pl.col("n_release").fill_null(0) == 0)
            )
        )
        leaked_count = dict(leaked_rows.group_by(G).len().iter_rows())
        leaked_ids = examples(leaked_rows)
    outcome_counts = outcomes.counts("outcome", OUTCOMES)
    errors_by = error_counts_by(requests, G) if outcomes.mask(ERRORED).any() else {}
    errored_by = _errored_by(outcomes)
    stages = outcomes.counts("cancelled_in", CANCEL_STAGES)
    empty = empty_distribution()
    gap_sample, itl = sorting.result()
    metrics_of = {
        value: {
            s.name: itl.get(value, empty)
            if s.per == "gap"
            else described[s.column].get(value, empty)
            for s in LATENCY_METRICS
        }
        for value in values
    }
    last_events = {v: group_spans[v]["end"] for v in values}
    censored = grouped_censoring.estimates(
        values,
        metrics_of,
        known,
        requests,
        samples | {"itl_ns": gap_sample},
        last_events,
        admissions,
    )
    survival_of, intervals_of = censored if censored is not None else ({}, {})
    result: dict[Any, Summary] = {}
    for value in values:
        span, n_done = group_spans[value], outcome_counts.get((value, "completed"), 0)
        notes = summary_notes(n_done, known[value])
        metrics = metrics_of[value]
        leaked = (
            {"requests": leaked_count.get(value, 0), "examples": leaked_ids.get(value, [])}
            if timeline.has_releases and span["releases"]
            else None
        )
        result[value] = Summary(
            accounting=Accounting(
                rows=int(span["rows"]),
                rows_analyzed=int(span["rows"]),
                rows_quarantined=0,
                requests=int(span["requests"]),
                requests_valid=int(span["requests"]),
                requests_invalid=0,
            ),
            outcomes={n: outcome_counts.get((value, n), 0) for n in OUTCOMES},
            cancelled_in={n: stages.get((value, n), 0) for n in CANCEL_STAGES},
            violations={},
            metrics=metrics,
            tokens={
                "output_tokens": described["output_tokens"].get(value, empty),
                "prompt_tokens": described["prompt_tokens"].get(value, empty),
            },
            cancelled={
                "count": int(cancels[value]["count"]),
                "with_error": int(cancels[value]["with_error"]),
                "output_tokens_delivered": _delivered(cancels[value]),
                "time_to_cancel_ns": to_cancel.get(value, empty),
                "examples": cancel_ids.get(value, []),
            },
            in_flight={
                "count": int(flying[value]["count"]),
                "output_tokens_delivered": _delivered(flying[value]),
                "age_at_end_ns": ages.get(value, empty),
                "examples": flying_ids.get(value, []),
            },
            throughput=rates[value],
            # no targets: None, as ``goodput`` says, without an empty frame per group
            goodput=goodputs[value]
            if value in goodputs
            else (goodput(completed.clear(), targets) if targets else None),
            concurrency=busy[value] if value in busy else no_concurrency(),
            formula=formulas[value],
            leaked_state=leaked,
            source=flags[value]["source"] or "server",
            arrival_known=known[value],
            ticks_available=bool(flags[value]["ticks_available"]),
            warnings=tuple(notes),
            errors=errors_by.get(value, {}),
            errored=errored_by[value],
            # completed requests without an output count: all of them less those counted
            output_uncounted=n_done - int(described["output_tokens"][value]["count"] or 0),
            survival=survival_of.get(value),
            intervals=intervals_of.get(value, {}),
        )
        result[value] = blank_unavailable(result[value])
    return result
