"""The summary's counts and rates, per group (``groups.Groups``): one ``group_by`` each.

Outcomes and cancellation stages by name, what is known of each group (send times,
ticks, sources), the throughput rates over a window, goodput, the cancelled, in-flight
and errored reports, leaked state, error codes and the notes. The whole trace is the
one group of ``Groups.whole``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from servetrace.analysis.errors import ERRORED, error_key
from servetrace.analysis.groups import CODE, Groups, Sample
from servetrace.errors import UsageError
from servetrace.stats.describe import describe_sorted
from servetrace.units import NS_PER_S

OUTCOMES = ("completed", "cancelled", "in_flight", ERRORED)
# "unknown": the source dropped the request's partial output (analysis.metrics).
CANCEL_STAGES = ("queued", "prefill", "decode", "before_first_token", "unknown")
NAMED = (("outcome", OUTCOMES), ("cancelled_in", CANCEL_STAGES))  # counted by name
THROUGHPUT_KEYS = (
    "window_s",
    "requests_per_s",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "goodput_requests_per_s",
)
# HTTP 499 is "client closed request": the client's own cancellation, not a failure.
CLIENT_CLOSED = 499
EXAMPLES_SHOWN = 5


def failed(columns: Sequence[str]) -> pl.Expr:
    """Whether a cancellation is a failure: it carries an error code other than 499.

    Client tools end failed requests (HTTP 429, timeouts) with a cancellation too; the
    importer keeps their error code, so the report can tell failing from giving up.
    """
    if "error_code" not in columns:
        return pl.lit(False)
    return pl.col("error_code").is_not_null() & (pl.col("error_code") != CLIENT_CLOSED)


def _flag(columns: Sequence[str], column: str) -> pl.Expr:
    if column not in columns:
        return pl.lit(True).alias(column)
    return pl.col(column).fill_null(True).all().alias(column)


def known(requests: pl.DataFrame, groups: Groups) -> list[dict[str, Any]]:
    """Per group: whether every send and tick time is known, and the sources (server by
    default). A group without requests knows everything (nothing is missing)."""
    columns = requests.columns
    source = (
        pl.col("source").drop_nulls().cast(pl.String).unique().sort().str.join(",")
        if "source" in columns
        else pl.lit("")
    )
    rows = groups.rows(
        requests,
        pl.len().alias("requests"),
        *[pl.col(c).eq(n).sum().alias(f"{c}:{n}") for c, names in NAMED for n in names],
        _flag(columns, "arrival_known"),
        _flag(columns, "ticks_available"),
        source.alias("source"),
        *_preemption_counts(columns),
    )
    default = {"arrival_known": True, "ticks_available": True, "source": "", "requests": 0}
    return [row or dict(default) for row in rows]


def _preemption_counts(columns: Sequence[str]) -> list[pl.Expr]:
    """Preemption events, and requests preempted at least once, over valid requests."""
    if "preemptions" not in columns:
        return []
    events = pl.col("preemptions").fill_null(0)
    return [events.sum().alias("preemption_events"), (events > 0).sum().alias("preempted")]


def preemptions(row: Mapping[str, Any], admissions: bool) -> dict[str, int] | None:
    """``{"events", "requests"}`` from ``known``'s row; None where the trace cannot see
    preemptions (no admissions: a client-side trace)."""
    if not admissions or "preemption_events" not in row:
        return None
    return {
        "events": int(row.get("preemption_events") or 0),
        "requests": int(row.get("preempted") or 0),
    }


def counted(row: Mapping[str, Any], column: str, names: Sequence[str]) -> dict[str, int]:
    """``{name: requests}`` of ``column`` (outcome, cancelled_in) from ``known``'s row."""
    return {n: int(row.get(f"{column}:{n}") or 0) for n in names}


def window_aggregates() -> list[pl.Expr]:
    """What the rates need from the per-request frame."""
    done = pl.col("outcome") == "completed"
    return [
        pl.col("arrival_ns").min().alias("start"),
        (pl.col("arrival_ns") + pl.col("e2e_ns")).max().alias("end"),
        done.sum().alias("completed"),
        pl.col("output_tokens").filter(done).sum().alias("output"),
        # an unknown count (analysis.output_counts) leaves the token rates unknown
        pl.col("output_tokens").filter(done).null_count().alias("output_missing"),
        pl.col("prompt_tokens").filter(done).sum().alias("prompt"),
        pl.col("prompt_tokens").filter(done).null_count().alias("prompt_missing"),
    ]


def rates(window: Mapping[str, Any] | None, goodput_met: int | None) -> dict[str, float | None]:
    """Rates of completed requests over the window first arrival → last terminal event.

    ``window``: the ``window_aggregates`` of the requests. The total rate needs every
    completed request's prompt length; the goodput rate needs targets (``goodput_met``).
    No window (no end, or no length), no rates.
    """
    if window is None:
        return dict.fromkeys(THROUGHPUT_KEYS)
    start, end = window["start"], window["end"]
    if start is None or end is None or end <= start:
        return dict.fromkeys(THROUGHPUT_KEYS)
    window_s = (end - start) / NS_PER_S
    completed = window["completed"]
    output, prompt = int(window["output"] or 0), int(window["prompt"] or 0)
    prompt_known = completed > 0 and window["prompt_missing"] == 0
    counted_all = window["output_missing"] == 0  # else unknown (analysis.output_counts)
    return {
        "window_s": window_s,
        "requests_per_s": completed / window_s,
        "output_tokens_per_s": output / window_s if counted_all else None,
        "total_tokens_per_s": (
            (output + prompt) / window_s if prompt_known and counted_all else None
        ),
        "goodput_requests_per_s": goodput_met / window_s if goodput_met is not None else None,
    }


def goodput(completed: pl.DataFrame, groups: Groups, targets: Sequence[Any]) -> list[Any]:
    """Per group: completed requests meeting every per-request target (``GoodputTarget``),
    and the share meeting each; None without targets. A target no completed request of a
    group can be judged on is a usage error."""
    if not targets:
        return [None] * len(groups)
    rows = groups.rows(
        completed,
        pl.len().alias("_n"),
        pl.all_horizontal([t.expr() for t in targets]).sum().alias("_met"),
        *[t.expr().mean().alias(f"_share{i}") for i, t in enumerate(targets)],
        *[
            pl.col(f"{t.metric}_ns").null_count().alias(f"_unknown{i}")
            for i, t in enumerate(targets)
        ],
    )
    out = []
    for row in rows:
        n = int(row["_n"]) if row else 0
        for i, target in enumerate(targets):
            if row and row[f"_unknown{i}"] == n:
                raise UsageError(
                    f"goodput target {target.text()}: no completed request has a "
                    f"{target.metric} in this trace",
                    hint="queue_wait and prefill need admission events (client-side tools "
                    "have none); tpot needs outputs of 2+ tokens",
                )
        out.append(
            {
                "targets": [t.text() for t in targets],
                "requests_met": int(row["_met"]) if row else 0,
                "requests_completed": n,
                "fraction": int(row["_met"]) / n if row else None,
                "attainment_by_target": {
                    t.text(): (row[f"_share{i}"] if row else None) for i, t in enumerate(targets)
                },
            }
        )
    return out


def ended(
    requests: pl.DataFrame,
    groups: Groups,
    outcome: str,
    duration: str,
    age_end: Sequence[int | None] | None = None,
) -> list[dict[str, Any]]:
    """Per group, the summary's report of its requests of ``outcome`` (cancelled, in
    flight, errored): count, the cancellations that failed, tokens delivered (None when a
    count is unknown), the distribution (named ``duration``) of their e2e — or, with
    ``age_end``, of their age at it — and examples."""
    mine = requests.filter(pl.col("outcome") == outcome)
    tallies = groups.rows(
        mine,
        pl.len().alias("count"),
        failed(requests.columns).sum().alias("with_error"),
        pl.col("output_tokens").sum().alias("tokens"),
        pl.col("output_tokens").null_count().alias("uncounted"),
    )
    if age_end is None:
        durations = mine
        column = "e2e_ns"
    else:
        end = pl.Series(list(age_end), dtype=pl.Int64)  # a group without an end: no ages
        durations = mine.select(CODE, (end.gather(mine[CODE]) - pl.col("arrival_ns")).alias("age"))
        column = "age"
    sample: Sample = groups.sample(durations, column)
    examples = groups.examples(mine, EXAMPLES_SHOWN)
    out = []
    for g in groups:
        row = tallies[g]
        report: dict[str, Any] = {"count": int(row["count"]) if row else 0}
        if outcome == "cancelled":
            report["with_error"] = int(row["with_error"] or 0) if row else 0
        report["output_tokens_delivered"] = (
            None if row and row["uncounted"] else (int(row["tokens"] or 0) if row else 0)
        )
        report[duration] = describe_sorted(sample.of(g))
        report["examples"] = examples[g]
        out.append(report)
    return out


def error_codes(requests: pl.DataFrame, groups: Groups) -> list[dict[str, int]]:
    """Per group, ``{code: requests}`` of errored requests, most frequent first (ties by
    code)."""
    errored = requests.filter(pl.col("outcome") == ERRORED)
    out: list[dict[str, int]] = [{} for _ in groups]
    if errored.height == 0:
        return out
    counts = (
        errored.select(CODE, error_key(errored.columns).alias("code"))
        .group_by(CODE, "code")
        .len()
        .sort([CODE, "len", "code"], descending=[False, True, False])
    )
    for group, code, n in counts.iter_rows():
        out[group][str(code)] = int(n)
    return out


def notes(completed: int, arrival_known: bool) -> list[str]:
    """What the reader of a summary must know about its numbers."""
    out = []
    if 0 < completed < 100:
        out.append(f"only {completed} completed requests: p99 and p99.9 are unreliable")
    if not arrival_known:
        out.append(
            "send times are unknown in this trace: throughput and concurrency are not "
            "computed (latencies are measured from each request's own send)"
        )
    return out
