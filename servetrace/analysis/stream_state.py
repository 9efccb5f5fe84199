"""What the batched engine keeps between batches, kept small and cheap to query.

The batched engine (``streaming``) reads a time-ordered log in batches. Between batches
it needs three things about the requests seen so far, and each used to cost time or
memory in proportion to the whole trace:

- **Which requests are finished** (``finished_and_unplaced``): decided from the
  *marker* rows only (terminal events, releases, admissions, first tokens: a few rows per
  request, where a batch has ~2 M rows, 96 % of them output ticks). A request is finished
  when its terminal event (and release, when the trace logs releases) has been read and
  the log has moved past its time; it is *unplaced* when it has neither an admission nor
  an output tick, which only a finished request without an admission or first-token
  marker has to be checked for, against its own tick rows.
- **Whether a row belongs to a request already finished** (``FinishedIds``): every
  batch's distinct ids are looked up among all finished ids. A Polars ``is_in`` against
  the finished ids builds a hash set of all of them per batch (O(requests) per batch,
  O(requests²/batch) per trace: 4 M ids × 500 batches at 1e9 events); instead the ids'
  64-bit hashes are kept sorted in a few levels that merge like a binary counter, each
  batch's ids are binary-searched, and only a hash that matches is confirmed against the
  ids themselves, so the answer stays exact.
- **What is kept of each finished request** (``retained_timeline``,
  ``retained_transitions``): only the timeline columns a summary, ``--by`` or a partial
  reads after the kernel has run, and concurrency changes in one byte each.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.grouped_figures import EVENT_TIMES
from servetrace.analysis.lifecycle import KEY
from servetrace.schema import TERMINAL_EVENTS, TICK_EVENTS

# Rows that say whether a request is finished or placed: a few per request.
MARKERS = (*TERMINAL_EVENTS, "release", "admission", "first_token")
# Timeline columns read after the kernel: accounting, violations and leaked state
# (``summary``), spans of ``--by`` groups (``grouped_figures.EVENT_TIMES``), partials
# (``partial.TIMELINE_COLUMNS``). The kernel's state-machine columns are not kept.
RETAINED_TIMELINE = tuple(
    dict.fromkeys(
        (
            KEY,
            "request_id",
            "rule",
            "outcome",
            "rows",
            "n_admission",
            "n_release",
            "ticks",
            *EVENT_TIMES,
        )
    )
)
_DELTAS = ("d_queued", "d_running", "d_in_system")
_HASH_SEED = 0x5EED


def finished_and_unplaced(
    buffer: pl.DataFrame, needs_release: bool, frontier: int | None
) -> tuple[pl.Series, pl.Series]:
    """Ids of the requests complete within ``buffer``, and those of them unplaced.

    Complete: the terminal event (and release, when the trace logs releases) has been
    read and every such row is older than ``frontier``, the newest time read so far (rows
    at equal timestamps may come in any order, so a request ending at the newest time
    waits for the next batch). Unplaced: neither an admission nor an output tick.
    """
    event = pl.col("event")
    ending = event.is_in(TERMINAL_EVENTS)
    if needs_release:
        ending = ending | (event == "release")
    done = event.is_in(TERMINAL_EVENTS).any()
    if needs_release:
        done = done & (event == "release").any()
    if frontier is not None:
        done = done & (pl.col("ts").filter(ending).max() < frontier)
    status = (
        buffer.filter(event.is_in(MARKERS))
        .group_by("request_id")
        .agg(done.alias("done"), event.is_in(["admission", "first_token"]).any().alias("seen"))
        .filter(pl.col("done"))
    )
    finished = status["request_id"]
    maybe = status.filter(~pl.col("seen"))["request_id"]
    if maybe.len() == 0:
        return finished, maybe
    # Rare (cancelled in the queue; a client log without first_token rows): look for
    # their output ticks among the rows.
    ticked = buffer.filter(pl.col("request_id").is_in(maybe.implode()) & event.is_in(TICK_EVENTS))[
        "request_id"
    ]
    return finished, maybe.filter(~maybe.is_in(ticked.implode()))


def _hashes(ids: pl.Series) -> npt.NDArray[np.uint64]:
    return np.sort(ids.hash(seed=_HASH_SEED).to_numpy())


class FinishedIds:
    """Request ids finished so far; ``among`` finds which of a batch's ids are, exactly."""

    def __init__(self) -> None:
        self._levels: list[npt.NDArray[np.uint64]] = []  # sorted, sizes decreasing
        self._ids: list[pl.Series] = []  # the ids themselves, to confirm a hash match

    def add(self, ids: pl.Series) -> None:
        if ids.len() == 0:
            return
        self._ids.append(ids)
        self._levels.append(_hashes(ids))
        # Merge like a binary counter: O(log n) levels, each id re-sorted O(log n) times.
        while len(self._levels) > 1 and self._levels[-2].size <= 2 * self._levels[-1].size:
            top = self._levels.pop()
            self._levels[-1] = np.sort(np.concatenate([self._levels[-1], top]), kind="stable")
        if len(self._ids) > 64:
            self._ids = [pl.concat(self._ids)]

    def among(self, ids: pl.Series) -> pl.Series:
        """The finished ones of ``ids`` (distinct, non-null)."""
        if not self._levels or ids.len() == 0:
            return ids.clear()
        probe = ids.hash(seed=_HASH_SEED).to_numpy()
        hit = np.zeros(probe.size, dtype=bool)
        for level in self._levels:
            at = np.searchsorted(level, probe).clip(max=level.size - 1)
            hit |= level[at] == probe
        if not hit.any():
            return ids.clear()
        candidates = ids.filter(pl.Series(hit))
        finished = pl.concat(self._ids)
        return candidates.filter(candidates.is_in(finished.implode()))


def retained_timeline(requests: pl.DataFrame) -> pl.DataFrame:
    """The columns of a batch's timeline rows that anything reads after the kernel."""
    return requests.select(c for c in RETAINED_TIMELINE if c in requests.columns)


def retained_transitions(transitions: pl.DataFrame) -> pl.DataFrame:
    """Concurrency changes (-1, 0, +1) as Int8: sums and running sums over them are
    Int64 in Polars, so every figure is unchanged."""
    return transitions.with_columns(
        pl.col(c).cast(pl.Int8) for c in _DELTAS if c in transitions.columns
    )
