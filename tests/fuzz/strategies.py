"""Hypothesis strategies: random valid event logs, then a few small corruptions.

Valid requests cover server-side lifecycles (queued, prefill, decode, preempted and
re-admitted, cancelled or errored in every state, in flight, released or not) and client-side
ones (no admission), multi-token chunks and equal timestamps written in any order.
Corruptions are what real logs suffer: a lost row, a duplicated row, a row written with
another request's time, a stray admission, a row missing a field, a zero-token chunk, a
token after the end.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MS = 1_000_000

# Steps between events: equal timestamps are common on purpose.
STEP_MS = st.sampled_from([0, 0, 0, 1, 2, 3, 5, 8, 20, 50])
POLICIES = st.sampled_from([None, "fcfs", "sjf"])


def _row(rid: str, event: str, ts: int, **extra: Any) -> dict[str, Any]:
    return {"request_id": rid, "event": event, "ts": ts, **extra}


@st.composite
def request_rows(draw: st.DrawFn, rid: str, server: bool) -> list[dict[str, Any]]:
    """One valid request; ``server`` decides whether it is ever admitted."""
    t = draw(st.integers(0, 200)) * MS

    def step() -> int:
        nonlocal t
        t += draw(STEP_MS) * MS
        return t

    rows = [
        _row(
            rid,
            "arrival",
            t,
            prompt_tokens=draw(st.one_of(st.none(), st.integers(1, 4096))),
            policy=draw(POLICIES),
        )
    ]
    outcome = draw(st.sampled_from(["completion", "cancellation", "error", "in_flight"]))
    # Where the story stops (cancellation or end of trace): how far it got.
    stages = ["queued", "prefill", "decode", "requeued"] if server else ["running", "decode"]
    stop = draw(st.sampled_from(stages)) if outcome != "completion" else "decode"
    n_ticks = draw(st.integers(1, 6)) if stop in ("decode", "requeued") else 0
    chunks = draw(st.lists(st.integers(1, 4), min_size=n_ticks, max_size=n_ticks))
    first_kind = draw(st.sampled_from(["first_token", "token"]))
    preempt_during = server and n_ticks >= 2 and draw(st.booleans())

    def tick(i: int) -> None:
        kind = first_kind if i == 0 else "token"
        rows.append(_row(rid, kind, step(), tokens=chunks[i]))

    if server and stop != "queued":
        rows.append(_row(rid, "admission", step(), policy=draw(POLICIES)))
    for i in range(n_ticks):
        tick(i)
        if preempt_during and i == 0:
            # Preempted after the first token, re-admitted strictly later (at equal times
            # the re-admission would sort before the preemption).
            rows.append(_row(rid, "preemption", step()))
            t += MS
            rows.append(_row(rid, "admission", t))
    if stop == "requeued" and not preempt_during:
        rows.append(_row(rid, "preemption", step()))
    if outcome != "in_flight":
        end = step()
        extra = {}
        if outcome == "completion" and draw(st.booleans()):
            extra["output_tokens"] = sum(chunks) + draw(st.sampled_from([0, 0, 1]))
        rows.append(_row(rid, outcome, end, policy=draw(POLICIES), **extra))
        if draw(st.booleans()):
            rows.append(_row(rid, "release", step()))
    return rows


def _corrupt(draw: st.DrawFn, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kind = draw(
        st.sampled_from(
            [
                "drop",
                "duplicate",
                "retime",
                "stray_admission",
                "stray_new_request",
                "null_field",
                "zero_tokens",
                "token_after_end",
                "extra_first_token",
            ]
        )
    )
    rows = [dict(r) for r in rows]
    i = draw(st.integers(0, len(rows) - 1))
    victim = rows[i]
    top = max(r["ts"] for r in rows if r.get("ts") is not None)
    if kind == "drop":
        del rows[i]
    elif kind == "duplicate":
        rows.insert(draw(st.integers(0, len(rows))), dict(victim))
    elif kind == "retime":
        victim["ts"] = draw(st.integers(0, 300)) * MS
    elif kind == "stray_admission":
        rows.append(_row(victim["request_id"], "admission", draw(st.integers(0, 300)) * MS))
    elif kind == "stray_new_request":
        rows.append(_row("stray", draw(st.sampled_from(["admission", "token"])), top))
    elif kind == "null_field":
        victim[draw(st.sampled_from(["request_id", "event", "ts"]))] = None
    elif kind == "zero_tokens":
        ticks = [r for r in rows if r["event"] in ("first_token", "token")]
        if ticks:
            draw(st.sampled_from(ticks))["tokens"] = 0
    elif kind == "token_after_end":
        rows.append(_row(victim["request_id"], "token", top + MS, tokens=1))
    elif kind == "extra_first_token":
        rows.append(_row(victim["request_id"], "first_token", victim["ts"] or 0, tokens=1))
    return rows


@st.composite
def event_logs(draw: st.DrawFn, corrupt: bool = True) -> list[dict[str, Any]]:
    """A trace as rows, shuffled; a mix of server and client requests, maybe corrupted."""
    n = draw(st.integers(1, 7))
    mode = draw(st.sampled_from(["server", "client", "mixed"]))
    rows: list[dict[str, Any]] = []
    for i in range(n):
        server = mode == "server" or (mode == "mixed" and draw(st.booleans()))
        rows += draw(request_rows(f"r{i}", server))
    if corrupt:
        for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
            if rows:
                rows = _corrupt(draw, rows)
    return draw(st.permutations(rows)) if rows else rows
