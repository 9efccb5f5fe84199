"""Fit the engine model to one trace: the step-time costs and the scheduler's limits.

Step time is the simulator's linear model (`servetrace.sim.config`)::

    duration = base + prefill_token·prefill_tokens + decode_seq·decode_requests
               + context_token·context_tokens

fitted by least squares over the trace's steps (recorded, or implied by its ticks:
`servetrace.whatif.steps`); a cost that fits negative is dropped and the rest refitted,
since a step cannot get faster with more work. The limits are what the trace shows:
the token budget is the largest step it saw (at least the longest prompt, which ran),
the batch cap is the largest batch *if* requests waited while it ran (else no cap is
known and none is applied), and the KV budget is the context held when the engine
preempted (else it never ran out, and none is applied). A limit given by the user wins.

The calibration is a small versioned JSON file with its coverage: the ranges of batch
size and tokens its fit has seen. A prediction outside them is an extrapolation.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from servetrace.errors import InputError

VERSION = 1
COSTS = ("base_ns", "prefill_token_ns", "decode_seq_ns", "context_token_ns")
FEATURES = ("prefill_tokens", "decode_requests", "context_tokens")
# Fewer steps than this cannot pin four costs and their residual.
MIN_STEPS = 20


@dataclass(frozen=True)
class Limit:
    """One scheduler limit: its value (None: none is known, none applied) and how it
    was found."""

    value: int | None
    how: str


@dataclass(frozen=True)
class Calibration:
    version: int
    source: str  # "step records" or "implied by the trace's ticks"
    policy: str  # the trace's own scheduler, as the simulator names it
    costs: dict[str, float]
    fit: dict[str, float]  # steps, rms_residual_ns, median_relative_error
    limits: dict[str, Limit]  # max_batch_tokens, max_running, kv_tokens
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> str:
        data = asdict(self)
        data["kind"] = "servetrace calibration"
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def read(cls, path: Path) -> Calibration:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise InputError(f"{path}: not a calibration file: {error}") from None
        if not isinstance(data, dict) or data.get("kind") != "servetrace calibration":
            raise InputError(f"{path}: not a servetrace calibration file (no kind)")
        if data.get("version") != VERSION:
            raise InputError(
                f"{path}: calibration version {data.get('version')!r}; this servetrace "
                f"reads version {VERSION}",
                hint="calibrate again from the trace",
            )
        try:
            return cls(
                version=VERSION,
                source=str(data["source"]),
                policy=str(data["policy"]),
                costs={k: float(data["costs"][k]) for k in COSTS},
                fit={k: float(v) for k, v in data["fit"].items()},
                limits={k: Limit(v["value"], str(v["how"])) for k, v in data["limits"].items()},
                coverage={k: (int(v[0]), int(v[1])) for k, v in data["coverage"].items()},
            )
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise InputError(f"{path}: calibration file lacks {error}") from None


def fit_costs(steps: pl.DataFrame) -> tuple[dict[str, float], dict[str, float]]:
    """The step-time costs (ns) and the quality of the fit, over ``steps``."""
    if steps.height < MIN_STEPS:
        raise InputError(
            f"only {steps.height} engine steps: fitting the step time needs {MIN_STEPS}",
            hint="calibrate on a longer trace",
        )
    y = steps["duration"].to_numpy().astype(np.float64)
    x = np.column_stack(
        [np.ones(steps.height)] + [steps[f].to_numpy().astype(np.float64) for f in FEATURES]
    )
    kept = list(range(len(COSTS)))
    while True:
        coef, *_ = np.linalg.lstsq(x[:, kept], y, rcond=None)
        if (coef >= 0).all() or len(kept) == 1:
            break
        kept.pop(int(np.argmin(coef)))
    full = np.zeros(len(COSTS))
    full[kept] = np.maximum(coef, 0)
    residual = y - x @ full
    costs = dict(zip(COSTS, (float(c) for c in full), strict=True))
    quality = {
        "steps": float(steps.height),
        "rms_residual_ns": float(math.sqrt(float(np.mean(residual**2)))),
        "median_relative_error": float(np.median(np.abs(residual) / y)),
    }
    return costs, quality


def waiting_at(starts: pl.Series, events: pl.DataFrame) -> pl.Series:
    """Requests waiting (arrived, not yet admitted for the first time) at each instant."""
    arrived = events.filter(pl.col("event") == "arrival")["ts"].sort()
    admitted = (
        events.filter(pl.col("event") == "admission")
        .group_by("request_id")
        .agg(pl.col("ts").min())["ts"]
        .sort()
    )
    return pl.Series(
        arrived.search_sorted(starts, side="right").cast(pl.Int64)
        - admitted.search_sorted(starts, side="right").cast(pl.Int64)
    )


def infer_limits(
    steps: pl.DataFrame, events: pl.DataFrame, given: dict[str, int | None]
) -> dict[str, Limit]:
    """The scheduler's limits as the trace shows them; ``given`` ones win."""
    batch = steps["prefill_requests"] + steps["decode_requests"]
    step_tokens = steps["prefill_tokens"] + steps["decode_requests"]
    # A prefill-first engine recomputes prompt + generated tokens in one step after a
    # preemption, so its budget held every completed request's whole context.
    longest = int(max_context.max() or 0) if (max_context := _contexts(events)).len() else 0  # type: ignore[arg-type]
    largest = int(step_tokens.max() or 0)  # type: ignore[arg-type]
    budget = max(largest, longest)
    limits = {
        "max_batch_tokens": Limit(
            budget,
            "the largest step seen"
            if largest >= longest
            else "the longest request that ran, in tokens of context",
        ),
    }
    peak = int(batch.max() or 0)  # type: ignore[arg-type]
    waiting = waiting_at(steps["ts_start"], events)
    blocked = int(((batch == peak) & (waiting > 0)).sum())
    preemptions = events.filter(pl.col("event") == "preemption")
    if blocked and preemptions.height == 0:
        limits["max_running"] = Limit(peak, f"reached while requests waited, in {blocked} steps")
    else:
        limits["max_running"] = Limit(None, f"never binding: at most {peak} ran at once")
    if preemptions.height:
        # The cache ran out: the most it was seen holding is its size, to a step's growth.
        held = steps["context_tokens"] + steps["prefill_tokens"] + steps["decode_requests"]
        kv = int(held.max() or 0)  # type: ignore[arg-type]
        limits["kv_tokens"] = Limit(
            kv, f"the most context held; {preemptions.height} preemption(s) at the limit"
        )
    else:
        limits["kv_tokens"] = Limit(None, "never binding: no request was preempted")
    for name, value in given.items():
        if value is not None:
            limits[name] = Limit(int(value), "given")
    return limits


def _contexts(events: pl.DataFrame) -> pl.Series:
    """prompt + output − 1 of every completed request: the context it held at the end."""
    prompts = events.filter(pl.col("event") == "arrival").select("request_id", "prompt_tokens")
    done = events.filter(pl.col("event") == "completion").select("request_id", "output_tokens")
    joined = prompts.join(done, on="request_id")
    return (joined["prompt_tokens"] + joined["output_tokens"] - 1).drop_nulls()


def coverage_of(steps: pl.DataFrame) -> dict[str, tuple[int, int]]:
    batch = steps["prefill_requests"] + steps["decode_requests"]
    ranges = {"batch_requests": (int(batch.min() or 0), int(batch.max() or 0))}  # type: ignore[arg-type]
    mixed = steps.filter((pl.col("prefill_requests") > 0) & (pl.col("decode_requests") > 0))
    ranges["mixed_steps"] = (0, mixed.height)
    for name in FEATURES:
        ranges[name] = (int(steps[name].min() or 0), int(steps[name].max() or 0))  # type: ignore[arg-type]
    return ranges
