"""A small, independent reading of the README's definitions, in plain Python over rows.

It must not import servetrace's lifecycle or metrics: the fuzzer compares the two. It is
written for clarity, not speed (traces here have tens of rows), straight from README.md:
"The lifecycle and its rules", "Metrics", and the per-request semantics of server-side
and client-side requests (the `lifecycle_side` module docstring, README "guarantees").

A row is a dict with ``request_id``, ``event``, ``ts`` (int ns), optionally ``tokens``,
``prompt_tokens``, ``output_tokens`` and attributes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

# Lifecycle order at equal timestamps (README: "arrival, admission, first_token, token,
# preemption, terminal, release").
RANK = {
    "arrival": 0,
    "admission": 1,
    "first_token": 2,
    "token": 3,
    "preemption": 4,
    "completion": 5,
    "cancellation": 6,
    "error": 7,
    "release": 8,
}
TICKS = ("first_token", "token")
TERMINAL = ("completion", "cancellation", "error")
CANONICAL = ("request_id", "event", "ts", "tokens", "prompt_tokens", "output_tokens")

# README rule table, in priority order (the first rule broken is the one reported).
REQUEST_RULES = (
    "invalid_token_count",
    "missing_arrival",
    "duplicate_arrival",
    "event_before_arrival",
    "duplicate_first_token",
    "token_before_first_token",
    "duplicate_terminal",
    "event_after_terminal",
    "token_before_admission",
    "admission_while_not_queued",
    "preemption_while_not_running",
    "token_while_queued",
    "completion_without_tokens",
    "release_before_terminal",
    "duplicate_release",
)

QUEUED, RUNNING, DECODING, TERMINATED, RELEASED = "queued", "running", "decoding", "end", "rel"


@dataclass
class Request:
    request_id: Any
    rows: list[dict] = field(default_factory=list)
    rule: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    def of(self, *kinds: str) -> list[dict]:
        return [r for r in self.rows if r["event"] in kinds]

    @property
    def admitted(self) -> bool:
        return bool(self.of("admission"))

    @property
    def ticked(self) -> bool:
        return bool(self.of(*TICKS))


def _order(row: dict) -> tuple[int, int, int]:
    # A first_token is the first tick at its timestamp; "token" rank is after it.
    return (row["ts"], RANK[row["event"]], 0)


def _state_walk(req: Request, queued_after_arrival: bool) -> tuple[set[str], dict]:
    """Walk the control events plus the first tick in lifecycle order.

    Returns the state-machine rules hit, and facts for metrics (state at cancellation,
    time requeued after preemptions, given the trace end later).
    """
    ticks = sorted(req.of(*TICKS), key=lambda r: (r["ts"], r["event"] != "first_token"))
    control = [r for r in req.rows if r["event"] not in TICKS]
    if ticks:
        control.append({"event": "first_token", "ts": ticks[0]["ts"]})
    control.sort(key=_order)
    hits: set[str] = set()
    state: str | None = None
    cancel_state = None
    preemption_next: list[int | None] = []
    for i, r in enumerate(control):
        e, prev = r["event"], state
        alive = prev not in (TERMINATED, RELEASED)
        if e == "admission" and prev != QUEUED and alive:
            hits.add("admission_while_not_queued")
        if e == "first_token" and prev == QUEUED:
            hits.add("token_before_admission")
        if e == "preemption" and prev not in (RUNNING, DECODING) and alive:
            hits.add("preemption_while_not_running")
        if e == "preemption":
            preemption_next.append(control[i + 1]["ts"] if i + 1 < len(control) else None)
        if e == "cancellation" and cancel_state is None:
            cancel_state = prev
        state = {
            "arrival": QUEUED if queued_after_arrival else RUNNING,
            "admission": RUNNING,
            "first_token": DECODING,
            "preemption": QUEUED,
            "completion": TERMINATED,
            "cancellation": TERMINATED,
            "error": TERMINATED,
            "release": RELEASED,
        }[e]
    # token_while_queued: a tick after a preemption and before the next admission.
    queued = False
    for r in sorted(req.rows, key=_order):
        if r["event"] == "preemption":
            queued = True
        elif r["event"] == "admission":
            queued = False
        elif r["event"] in TICKS and queued:
            hits.add("token_while_queued")
    return hits, {"cancel_state": cancel_state, "preemption_next": preemption_next}


def _rule(req: Request, queued_after_arrival: bool) -> tuple[str | None, dict]:
    rows = req.rows
    arrivals, terminals = req.of("arrival"), req.of(*TERMINAL)
    firsts, ticks, releases = req.of("first_token"), req.of(*TICKS), req.of("release")
    hits, facts = _state_walk(req, queued_after_arrival)
    broken: set[str] = set(hits)

    def count(row: dict, key: str) -> Any:
        return row.get(key)

    if any((count(r, "tokens") if count(r, "tokens") is not None else 1) < 1 for r in ticks):
        broken.add("invalid_token_count")
    for key in ("prompt_tokens", "output_tokens"):
        if any(r["event"] not in TICKS and (count(r, key) or 0) < 0 for r in rows):
            broken.add("invalid_token_count")
    if not arrivals:
        broken.add("missing_arrival")
    if len(arrivals) > 1:
        broken.add("duplicate_arrival")
    if len(arrivals) == 1 and any(_order(r) < _order(arrivals[0]) for r in rows):
        broken.add("event_before_arrival")
    if len(firsts) > 1:
        broken.add("duplicate_first_token")
    if firsts and any(r["ts"] < min(f["ts"] for f in firsts) for r in req.of("token")):
        broken.add("token_before_first_token")
    if len(terminals) > 1:
        broken.add("duplicate_terminal")
    if terminals:
        end = min(r["ts"] for r in terminals)
        if any(r["ts"] > end for r in rows if r["event"] not in (*TERMINAL, "release")):
            broken.add("event_after_terminal")
    first_terminal = min(terminals, key=_order) if terminals else None
    if first_terminal and first_terminal["event"] == "completion" and not ticks:
        broken.add("completion_without_tokens")
    if releases:
        release = min(r["ts"] for r in releases)
        if not terminals or release < min(r["ts"] for r in terminals):
            broken.add("release_before_terminal")
    if len(releases) > 1:
        broken.add("duplicate_release")
    rule = next((name for name in REQUEST_RULES if name in broken), None)
    return rule, facts


def _first_value(req: Request, column: str) -> Any:
    """Attributes: first non-null in the order arrival, admission, preemption, terminal,
    release (lifecycle order of the kinds), earliest first within a kind."""
    for r in sorted(
        (r for r in req.rows if r["event"] not in TICKS), key=lambda r: (RANK[r["event"]], r["ts"])
    ):
        if r.get(column) is not None:
            return r[column]
    return None


def _metrics(req: Request, facts: dict, trace_end: int, attributes: list[str]) -> dict:
    def ts(kind: str) -> int | None:
        rows = req.of(kind)
        return min(r["ts"] for r in rows) if rows else None

    arrival, admission = ts("arrival"), ts("admission")
    terminal = min(req.of(*TERMINAL), key=_order) if req.of(*TERMINAL) else None
    outcome = {
        "completion": "completed",
        "cancellation": "cancelled",
        "error": "errored",
        None: "in_flight",
    }[terminal["event"] if terminal else None]
    tick_rows = req.of(*TICKS)
    tick_ts = sorted(r["ts"] for r in tick_rows)
    first = tick_ts[0] if tick_ts else None
    last = tick_ts[-1] if tick_ts else None
    gaps = [b - a for a, b in itertools.pairwise(tick_ts)]
    reported = terminal.get("output_tokens") if terminal else None
    n_out = (
        reported
        if reported is not None
        else sum(r.get("tokens") if r.get("tokens") is not None else 1 for r in tick_rows)
    )
    end = terminal["ts"] if terminal else None
    cancelled_in = None
    if outcome == "cancelled":
        state = facts["cancel_state"]
        if state == QUEUED:
            cancelled_in = "queued"
        elif state == DECODING or (state == RUNNING and first is not None and first <= end):
            cancelled_in = "decode"
        else:
            cancelled_in = "prefill" if req.admitted else "before_first_token"

    def minus(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else a - b

    queue_wait = minus(admission, arrival)
    if admission is None and cancelled_in == "queued":
        queue_wait = minus(end, arrival)  # queued until the cancellation
    decode = minus(last, first)
    itl_mean = decode / (len(tick_ts) - 1) if len(tick_ts) >= 2 else None
    preemptions = len(req.of("preemption"))
    requeued = sum(
        (nxt if nxt is not None else trace_end) - p["ts"]
        for p, nxt in zip(
            sorted(req.of("preemption"), key=_order), facts["preemption_next"], strict=True
        )
    )
    response, ttft = minus(last, arrival), minus(first, arrival)
    if n_out <= 1:
        residual = None if response is None or ttft is None else float(response - ttft)
    elif itl_mean is None or response is None or ttft is None:
        residual = None
    else:
        residual = response - ttft - (n_out - 1) * itl_mean
    out = {
        "request_id": req.request_id,
        "outcome": outcome,
        "cancelled_in": cancelled_in,
        "arrival_ns": arrival,
        "queue_wait_ns": queue_wait,
        "prefill_ns": minus(first, admission),
        "ttft_ns": ttft,
        "decode_ns": decode,
        "response_ns": response,
        "e2e_ns": minus(end, arrival),
        "delivery_tail_ns": minus(end, last) if outcome == "completed" else None,
        "tpot_ns": decode / (n_out - 1) if n_out >= 2 and decode is not None else None,
        "itl_mean_ns": itl_mean,
        "itl_max_ns": max(gaps) if gaps else None,
        "output_tokens": n_out,
        "prompt_tokens": _first_value(req, "prompt_tokens"),
        "ticks": len(tick_ts),
        "preemptions": preemptions,
        "requeued_ns": requeued if preemptions else 0,
        "formula_residual_ns": residual,
        "_gaps": gaps,
    }
    for column in attributes:
        out[column] = _first_value(req, column)
    return out


@dataclass
class Reference:
    rows: int
    row_rules: list[tuple[dict, str]]  # unplaceable rows and their rule
    requests: dict[Any, Request]

    @property
    def valid(self) -> list[Request]:
        return [r for r in self.requests.values() if r.rule is None]

    @property
    def invalid(self) -> list[Request]:
        return [r for r in self.requests.values() if r.rule is not None]

    def accounting(self) -> dict[str, int]:
        quarantined = len(self.row_rules) + sum(len(r.rows) for r in self.invalid)
        return {
            "rows": self.rows,
            "rows_analyzed": self.rows - quarantined,
            "rows_quarantined": quarantined,
            "requests": len(self.requests),
            "requests_valid": len(self.valid),
            "requests_invalid": len(self.invalid),
        }

    def outcomes(self) -> dict[str, int]:
        out = {"completed": 0, "cancelled": 0, "in_flight": 0, "errored": 0}
        for r in self.valid:
            out[r.metrics["outcome"]] += 1
        return out

    def pooled_gaps(self) -> list[int]:
        """ITL: every gap of completed requests with at least two ticks."""
        return sorted(
            g
            for r in self.valid
            if r.metrics["outcome"] == "completed" and r.metrics["itl_mean_ns"] is not None
            for g in r.metrics["_gaps"]
        )


def analyse(rows: list[dict]) -> Reference:
    """Replay every request of ``rows`` through the README's lifecycle and metrics."""
    row_rules: list[tuple[dict, str]] = []
    requests: dict[Any, Request] = {}
    for row in rows:
        for column, rule in (
            ("request_id", "missing_request_id"),
            ("event", "missing_event"),
            ("ts", "missing_timestamp"),
        ):
            if row.get(column) is None:
                row_rules.append((row, rule))
                break
        else:
            rid = row["request_id"]
            requests.setdefault(rid, Request(rid)).rows.append(row)
    placed = [r for req in requests.values() for r in req.rows]
    trace_end = max((r["ts"] for r in placed), default=0)
    attributes = sorted({k for r in rows for k in r if k not in CANONICAL})
    facts: dict[Any, dict] = {}
    # Requests that show which side they are on (an admission, or output) first; then the
    # rest are queued exactly when some valid request of the trace was admitted.
    for req in requests.values():
        if req.admitted or req.ticked:
            req.rule, facts[req.request_id] = _rule(req, queued_after_arrival=req.admitted)
    server_trace = any(r.rule is None and r.admitted for r in requests.values())
    for req in requests.values():
        if not (req.admitted or req.ticked):
            req.rule, facts[req.request_id] = _rule(req, queued_after_arrival=server_trace)
    for req in requests.values():
        if req.rule is None:
            req.metrics = _metrics(req, facts[req.request_id], trace_end, attributes)
    return Reference(len(rows), row_rules, requests)


def percentile(values: list[int], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def pooled_gaps_of(rows: list[dict]) -> list[int]:
    return analyse(rows).pooled_gaps()
