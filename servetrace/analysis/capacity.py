"""Capacity from a sweep: runs at rising offered load, one SLO.

Input is a plain list of ``RunPoint(label, offered_rate, analysis)``: one analysed run
and the request rate it was offered (declared by the benchmark client, req/s). From it:

- the **throughput–latency curve**: per run, achieved req/s and output tok/s against
  TTFT / TPOT / ITL / e2e percentiles, in offered-rate order;
- the **SLO attainment curve** for the goodput targets: per run, the share of its
  requests that met every target. The denominator is every request that got an answer
  from the server — completed plus errored (a 429 misses every SLO); client
  cancellations and requests in flight at the end of the run are not answers and are
  left out. With no errored request this is ``summary.goodput.fraction``;
- **capacity** (DistServe's definition): the highest offered rate whose attainment is at
  least the required share. When the next run up misses it, the rate is linearly
  interpolated between the two bracketing runs (and marked ``interpolated``); when even
  the highest run meets it, capacity is *at least* that rate (``bound = "lower"``); when
  no run meets it, capacity is below the lowest offered rate, i.e. unavailable;
- the **Pareto frontier** of output tok/s per GPU against output tok/s per user
  (1 / median TPOT), where the GPU count is known: runs no other run beats on both.

Numbers only (ns, req/s, tok/s); the wording is in ``render/capacity.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servetrace.analysis.summary import Summary
from servetrace.errors import UsageError
from servetrace.units import NS_PER_S

CURVE_METRICS: tuple[tuple[str, str], ...] = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("tpot", "p50"),
    ("tpot", "p99"),
    ("itl", "p99"),
    ("e2e", "p99"),
)


@dataclass(frozen=True)
class RunPoint:
    """One run of a sweep: a label, its offered request rate (req/s; ``math.inf`` for
    "all at once", None when not declared), its analysis (an ``Analysis`` or a
    ``Summary``), where known how many GPUs served it, and what the tool declared."""

    label: str
    offered_rate: float | None
    analysis: Any
    gpus: int | None = None
    # Run-level facts the tool declared (``request_throughput``, ``output_throughput``):
    # used for throughput only where the trace cannot give it (no send times).
    declared: Mapping[str, float] = field(default_factory=dict)

    @property
    def summary(self) -> Summary:
        return self.analysis if isinstance(self.analysis, Summary) else self.analysis.summary


@dataclass(frozen=True)
class CurvePoint:
    label: str
    offered_rate: float | None
    requests_per_s: float | None
    output_tokens_per_s: float | None
    latency_ns: dict[str, float | None]  # "ttft_p99" -> ns
    completed: int
    errored: int
    answered: int
    met: int | None
    attainment: float | None
    attainment_by_target: dict[str, float | None]
    gpus: int | None
    tokens_per_s_per_gpu: float | None
    tokens_per_s_per_user: float | None
    throughput_declared: bool = False


@dataclass(frozen=True)
class Capacity:
    """``rate``: req/s, or None (unavailable, ``reason`` says why). ``bound``: "exact" (a run
        sits at the threshold), "interpolated" (between ``bracket``), "lower" (even the highest
        run meets it: capacity is at least ``rate``), "achieved" (capped at what ``limited_by``
    achieved: a capacity is never above a rate the server was seen to serve)."""

    required: float
    rate: float | None = None
    bound: str | None = None
    bracket: tuple[str, str] | None = None
    reason: str | None = None
    notes: tuple[str, ...] = ()
    # bound "achieved": the run whose achieved rate caps the capacity (it never reached
    # the offered rate the SLO was met at, so the SLO is shown to hold only up to that).
    limited_by: str | None = None


@dataclass(frozen=True)
class CapacityReport:
    targets: tuple[str, ...]
    curve: tuple[CurvePoint, ...]
    capacity: Capacity | None
    frontier: tuple[str, ...] | None  # labels on the Pareto frontier, by tok/s/user
    frontier_unavailable: str | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # What reading the runs warned about (label: message), for the CLI's stderr.
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # Several sweeps at once (one per configuration folder): capacity of each, in order;
    # ``capacity`` is then None. The curve and the Pareto frontier span every run.
    by_sweep: tuple[tuple[str, Capacity], ...] = field(default_factory=tuple)
    sweep_of: Mapping[str, str] = field(default_factory=dict)  # run label -> sweep


def _attainment(summary: Summary) -> tuple[int, int | None, float | None, dict[str, float | None]]:
    completed = summary.outcomes.get("completed", 0)
    errored = summary.outcomes.get("errored", 0)
    answered = completed + errored
    good = summary.goodput
    if good is None:
        return answered, None, None, {}
    met = int(good["requests_met"])
    share = met / answered if answered else None
    # Per target: the completed share meeting it, rescaled to every answered request.
    per_target = {
        name: (value * completed / answered if value is not None and answered else None)
        for name, value in good["attainment_by_target"].items()
    }
    return answered, met, share, per_target


def curve_point(run: RunPoint, gpus: int | None) -> CurvePoint:
    summary = run.summary
    answered, met, share, per_target = _attainment(summary)
    t = summary.throughput
    req_ps, out_tps = t.get("requests_per_s"), t.get("output_tokens_per_s")
    # Over the run's declared duration (the run model did it: no send times), or the
    # tool's own figures when the caller gave a summary without any throughput.
    from_tool = summary.window_source == "declared"
    if req_ps is None and "request_throughput" in run.declared:
        from_tool = True
        req_ps = run.declared.get("request_throughput")
        out_tps = run.declared.get("output_throughput")
    tpot_p50 = summary.metrics["tpot"].get("p50")
    n_gpus = run.gpus if run.gpus is not None else gpus
    return CurvePoint(
        label=run.label,
        offered_rate=run.offered_rate,
        requests_per_s=req_ps,
        output_tokens_per_s=out_tps,
        latency_ns={
            f"{metric}_{stat}": _number(summary.metrics[metric].get(stat))
            for metric, stat in CURVE_METRICS
        },
        completed=summary.outcomes.get("completed", 0),
        errored=summary.outcomes.get("errored", 0),
        answered=answered,
        met=met,
        attainment=share,
        attainment_by_target=per_target,
        gpus=n_gpus,
        tokens_per_s_per_gpu=out_tps / n_gpus if out_tps is not None and n_gpus else None,
        tokens_per_s_per_user=NS_PER_S / float(tpot_p50) if tpot_p50 else None,
        throughput_declared=from_tool,
    )


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


# A run that completed less than this share of its offered rate did not reach it.
REACHED = 0.9


def _short_of_offered(point: CurvePoint) -> bool:
    offered, achieved = point.offered_rate, point.requests_per_s
    return (
        offered is not None
        and math.isfinite(offered)
        and achieved is not None
        and achieved < REACHED * offered
    )


def capacity(points: Sequence[CurvePoint], required: float) -> Capacity:
    """The highest offered rate whose attainment is ≥ ``required`` (DistServe)."""
    placed = [
        p
        for p in points
        if p.offered_rate is not None and math.isfinite(p.offered_rate) and p.attainment is not None
    ]
    notes: list[str] = []
    skipped = [p.label for p in points if p not in placed]
    if skipped:
        notes.append(
            "not on the offered-rate axis (rate undeclared or unbounded, or no attainment): "
            + ", ".join(skipped)
        )
    if len({p.offered_rate for p in placed}) < len(placed):
        raise UsageError(
            "two runs of the sweep declare the same offered rate: capacity needs one run per rate",
            hint="give each run its own --rate, or leave the repeat out",
        )
    placed.sort(key=lambda p: p.offered_rate or 0.0)
    if not placed:
        why = "no run has both an offered rate and an SLO attainment"
        return Capacity(required, reason=why, notes=tuple(notes))
    passing = [i for i, p in enumerate(placed) if (p.attainment or 0.0) >= required]
    if not passing:
        why = (
            f"no run meets the SLO at {required:.0%}: capacity is below the lowest offered "
            f"rate ({placed[0].offered_rate:g} req/s, {placed[0].label})"
        )
        return Capacity(required, reason=why, notes=tuple(notes))
    top = passing[-1]
    below = [p.label for p in placed[:top] if (p.attainment or 0.0) < required]
    if below:
        notes.append(
            "attainment is not monotone in load: "
            + ", ".join(below)
            + (" misses" if len(below) == 1 else " miss")
            + " the SLO below the capacity run"
        )
    hit = placed[top]
    assert hit.offered_rate is not None and hit.attainment is not None
    if top == len(placed) - 1:
        unbounded = [
            p.label
            for p in points
            if p.offered_rate == math.inf and p.attainment is not None and p.attainment < required
        ]
        if unbounded:
            notes.append(
                "the unbounded-rate run(s) " + ", ".join(unbounded) + " miss the SLO: capacity "
                "lies between the highest finite rate and saturation"
            )
        if _short_of_offered(hit):
            assert hit.requests_per_s is not None
            rate = hit.requests_per_s
            return Capacity(required, rate, "achieved", notes=tuple(notes), limited_by=hit.label)
        return Capacity(required, hit.offered_rate, "lower", notes=tuple(notes))
    if hit.attainment == required:
        return Capacity(required, hit.offered_rate, "exact", notes=tuple(notes))
    nxt = placed[top + 1]
    assert nxt.offered_rate is not None and nxt.attainment is not None
    share = (hit.attainment - required) / (hit.attainment - nxt.attainment)
    rate = hit.offered_rate + share * (nxt.offered_rate - hit.offered_rate)
    if nxt.requests_per_s is not None and rate > nxt.requests_per_s:
        # DistServe's interpolation is over offered rates; say when no run served that much.
        notes.append(
            f"the interpolated {rate:.2f} req/s is above what {nxt.label} achieved "
            f"({nxt.requests_per_s:.2f} req/s at {nxt.offered_rate:g} offered)"
        )
    return Capacity(required, rate, "interpolated", (hit.label, nxt.label), notes=tuple(notes))


def pareto_frontier(points: Sequence[CurvePoint]) -> tuple[str, ...]:
    """Labels of runs no other run beats on both tok/s per GPU and tok/s per user,
    ordered by tok/s per user."""
    known = [
        (p.tokens_per_s_per_gpu, p.tokens_per_s_per_user, p.label)
        for p in points
        if p.tokens_per_s_per_gpu is not None and p.tokens_per_s_per_user is not None
    ]
    # A run is dominated when another is at least as good on both and better on one.
    front = [
        (user, label)
        for gpu, user, label in known
        if not any(g >= gpu and u >= user and (g, u) != (gpu, user) for g, u, _ in known)
    ]
    return tuple(label for _, label in sorted(front))


def sweep(
    runs: Sequence[RunPoint],
    attainment: float | None = 0.9,
    gpus: int | None = None,
    groups: Mapping[str, str] | None = None,
) -> CapacityReport:
    """The curve, capacity at ``attainment`` (a share in (0, 1]) and the Pareto frontier.

    ``groups`` (run label → sweep name) splits the runs into several sweeps (one per
    configuration): capacity is found per sweep, the frontier over all runs."""
    if not runs:
        raise UsageError("a sweep needs at least one run")
    if attainment is not None and not 0 < attainment <= 1:
        raise UsageError(f"attainment {attainment} is not a share in (0, 1]")
    if gpus is not None and gpus < 1:
        raise UsageError(f"gpus {gpus} is not a positive count")
    order = {name: i for i, name in enumerate(dict.fromkeys((groups or {}).values()))}
    points = sorted(
        (curve_point(run, gpus) for run in runs),
        key=lambda p: (
            order.get((groups or {}).get(p.label, ""), 0),
            p.offered_rate is None,
            p.offered_rate or 0.0,
            p.label,
        ),
    )
    goods = [run.summary.goodput for run in runs]
    targets = tuple(goods[0]["targets"]) if goods[0] else ()
    if any((tuple(g["targets"]) if g else ()) != targets for g in goods):
        raise UsageError("the runs of a sweep were analysed with different goodput targets")
    notes: list[str] = []
    cap: Capacity | None = None
    names = list(dict.fromkeys(groups[p.label] for p in points)) if groups else []
    by_sweep: list[tuple[str, Capacity]] = []
    if not targets:
        notes.append("no --goodput target: no SLO attainment, so no capacity")
    elif attainment is not None and len(names) > 1:
        assert groups is not None
        by_sweep = [
            (name, capacity([p for p in points if groups[p.label] == name], attainment))
            for name in names
        ]
    elif attainment is not None:
        cap = capacity(points, attainment)
    saturated = [
        f"{p.label} ({p.requests_per_s:.2f} of {p.offered_rate:g} req/s)"
        for p in points
        if p.offered_rate is not None and math.isfinite(p.offered_rate) and _short_of_offered(p)
    ]
    if saturated:
        notes.append(
            "completed well below the offered rate (saturated, or a short run's tail): "
            + ", ".join(saturated)
        )
    declared = [p.label for p in points if p.throughput_declared]
    if declared:
        notes.append(
            "throughput over the run's declared duration, as the tool computed it (the "
            "trace has no send times): " + ", ".join(declared)
        )
    missing = [p.label for p in points if p.gpus is None]
    if len(missing) == len(points):
        frontier, why = None, "GPU count unknown: give --gpus N (or declare parallelism)"
    else:
        frontier, why = pareto_frontier(points), None
        if missing:
            notes.append("not on the Pareto frontier (GPU count unknown): " + ", ".join(missing))
    return CapacityReport(
        targets,
        tuple(points),
        cap,
        frontier,
        why,
        tuple(notes),
        by_sweep=tuple(by_sweep),
        sweep_of=dict(groups) if len(names) > 1 and groups else {},
    )
