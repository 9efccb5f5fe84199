"""What policy B would have done on this very trace: calibrate, validate, predict.

1. Calibrate the engine model on the trace (`servetrace.whatif.calibration`).
2. Replay the trace's requests under its own policy and compare with the trace
   (`servetrace.whatif.replay`). A replay that misses a statistic beyond its tolerance
   stops here: a model that cannot reproduce what happened does not predict what would
   have (unless forced, and then the miss is said beside every figure).
3. Replay them under policy B. Each predicted statistic carries the replay's error of
   that statistic as its band, scaled to the predicted value: the model was that far
   off where the truth is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl

from servetrace.analysis.result import Analysis
from servetrace.errors import UsageError
from servetrace.sim.config import Policy
from servetrace.whatif.calibration import (
    VERSION,
    Calibration,
    coverage_of,
    fit_costs,
    infer_limits,
)
from servetrace.whatif.replay import (
    METRICS,
    STATS,
    Workload,
    agreement,
    engine_config,
    misses,
    replay,
    workload_of,
)
from servetrace.whatif.steps import from_step_records, implied_steps, looks_chunked


@dataclass(frozen=True)
class Prediction:
    policy: str
    limits: dict[str, int | None]
    analysis: Analysis
    # metric → stat → real, predicted, band (ns); band None where the replay had no error
    figures: dict[str, dict[str, dict[str, float | None]]]


@dataclass(frozen=True)
class WhatIf:
    trace: str
    calibration: Calibration
    workload: Workload
    validation: dict[str, dict[str, object]]
    missed: tuple[str, ...]
    forced: bool
    predictions: tuple[Prediction, ...] = field(default_factory=tuple)
    replayed: Analysis | None = None
    real: Analysis | None = None  # the trace's own analysis, for the views that draw it

    @property
    def trusted(self) -> bool:
        return not self.missed

    @property
    def swept(self) -> str | None:
        """The one knob the predictions differ in (a sweep of it), else None."""
        if len(self.predictions) < 2 or len({p.policy for p in self.predictions}) > 1:
            return None
        names = {name for p in self.predictions for name in p.limits}
        varied = [name for name in names if len({p.limits.get(name) for p in self.predictions}) > 1]
        if len(varied) != 1 or any(p.limits.get(varied[0]) is None for p in self.predictions):
            return None
        return varied[0]


def calibrate(
    analysis: Analysis,
    events: pl.DataFrame,
    steps: pl.DataFrame | None = None,
    limits: dict[str, int | None] | None = None,
    policy: str | None = None,
) -> Calibration:
    """The engine model of ``analysis`` (whose canonical ``events`` are given), from
    step records when given, else from the steps its ticks imply."""
    label = ", ".join(analysis.inputs)
    if steps is not None:
        frame, source = from_step_records(steps, events, label), "step records"
    else:
        frame, source = implied_steps(events, label), "implied by the trace's ticks"
    chunked = looks_chunked(frame)
    if chunked and steps is None:
        raise UsageError(
            f"{label}: prefill shares steps with decodes (chunked prefill): the chunks "
            "of each prompt are not in the events",
            hint="give the engine's step records with --steps",
        )
    own = policy or (Policy.CHUNKED.value if chunked else Policy.FCFS.value)
    costs, quality = fit_costs(frame)
    return Calibration(
        version=VERSION,
        source=source,
        policy=Policy(own).value,
        costs=costs,
        fit=quality,
        limits=infer_limits(frame, events, limits or {}),
        coverage=coverage_of(frame),
    )


def check_range(calibration: Calibration, policy: str, limits: dict[str, int | None]) -> None:
    """Refuse a knob beyond what the calibration has seen (the fit says nothing there)."""
    seen = calibration.coverage
    if policy == Policy.CHUNKED.value and seen["mixed_steps"][1] == 0:
        raise UsageError(
            "chunked prefill runs prompt chunks and decodes in one step, and the trace "
            "has no such step: the cost of one would be extrapolated",
            hint="calibrate on a trace (or --steps) with mixed steps, or pass --extrapolate",
        )
    ceilings = {
        "max_batch_tokens": seen["prefill_tokens"][1] + seen["decode_requests"][1],
        "max_running": seen["batch_requests"][1],
    }
    for name, ceiling in ceilings.items():
        value = limits.get(name)
        if value is not None and value > ceiling:
            raise UsageError(
                f"{name.replace('_', '-')} {value} is beyond the calibrated range "
                f"(steps of up to {ceiling} seen)",
                hint="pass --extrapolate to predict outside it anyway",
            )


def check_priority(policies: list[str], priority_by: str | None) -> None:
    """The priority policy needs the attribute it orders by, and only it uses one."""
    uses = Policy.PRIORITY.value in policies
    if uses and priority_by is None:
        raise UsageError(
            "the priority policy needs the attribute that orders its queue",
            hint="name a per-request column of the trace with --priority-by (lower runs first)",
        )
    if priority_by is not None and not uses:
        raise UsageError(
            f"--priority-by {priority_by} orders the queue of the priority policy only",
            hint="add --policy priority (or --trace-policy priority), or drop --priority-by",
        )


def _figures(
    real: Analysis, predicted: Analysis, validation: dict[str, dict[str, object]]
) -> dict[str, dict[str, dict[str, float | None]]]:
    versus = agreement(real, predicted)
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for metric in METRICS:
        out[metric] = {}
        for stat in STATS:
            cell = versus[metric]["stats"][stat]  # type: ignore[index]
            known = validation[metric]["stats"][stat]  # type: ignore[index]
            value = cell["replayed_ns"]
            relative = known.get("relative_error")
            band = None
            if value is not None and relative is not None:
                band = abs(relative) * abs(value)
            elif known.get("error_ns") is not None:
                band = abs(known["error_ns"])
            out[metric][stat] = {"real_ns": cell["real_ns"], "predicted_ns": value, "band_ns": band}
    return out


def whatif(
    analysis: Analysis,
    events: pl.DataFrame,
    policies: list[tuple[str, dict[str, int | None]]],
    *,
    steps: pl.DataFrame | None = None,
    calibration: Calibration | None = None,
    own_limits: dict[str, int | None] | None = None,
    own_policy: str | None = None,
    force: bool = False,
    extrapolate: bool = False,
    priority_by: str | None = None,
) -> WhatIf:
    """Calibrate on the trace (or take ``calibration``), validate by replay and, if the
    replay holds (or ``force``), predict each (policy, limits) of ``policies``; the
    priority policy orders the queue by the trace's attribute ``priority_by``."""
    label = ", ".join(analysis.inputs)
    model = calibration or calibrate(analysis, events, steps, own_limits, own_policy)
    check_priority([model.policy, *(p for p, _ in policies)], priority_by)
    workload = workload_of(analysis, priority_by)
    replayed = replay(workload, engine_config(model, model.policy, {}), f"{label} (replay)")
    validation = agreement(analysis, replayed)
    missed = tuple(misses(validation))
    result = WhatIf(
        label, model, workload, validation, missed, force, replayed=replayed, real=analysis
    )
    if missed and not force:
        return result
    predictions = []
    for policy, limits in policies:
        if not extrapolate:
            check_range(model, policy, limits)
        config = engine_config(model, Policy(policy).value, limits)
        predicted = replay(workload, config, f"{label} ({policy})")
        predictions.append(
            Prediction(policy, limits, predicted, _figures(analysis, predicted, validation))
        )
    return replace(result, predictions=tuple(predictions))
