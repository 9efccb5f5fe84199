"""Server-side or client-side: decided per request, from its own events (design §3).

A request with at least one ``admission`` row is server-side: arrival puts it in QUEUED and
it needs an admission before its first token. A request without any is client-side (a load
client cannot see admission): arrival leads straight to RUNNING, and its queue wait and
prefill are unavailable (null), never zero. So one stray admission row invalidates only the
request it belongs to, a trace may mix both kinds (a server log joined with client logs),
and the result never depends on which other requests happen to be in the same file or
streamed batch.

A request with neither an admission nor any output (cancelled, or still in flight, before
anything happened to it) cannot tell: it is taken as queued when the trace has a *valid*
admitted request (a server log: it was waiting, and its queue wait runs to its
cancellation) and as client-side otherwise, so a stray admission in a client log does not
turn its early cancellations into "queued". Trace-wide, ``Timeline.has_admissions`` says
whether any valid request was admitted (queued concurrency is reported only then); when it
is, ``mixed_admission_warnings`` counts the valid requests with output but no admission,
since in a server log that is a lost row rather than a client.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from servetrace.analysis.lifecycle_rules import KEY

# requests and control sequence of a trace, given whether unadmitted requests queue
Decided = tuple[pl.DataFrame, pl.DataFrame]


def server_side(unadmitted_queued: bool) -> pl.Expr:
    """Per row of the control frame: whether its request is server-side (queues)."""
    # An admission makes it server-side, an output without one client-side; with neither,
    # the trace decides (``unadmitted_queued``).
    admitted = (pl.col("event") == "admission").any().over(KEY)
    if unadmitted_queued:
        admitted = admitted | ~pl.col("synthetic").any().over(KEY)
    return admitted


def decide(
    run: Callable[[bool], Decided], others: pl.DataFrame, unadmitted_queued: bool | None
) -> Decided:
    """Run the state machine (``run``) with the side of the undecidable requests settled.

    ``unadmitted_queued``: given by the caller (the streaming engine, when a batch alone
    cannot know), or ``None`` to decide it from the valid requests of the trace.
    """
    if unadmitted_queued is not None:
        return run(unadmitted_queued)
    # Guess from the rows (any admission at all), and run the state machine again only
    # when every admitted request turned out invalid and the guess mattered.
    guess = bool((others["event"] == "admission").any())
    requests, seq = run(guess)
    valid_admitted = requests.filter(pl.col("rule").is_null() & (pl.col("n_admission") > 0))
    if guess and valid_admitted.height == 0 and ambiguous(requests).any():
        return run(False)
    return requests, seq


def ambiguous(requests: pl.DataFrame) -> pl.Series:
    """Requests with neither an admission nor an output tick: server or client unknown."""
    return requests.select(
        ((pl.col("n_admission") == 0) & pl.col("ticks").is_null()).alias("ambiguous")
    )["ambiguous"]


def mixed_admission_warnings(requests: pl.DataFrame, has_admissions: bool) -> list[str]:
    """Say so when valid requests of both kinds (admitted or not) share a trace."""
    if not has_admissions:
        return []
    valid = requests.filter(pl.col("rule").is_null())
    without = int(((valid["n_admission"] == 0) & valid["ticks"].is_not_null()).sum())
    if without == 0:
        return []
    return [
        f"{without} of {valid.height} valid requests have no admission event while the others "
        "do: they are taken as client-side (queue wait and prefill unavailable); in a server "
        "log this means lost admission rows"
    ]
