"""The engine model's output: the events it emitted, as columnar chunks while it runs
(`EventLog`), then the canonical event log, the per-step and the per-request accounting
of one run (`Simulation`).

``horizon_ns`` cuts the log: only events at or before it are kept, so requests still
queued or running then are *in flight* at the end of the trace (a release of a request
that ended before the horizon is kept, so the cut creates no false leaks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from servetrace.schema import EVENT_KINDS
from servetrace.sim.config import EngineConfig
from servetrace.sim.steps_record import StepRecorder
from servetrace.sim.workloads import PRIORITY

__all__ = ["EVENT_COLUMNS", "EventLog", "Simulation", "to_simulation"]

#: Columns (and dtypes) of the event log `simulate` returns.
EVENT_COLUMNS: dict[str, pl.DataType] = {
    "request_id": pl.String(),
    "event": pl.String(),
    "ts": pl.Int64(),
    "tokens": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "policy": pl.String(),
}

#: A time that never comes (a request still in flight, a client without a deadline).
NEVER = np.iinfo(np.int64).max
# Event kinds as the small integer codes the engine logs (their index in EVENT_KINDS).
ARRIVAL, ADMISSION, FIRST, TOKEN, PREEMPTION, COMPLETION, CANCEL, RELEASE = (
    EVENT_KINDS.index(name)
    for name in (
        "arrival",
        "admission",
        "first_token",
        "token",
        "preemption",
        "completion",
        "cancellation",
        "release",
    )
)


@dataclass(frozen=True)
class Simulation:
    """Everything one run produced: the event log plus the engine's own accounting."""

    events: pl.DataFrame
    """The canonical event log (columns `EVENT_COLUMNS`), sorted by ``ts``."""
    steps: pl.DataFrame
    """One row per engine step: ``step, start_ns, end_ns, prefill_tokens, decode_tokens,
    batch_tokens, prefill_seqs, decode_seqs, running, queued, kv_blocks_used, preempted,
    kv_tokens`` (``kv_blocks_used`` is the peak within the step, after admission and growth;
    ``kv_tokens`` the cached tokens the step reads: decoders' context, prefills so far)."""
    requests: pl.DataFrame
    """One row per request in the log: ``request_id, arrival_ns, prompt_tokens,
    output_tokens, outcome`` (completed, cancelled, rejected, in_flight),
    ``cancel_state`` (queued, prefill, decode or null), ``preemptions``,
    ``tokens_delivered``, ``released``."""
    config: EngineConfig
    members: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Each step's batch: one row per (``step``, ``request``: index into the workload)."""
    workload_ids: pl.Series = field(default_factory=pl.Series)
    """The workload's request ids, which ``members.request`` indexes."""


@dataclass
class EventLog:
    """Events in emission order, kept as columnar chunks until the end."""

    req: list[np.ndarray] = field(default_factory=list)
    kind: list[np.ndarray] = field(default_factory=list)
    ts: list[np.ndarray] = field(default_factory=list)
    tokens: list[np.ndarray] = field(default_factory=list)

    def add(
        self, kind: int, req: np.ndarray, ts: np.ndarray | int, tokens: np.ndarray | None = None
    ) -> None:
        n = len(req)
        if n == 0:
            return
        self.req.append(np.asarray(req, dtype=np.int64))
        self.kind.append(np.full(n, kind, dtype=np.int8))
        self.ts.append(np.broadcast_to(np.asarray(ts, dtype=np.int64), (n,)))
        self.tokens.append(
            np.full(n, -1, dtype=np.int64) if tokens is None else np.asarray(tokens, dtype=np.int64)
        )

    def add_one(self, kind: int, req: int, ts: int, tokens: int = -1) -> None:
        self.req.append(np.array([req], dtype=np.int64))
        self.kind.append(np.array([kind], dtype=np.int8))
        self.ts.append(np.array([ts], dtype=np.int64))
        self.tokens.append(np.array([tokens], dtype=np.int64))


def to_simulation(
    log: EventLog,
    *,
    config: EngineConfig,
    workload: pl.DataFrame,
    prompt: np.ndarray,
    target: np.ndarray,
    terminal_ts: np.ndarray,
    outcome_code: np.ndarray,
    cancel_code: np.ndarray,
    recorder: StepRecorder,
) -> Simulation:
    """The run's `Simulation`: the log sorted by time and cut at the horizon, the steps,
    and each request's outcome as the (possibly cut) log shows it.

    Per-request arrays are indexed like ``workload``: ``outcome_code`` 0 in flight,
    1 completed, 2 cancelled, 3 rejected; ``cancel_code`` -1 none, 0 queued, 1 prefill,
    2 decode; ``terminal_ts`` `NEVER` while in flight.
    """
    cfg = config
    if log.req:
        req = np.concatenate(log.req)
        kind = np.concatenate(log.kind)
        ts = np.concatenate(log.ts)
        tokens = np.concatenate(log.tokens)
    else:
        req = np.zeros(0, dtype=np.int64)
        kind = np.zeros(0, dtype=np.int8)
        ts = np.zeros(0, dtype=np.int64)
        tokens = np.zeros(0, dtype=np.int64)
    horizon = cfg.horizon_ns
    if horizon is not None:
        keep = (ts <= horizon) | ((kind == RELEASE) & (terminal_ts[req] <= horizon))
        req, kind, ts, tokens = req[keep], kind[keep], ts[keep], tokens[keep]
    order = np.argsort(ts, kind="stable")
    req, kind, ts, tokens = req[order], kind[order], ts[order], tokens[order]

    ids = workload["request_id"]
    names = pl.Series("event", kind.astype(np.int64)).replace_strict(
        dict(enumerate(EVENT_KINDS)), return_dtype=pl.String
    )
    events = pl.DataFrame(
        {
            "request_id": ids.gather(req),
            "event": names,
            "ts": ts,
            "tokens": np.where(tokens >= 0, tokens, 0),
            "prompt_tokens": prompt[req],
            "output_tokens": target[req],
            "kind": kind,
            "tok_null": tokens < 0,
        }
    ).select(
        pl.col("request_id").cast(pl.String),
        pl.col("event"),
        pl.col("ts").cast(pl.Int64),
        pl.when(~pl.col("tok_null")).then(pl.col("tokens")).cast(pl.Int64).alias("tokens"),
        pl.when(pl.col("kind") == ARRIVAL)
        .then(pl.col("prompt_tokens"))
        .cast(pl.Int64)
        .alias("prompt_tokens"),
        pl.when(pl.col("kind") == COMPLETION)
        .then(pl.col("output_tokens"))
        .cast(pl.Int64)
        .alias("output_tokens"),
        pl.lit(cfg.policy, dtype=pl.String).alias("policy"),
    )
    if PRIORITY in workload.columns:  # a request attribute, as a real trace would carry it
        events = events.with_columns(
            pl.when(pl.Series(kind == ARRIVAL)).then(workload[PRIORITY].gather(req)).alias(PRIORITY)
        )

    steps, members = recorder.frames()
    if horizon is not None:
        steps = steps.filter(pl.col("start_ns") <= horizon)
        members = members.filter(pl.col("step").is_in(steps["step"].implode()))

    arrival = workload["arrival_ns"].to_numpy()
    in_log = arrival <= (horizon if horizon is not None else NEVER)
    ended = terminal_ts <= (horizon if horizon is not None else NEVER)
    outcome = np.where(ended, outcome_code, 0)
    cancel_state = np.where(ended, cancel_code, -1)
    # Counts as seen in the (possibly cut) log.
    tick = (kind == FIRST) | (kind == TOKEN)
    n = len(arrival)
    delivered = np.bincount(req[tick], weights=tokens[tick], minlength=n).astype(np.int64)
    preempts = np.bincount(req[kind == PREEMPTION], minlength=n).astype(np.int64)
    released = np.bincount(req[kind == RELEASE], minlength=n) > 0
    requests = pl.DataFrame(
        {
            "request_id": ids,
            "arrival_ns": arrival,
            "prompt_tokens": prompt,
            "output_tokens": target,
            "outcome": pl.Series(outcome.astype(np.int64)).replace_strict(
                {0: "in_flight", 1: "completed", 2: "cancelled", 3: "rejected"},
                return_dtype=pl.String,
            ),
            "cancel_state": pl.Series(cancel_state.astype(np.int64)).replace_strict(
                {-1: None, 0: "queued", 1: "prefill", 2: "decode"},
                return_dtype=pl.String,
            ),
            "preemptions": preempts,
            "tokens_delivered": delivered,
            "released": released,
        }
    ).filter(pl.Series(in_log))
    return Simulation(
        events=events, steps=steps, requests=requests, config=cfg, members=members, workload_ids=ids
    )
