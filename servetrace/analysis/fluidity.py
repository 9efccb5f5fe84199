"""Etalon's fluidity-index: per-token deadlines with slack carried forward (``--fluidity``).

The definition followed is the source of project-etalon/etalon,
``etalon/metrics/metric_utils.py::get_request_level_deadline_miss_rate`` (its docs:
``docs/tutorials/metrics_used.rst``, *fluidity-index*). Given a TTFT target ``D_p`` and a
time-between-tokens target ``D_d``, Etalon walks a request's inter-token times ``x_i``
(``x_1`` = arrival → first token; a chunk of ``k`` tokens is one gap then ``k − 1`` zero
gaps, as its client records them) with a slack ``s`` (0 at the start):

- token ``i`` meets its deadline when ``x_i ≤ D + s`` (``D = D_p`` for the first token,
  ``D_d`` after): one deadline met, and ``s += D − x_i``;
- otherwise it counts ``m = 1 + ⌊(x_1 − D_p)/D_d⌋`` (first token) or ``m = ⌊(x_i − s)/D_d⌋``
  (later tokens) deadlines, all missed, and the slack resets to 0;
- deadline-miss rate = missed / total deadlines; the fluidity-index is 1 − that rate.

While no deadline is missed the slack makes token ``i``'s deadline
``arrival + D_p + (i − 1)·D_d``; after a miss at token ``j`` (time ``t_j``) the schedule
restarts from it: ``t_j + (i − j)·D_d``. With ``u_i = t_i − (i − 1)·D_d`` both read
``u_i ≤ threshold``, where the threshold is ``arrival + D_p`` until the first miss and
``u_j`` of the last missed token after — and since a missed ``u_j`` exceeds the threshold
before it, **the threshold is the running maximum** ``max(arrival + D_p, u_1 … u_{i−1})``.
A token misses exactly when it sets a new record of ``u``, and its lateness
``u_i − threshold`` gives ``m = 1 + ⌊lateness / D_d⌋`` in both of Etalon's cases. That is
a cumulative maximum over the ticks of each request: one vectorised Polars pass, exact in
integer ns (Etalon's float slack sums to the same comparisons). Within a chunk only the
first token can miss (the others share its time and have smaller ``u``).

Per request: ``fluidity_deadlines``, ``fluidity_missed`` (missed deadlines),
``fluidity_tokens_missed`` (tokens that missed theirs) and ``fluidity_index``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from servetrace.analysis.lifecycle import KEY, Timeline
from servetrace.errors import UsageError
from servetrace.units import DURATION_UNITS_TEXT, NS_PER_MS, TIME_UNIT_SPELLINGS, duration_ns

COLUMNS = ("fluidity_index", "fluidity_deadlines", "fluidity_missed", "fluidity_tokens_missed")
SOURCE = (
    "Etalon fluidity-index (project-etalon/etalon, etalon/metrics/metric_utils.py "
    "get_request_level_deadline_miss_rate): 1 - missed/total per-token deadlines, "
    "deadline of token i = arrival + ttft + (i-1)*tbt, slack carried forward, "
    "schedule restarted at each miss"
)
_PAIR = re.compile(r"^\s*(ttft|tbt)\s*=\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zµμ]*)\s*$")


@dataclass(frozen=True)
class FluidityTargets:
    """The per-token deadlines: TTFT target and time-between-tokens target, in ns."""

    ttft_ns: int
    tbt_ns: int

    def text(self) -> str:
        return f"ttft={self.ttft_ns / NS_PER_MS:g}ms,tbt={self.tbt_ns / NS_PER_MS:g}ms"


def parse_targets(text: str, flag: str = "--fluidity") -> FluidityTargets:
    """``ttft=500ms,tbt=50ms`` (the units of ``units.duration_ns``; both required)."""
    found: dict[str, int] = {}
    hint = "e.g. --fluidity ttft=500ms,tbt=50ms"
    for part in text.split(","):
        match = _PAIR.match(part.lower())
        if not match:
            raise UsageError(f"{flag} {text!r}: cannot read {part.strip()!r}", hint=hint)
        name, number, unit = match.groups()
        if unit not in TIME_UNIT_SPELLINGS:
            raise UsageError(
                f"{flag} {text!r}: {name} needs a time unit ({DURATION_UNITS_TEXT})", hint=hint
            )
        if name in found:
            raise UsageError(f"{flag} {text!r}: {name} given twice", hint=hint)
        found[name] = duration_ns(f"{number}{unit}") or 0
    missing = [n for n in ("ttft", "tbt") if n not in found]
    if missing:
        raise UsageError(f"{flag} {text!r}: missing {' and '.join(missing)}", hint=hint)
    if found["tbt"] <= 0 or found["ttft"] < 0:
        raise UsageError(f"{flag} {text!r}: tbt must be > 0 and ttft >= 0", hint=hint)
    if max(found.values()) > 2**62:
        raise UsageError(f"{flag} {text!r}: a target is longer than any trace", hint=hint)
    return FluidityTargets(found["ttft"], found["tbt"])


def tick_deadlines(ticks: pl.DataFrame, targets: FluidityTargets) -> pl.DataFrame:
    """Per tick (``_key``, ``ts``, ``tokens``, ``arrival_ns``; sorted by key and time):
    ``deadlines`` counted, ``missed`` deadlines, ``late`` (the chunk's first token missed)."""
    tbt = targets.tbt_ns
    before = (pl.col("tokens").cum_sum() - pl.col("tokens")).over(KEY)  # i - 1 of 1st token
    u = pl.col("ts") - before * tbt
    with_u = ticks.with_columns(u.alias("_u"))
    threshold = pl.max_horizontal(
        pl.col("arrival_ns") + targets.ttft_ns, pl.col("_u").cum_max().shift(1).over(KEY)
    )
    lateness = pl.col("_u") - threshold
    late = lateness > 0
    count = pl.when(late).then(1 + lateness // tbt).otherwise(0)
    return with_u.with_columns(late.alias("late"), count.alias("missed")).with_columns(
        (pl.col("tokens") - 1 + pl.when(pl.col("late")).then(pl.col("missed")).otherwise(1)).alias(
            "deadlines"
        )
    )


def fluidity_columns(
    timeline: Timeline, requests: pl.DataFrame, targets: FluidityTargets
) -> pl.DataFrame:
    """``requests`` with the four fluidity columns (null without per-token times)."""
    arrivals = requests.select(KEY, "arrival_ns")
    if "ticks_available" in requests.columns:
        arrivals = requests.filter(pl.col("ticks_available").fill_null(True)).select(
            KEY, "arrival_ns"
        )
    ticks = timeline.ticks.select(KEY, "ts", "tokens").join(arrivals, on=KEY, how="inner")
    ticks = ticks.sort(KEY, "ts", maintain_order=True)
    per_request = (
        tick_deadlines(ticks, targets)
        .group_by(KEY)
        .agg(
            pl.col("deadlines").sum().alias("fluidity_deadlines"),
            pl.col("missed").sum().alias("fluidity_missed"),
            pl.col("late").sum().cast(pl.Int64).alias("fluidity_tokens_missed"),
        )
        .with_columns(
            (1.0 - pl.col("fluidity_missed") / pl.col("fluidity_deadlines")).alias("fluidity_index")
        )
    )
    return requests.join(per_request.select(KEY, *COLUMNS), on=KEY, how="left")


def fluidity_summary(requests: pl.DataFrame, targets: FluidityTargets) -> dict[str, Any]:
    """The fleet's fluidity over completed requests with per-token times (numbers only)."""
    from servetrace.stats.describe import describe, statistic

    base: dict[str, Any] = {"ttft_ns": targets.ttft_ns, "tbt_ns": targets.tbt_ns}
    done = requests.filter(
        (pl.col("outcome") == "completed") & pl.col("fluidity_index").is_not_null()
    )
    if done.height == 0:
        reason = (
            "no completed request has per-token times"
            if requests.height
            else "no valid request in the trace"
        )
        return {**base, "requests": 0, "unavailable": reason}
    index = done["fluidity_index"]
    totals = done.select(
        pl.col("fluidity_deadlines", "fluidity_missed", "fluidity_tokens_missed").sum()
    ).row(0)
    deadlines, missed, late = (int(v) for v in totals)
    tokens = deadlines - missed + late  # each met deadline is a token; plus the late ones
    lows = {f"p{q}": statistic(index, f"p{q}") for q in (1, 5, 10)}
    return {
        **base,
        "requests": done.height,
        "index": {**describe(index), **lows},
        "deadlines": deadlines,
        "deadlines_missed": missed,
        "deadline_miss_rate": missed / deadlines if deadlines else None,
        "tokens": tokens,
        "tokens_missed": late,
        "token_miss_fraction": late / tokens if tokens else None,
        "requests_at_least_0_9": done.select((pl.col("fluidity_index") >= 0.9).mean()).item(),
    }
