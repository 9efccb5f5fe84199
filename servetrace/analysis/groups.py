"""One summary per value of a request attribute (``--by policy``), for every group at once.

Each figure is one ``group_by`` over all groups — never a filter per group, so 300 groups
cost about what one summary costs (``benchmarks/bench_by.py``). The definitions are those
of ``summary.py`` applied to each group as if it were the whole trace: a group's
throughput and concurrency run over its **own** span (its first arrival to its last
event), so ``--by policy`` on a file of four policies gives each policy the figures of
analysing it alone (``tests/analysis/test_groups.py``). Only the requests of a group are
in it: invalid requests and unplaceable rows belong to no group (they are in the
trace-level summary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from servetrace.analysis.formula import WORST_SHOWN, FormulaCheck, FormulaReport, _likely_cause
from servetrace.analysis.lifecycle import KEY, Timeline
from servetrace.analysis.metrics import LATENCY_METRICS
from servetrace.analysis.summary import (
    EXAMPLES_SHOWN,
    NS_PER_S,
    Accounting,
    Distribution,
    GoodputReport,
    GoodputTarget,
    Summary,
    goodput,
)
from servetrace.stats import STATISTICS, percentile_of

G = "_group"
# Every timestamp a timeline row carries: the latest is the request's last event.
EVENT_TIMES = (
    "arrival_ns",
    "admission_ns",
    "terminal_ns",
    "last_control_ns",
    "release_ns",
    "first_tick_ns",
    "last_tick_ns",
)
CONCURRENCY = ("queued", "running", "in_system")


def _rows(frame: pl.DataFrame) -> dict[Any, dict[str, Any]]:
    return {row[G]: row for row in frame.iter_rows(named=True)}


def _empty_distribution() -> Distribution:
    return {name: (0 if name == "count" else None) for name in STATISTICS}


def describe_groups(
    frame: pl.DataFrame, columns: Sequence[str]
) -> dict[str, dict[Any, Distribution]]:
    """``stats.describe`` of each column, per group: one ``group_by`` for all of them."""
    exprs = []
    for c in columns:
        v = pl.col(c).drop_nulls()
        if frame.schema[c].is_float():
            v = v.drop_nans()
        parts = {"count": v.count(), "mean": v.mean(), "std": v.std(ddof=0)}
        parts |= {"min": v.min(), "max": v.max()}
        for name in STATISTICS:
            q = percentile_of(name)
            if q is not None and name not in parts:
                parts[name] = v.quantile(q / 100, interpolation="linear")
        exprs += [e.cast(pl.Float64).alias(f"{c}\x00{n}") for n, e in parts.items()]
    rows = _rows(frame.group_by(G).agg(exprs)) if exprs else {}
    out: dict[str, dict[Any, Distribution]] = {}
    for c in columns:
        out[c] = {}
        for value, row in rows.items():
            count = int(row[f"{c}\x00count"] or 0)
            out[c][value] = (
                {n: count if n == "count" else row[f"{c}\x00{n}"] for n in STATISTICS}
                if count
                else _empty_distribution()
            )
    return out


def _examples(frame: pl.DataFrame) -> dict[Any, list[Any]]:
    """The first few request ids of each group, earliest arrival first (as ``_ids``)."""
    ordered = frame.sort("arrival_ns", "request_id", nulls_last=True, maintain_order=True)
    heads = ordered.group_by(G, maintain_order=True).head(EXAMPLES_SHOWN)
    out: dict[Any, list[Any]] = {}
    for value, rid in heads.select(G, "request_id").iter_rows():
        out.setdefault(value, []).append(rid)
    return out


def _spans(rows: pl.DataFrame) -> dict[Any, dict[str, Any]]:
    times = [c for c in EVENT_TIMES if c in rows.columns]
    return _rows(
        rows.group_by(G).agg(
            pl.col("arrival_ns").min().alias("start"),
            pl.max_horizontal(pl.col(c).max() for c in times).alias("end"),
            pl.col("admission_ns").is_not_null().any().alias("admissions"),
            (pl.col("n_release").fill_null(0) > 0).any().alias("releases"),
            pl.len().alias("requests"),
            pl.col("rows").sum().alias("rows"),
        )
    )


def _concurrency(
    transitions: pl.DataFrame, spans: Mapping[Any, dict[str, Any]], admissions: Mapping[Any, bool]
) -> dict[Any, dict[str, float | int | None]]:
    """``summary.concurrency`` per group over its own [start, end]."""
    if transitions.height == 0:
        return {}
    bounds = pl.DataFrame(
        {
            G: list(spans),
            "start": [s["start"] for s in spans.values()],
            "end": [s["end"] for s in spans.values()],
        },
        schema={G: transitions.schema[G], "start": pl.Int64, "end": pl.Int64},
    )
    levels = (
        transitions.group_by(G, "ts")
        .agg(pl.col(f"d_{n}").sum() for n in CONCURRENCY)
        .sort(G, "ts")
        .with_columns(pl.col(f"d_{n}").cum_sum().over(G).alias(n) for n in CONCURRENCY)
        .join(bounds, on=G, how="inner", nulls_equal=True)
        .filter((pl.col("ts") <= pl.col("end")) & (pl.col("end") > pl.col("start")))
        .with_columns(pl.col("ts").clip(pl.col("start"), pl.col("end")).alias("at"))
        .with_columns(
            (pl.col("at").shift(-1).over(G).fill_null(pl.col("end")) - pl.col("at"))
            .cast(pl.Float64)
            .alias("held")
        )
    )
    width = (pl.col("end") - pl.col("start")).first().cast(pl.Float64)
    aggregated = levels.group_by(G).agg(
        *[
            ((pl.col(n).cast(pl.Float64) * pl.col("held")).sum() / width).alias(f"{n}_mean")
            for n in CONCURRENCY
        ],
        *[pl.col(n).max().alias(f"{n}_peak") for n in CONCURRENCY],
    )
    out: dict[Any, dict[str, float | int | None]] = {}
    for value, row in _rows(aggregated).items():
        out[value] = {}
        for n in CONCURRENCY:
            known = n == "in_system" or admissions.get(value, False)
            out[value][f"{n}_mean"] = float(row[f"{n}_mean"]) if known else None
            out[value][f"{n}_peak"] = int(row[f"{n}_peak"]) if known else None
    return out


def _formula_checks(
    frame: pl.DataFrame, residual: str, abs_tol_ns: int, rel_tol: float
) -> dict[Any, FormulaCheck]:
    """``formula._check`` per group."""
    checked = frame.filter(pl.col(residual).is_not_null())
    tolerance = pl.max_horizontal(pl.lit(float(abs_tol_ns)), pl.col("response_ns") * rel_tol)
    within = _rows(
        checked.group_by(G).agg(
            pl.len().alias("n"), (pl.col(residual).abs() <= tolerance).sum().alias("within")
        )
    )
    residuals = describe_groups(checked, [residual])[residual]
    worst = (
        checked.with_columns(pl.col(residual).abs().alias("_abs"), _likely_cause().alias("cause"))
        .sort("_abs", descending=True, maintain_order=True)
        .group_by(G, maintain_order=True)
        .head(WORST_SHOWN)
        .select(
            G,
            "request_id",
            pl.col(residual).alias("residual_ns"),
            "response_ns",
            "output_tokens",
            "ticks",
            "preemptions",
            "cause",
        )
    )
    worst_of: dict[Any, list[dict[str, object]]] = {}
    for row in worst.iter_rows(named=True):
        worst_of.setdefault(row.pop(G), []).append(row)
    return {
        value: FormulaCheck(
            checked=int(row["n"]),
            within_tolerance=int(row["within"]),
            residual_ns=residuals[value],
            worst=tuple(worst_of.get(value, [])),
        )
        for value, row in within.items()
    }


def _formula(
    completed: pl.DataFrame, values: Sequence[Any], abs_tol_ns: int, rel_tol: float
) -> dict[Any, FormulaReport]:
    """``formula.check_formula`` per group."""
    checkable = completed.filter(pl.col("response_ns").is_not_null())
    per_request = _formula_checks(checkable, "formula_residual_ns", abs_tol_ns, rel_tol)
    fleet_itl = _rows(
        checkable.filter(pl.col("output_tokens") >= 2)
        .group_by(G)
        .agg(
            pl.col("decode_ns").sum().alias("decode"),
            (pl.col("output_tokens") - 1).sum().alias("steps"),
        )
        .filter(pl.col("steps") > 0)
        .with_columns((pl.col("decode") / pl.col("steps")).alias("fleet_itl"))
    )
    itl = pl.DataFrame(
        {G: list(fleet_itl), "_fleet_itl": [r["fleet_itl"] for r in fleet_itl.values()]},
        schema={G: completed.schema[G], "_fleet_itl": pl.Float64},
    )
    errors = checkable.join(itl, on=G, how="inner", nulls_equal=True).with_columns(
        (
            pl.col("response_ns")
            - pl.col("ttft_ns")
            - (pl.col("output_tokens") - 1).clip(lower_bound=0) * pl.col("_fleet_itl")
        ).alias("fleet_error_ns")
    )
    fleet = _formula_checks(errors, "fleet_error_ns", abs_tol_ns, rel_tol)
    counts = dict(checkable.group_by(G).len().iter_rows())
    empty = FormulaCheck(0, 0, _empty_distribution(), ())
    out: dict[Any, FormulaReport] = {}
    for value in values:
        notes: list[str] = []
        itl_value = fleet_itl[value]["fleet_itl"] if value in fleet_itl else None
        if itl_value is None:
            notes.append("no completed request has 2 or more output tokens: no fleet ITL")
        check = per_request.get(value, empty)
        unchecked = counts.get(value, 0) - check.checked
        if unchecked:
            notes.append(
                f"{unchecked} completed requests have no per-tick times (single tick carrying "
                "several tokens, or a request-level import): per-request check skipped for them"
            )
        out[value] = FormulaReport(
            abs_tol_ns=abs_tol_ns,
            rel_tol=rel_tol,
            per_request=check,
            fleet=fleet.get(value, empty) if itl_value is not None else empty,
            fleet_itl_ns=float(itl_value) if itl_value is not None else None,
            notes=tuple(notes),
        )
    return out


def _throughput(
    requests: pl.DataFrame, values: Sequence[Any], known: Mapping[Any, bool], met: Mapping[Any, int]
) -> dict[Any, dict[str, float | None]]:
    """``summary.throughput`` per group: completed requests over first arrival → last end."""
    completed = pl.col("outcome") == "completed"
    rows = _rows(
        requests.group_by(G).agg(
            pl.col("arrival_ns").min().alias("start"),
            (pl.col("arrival_ns") + pl.col("e2e_ns")).max().alias("end"),
            completed.sum().alias("completed"),
            pl.col("output_tokens").filter(completed).sum().alias("output"),
            pl.col("prompt_tokens").filter(completed).sum().alias("prompt"),
            pl.col("prompt_tokens").filter(completed).null_count().alias("prompt_missing"),
        )
    )
    keys = ("window_s", "requests_per_s", "output_tokens_per_s", "total_tokens_per_s")
    out: dict[Any, dict[str, float | None]] = {}
    for value in values:
        row = rows[value]
        nothing = dict.fromkeys((*keys, "goodput_requests_per_s"))
        end, start = row["end"], row["start"]
        if not known[value] or end is None or start is None or end <= start:
            out[value] = nothing
            continue
        window_s = (end - start) / NS_PER_S
        prompt_known = row["completed"] > 0 and row["prompt_missing"] == 0
        output, prompt = int(row["output"] or 0), int(row["prompt"] or 0)
        out[value] = {
            "window_s": window_s,
            "requests_per_s": row["completed"] / window_s,
            "output_tokens_per_s": output / window_s,
            "total_tokens_per_s": (output + prompt) / window_s if prompt_known else None,
            "goodput_requests_per_s": met[value] / window_s if value in met else None,
        }
    return out


def _ended(
    frame: pl.DataFrame, outcome: str, values: Sequence[Any], extra: Sequence[pl.Expr] = ()
) -> tuple[dict[Any, dict[str, Any]], dict[Any, list[Any]]]:
    """Counts and token sums of the requests with ``outcome``, and their example ids."""
    of = frame.filter(pl.col("outcome") == outcome)
    counts = _rows(
        of.group_by(G).agg(
            pl.len().alias("count"), pl.col("output_tokens").sum().alias("tokens"), *extra
        )
    )
    empty = {"count": 0, "tokens": 0, "with_error": 0}
    return {v: counts.get(v, empty) for v in values}, _examples(of)


def _pair_counts(requests: pl.DataFrame, column: str) -> dict[tuple[Any, Any], int]:
    counts = requests.group_by(G, column).len()
    return {(g, c): int(n) for g, c, n in counts.iter_rows()}


def _flag(requests: pl.DataFrame, column: str) -> pl.Expr:
    if column not in requests.columns:
        return pl.lit(True).alias(column)
    return pl.col(column).fill_null(True).all().alias(column)


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
    group_of = requests.select(KEY, G)
    rows = timeline.requests.drop(G, strict=False).join(group_of, on=KEY, how="inner")
    spans = _spans(rows)
    flags = _rows(
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
    known = {v: bool(flags[v]["arrival_known"]) for v in values}
    completed = requests.filter(pl.col("outcome") == "completed")
    per_request = [s.column for s in LATENCY_METRICS if s.per != "gap"]
    described = describe_groups(completed, [*per_request, "output_tokens", "prompt_tokens"])
    if isinstance(gaps, pl.DataFrame):
        itl = describe_groups(gaps.join(group_of, on=KEY, how="inner"), ["itl_ns"])["itl_ns"]
    else:
        itl = dict(gaps)
    admissions = {v: bool(spans[v]["admissions"]) and timeline.has_admissions for v in values}
    busy = _concurrency(
        timeline.transitions.join(group_of, on=KEY, how="inner"),
        {v: spans[v] for v in values if known[v]},
        admissions,
    )
    formulas = _formula(completed, values, *formula_tolerance)
    goodputs: dict[Any, GoodputReport | None] = {}
    for value, part in completed.partition_by(G, as_dict=True).items() if targets else ():
        goodputs[value[0]] = goodput(part, targets)  # one partition pass, few targets
    met = {v: g["requests_met"] for v, g in goodputs.items() if g is not None}
    if targets:
        met |= {v: 0 for v in values if v not in goodputs}
    rates = _throughput(requests, values, known, met)
    error = (
        (pl.col("error_code").is_not_null() & (pl.col("error_code") != 499)).sum()
        if "error_code" in requests.columns
        else pl.lit(0)
    )
    cancels, cancel_ids = _ended(requests, "cancelled", values, [error.alias("with_error")])
    to_cancel = describe_groups(requests.filter(pl.col("outcome") == "cancelled"), ["e2e_ns"])
    ends = pl.DataFrame(
        {G: values, "_end": [spans[v]["end"] for v in values]},
        schema={G: requests.schema[G], "_end": pl.Int64},
    )
    flying_rows = requests.join(ends, on=G, how="left", nulls_equal=True).with_columns(
        (pl.col("_end") - pl.col("arrival_ns")).alias("age_ns")
    )
    flying, flying_ids = _ended(flying_rows, "in_flight", values)
    ages = describe_groups(flying_rows.filter(pl.col("outcome") == "in_flight"), ["age_ns"])
    leaked_rows = rows.filter(
        pl.col("rule").is_null()
        & pl.col("terminal_ns").is_not_null()
        & (pl.col("n_release").fill_null(0) == 0)
    )
    leaked_count = dict(leaked_rows.group_by(G).len().iter_rows())
    leaked_ids = _examples(leaked_rows)
    outcome_counts = _pair_counts(requests, "outcome")
    stages = _pair_counts(requests, "cancelled_in")
    result: dict[Any, Summary] = {}
    for value in values:
        span, n_done = spans[value], outcome_counts.get((value, "completed"), 0)
        notes = []
        if 0 < n_done < 100:
            notes.append(f"only {n_done} completed requests: p99 and p99.9 are unreliable")
        if not known[value]:
            notes.append(
                "send times are unknown in this trace: throughput and concurrency are not "
                "computed (latencies are measured from each request's own send)"
            )
        empty = _empty_distribution()
        metrics = {
            s.name: itl.get(value, empty)
            if s.per == "gap"
            else described[s.column].get(value, empty)
            for s in LATENCY_METRICS
        }
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
            outcomes={
                n: outcome_counts.get((value, n), 0)
                for n in ("completed", "cancelled", "in_flight")
            },
            cancelled_in={
                n: stages.get((value, n), 0)
                for n in ("queued", "prefill", "decode", "before_first_token")
            },
            violations={},
            metrics=metrics,
            tokens={
                "output_tokens": described["output_tokens"].get(value, empty),
                "prompt_tokens": described["prompt_tokens"].get(value, empty),
            },
            cancelled={
                "count": int(cancels[value]["count"]),
                "with_error": int(cancels[value]["with_error"]),
                "output_tokens_delivered": int(cancels[value]["tokens"] or 0),
                "time_to_cancel_ns": to_cancel["e2e_ns"].get(value, empty),
                "examples": cancel_ids.get(value, []),
            },
            in_flight={
                "count": int(flying[value]["count"]),
                "output_tokens_delivered": int(flying[value]["tokens"] or 0),
                "age_at_end_ns": ages["age_ns"].get(value, empty),
                "examples": flying_ids.get(value, []),
            },
            throughput=rates[value],
            goodput=goodputs.get(value, goodput(completed.clear(), targets)),
            concurrency=busy.get(
                value, {f"{n}_{s}": None for n in CONCURRENCY for s in ("mean", "peak")}
            ),
            formula=formulas[value],
            leaked_state=leaked,
            source=flags[value]["source"] or "server",
            arrival_known=known[value],
            ticks_available=bool(flags[value]["ticks_available"]),
            warnings=tuple(notes),
        )
    return result
