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

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from servetrace.analysis.lifecycle import EVENT_TIMES, KEY
from servetrace.errors import InputError
from servetrace.schema import TERMINAL_EVENTS, TICK_EVENTS

# Rows that say whether a request is finished or placed: a few per request.
MARKERS = (*TERMINAL_EVENTS, "release", "admission", "first_token")
# Timeline columns read after the kernel: accounting, violations and leaked state
# (``summary``), partials (``partial.TIMELINE_COLUMNS``); with ``--by`` also the event
# times of its spans (``lifecycle.EVENT_TIMES``). The kernel's state-machine
# columns are not kept.
RETAINED_TIMELINE = (
    KEY,
    "request_id",
    "rule",
    "outcome",
    "rows",
    "n_admission",
    "n_release",
    "ticks",
    "arrival_ns",
    "terminal_ns",
)
RETAINED_GROUPED = (*RETAINED_TIMELINE, *(t for t in EVENT_TIMES if t not in RETAINED_TIMELINE))
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


def _hash_of(ids: pl.Series) -> npt.NDArray[np.uint64]:
    return ids.hash(seed=_HASH_SEED).to_numpy()


class FinishedIds:
    """Request ids finished so far; ``among`` finds which of a batch's ids are, exactly."""

    def __init__(self) -> None:
        self._levels: list[npt.NDArray[np.uint64]] = []  # sorted, sizes decreasing
        self._ids: list[pl.Series] = []  # the ids themselves, to confirm a hash match

    def add(self, ids: pl.Series) -> None:
        if ids.len() == 0:
            return
        self._ids.append(ids)
        self._levels.append(np.sort(_hash_of(ids)))
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
        probe = _hash_of(ids)
        hit = np.zeros(probe.size, dtype=bool)
        for level in self._levels:
            at = np.searchsorted(level, probe).clip(max=level.size - 1)
            hit |= level[at] == probe
        if not hit.any():
            return ids.clear()
        candidates = ids.filter(pl.Series(hit))
        finished = pl.concat(self._ids)
        return candidates.filter(candidates.is_in(finished.implode()))


def retained_timeline(requests: pl.DataFrame, grouped: bool) -> pl.DataFrame:
    """The columns of a batch's timeline rows that anything reads after the kernel;
    the event times of ``--by`` spans only when ``grouped``."""
    wanted = RETAINED_GROUPED if grouped else RETAINED_TIMELINE
    return requests.select(c for c in wanted if c in requests.columns)


def retained_transitions(transitions: pl.DataFrame, grouped: bool) -> pl.DataFrame:
    """Concurrency changes (-1, 0, +1) as Int8: sums and running sums over them are
    Int64 in Polars, so every figure is unchanged. The request key only serves ``--by``
    (``groups``): the trace's concurrency, slices and steady state need time and level."""
    narrow = transitions.with_columns(
        pl.col(c).cast(pl.Int8) for c in _DELTAS if c in transitions.columns
    )
    return narrow if grouped else narrow.drop(KEY, strict=False)


class Retained:
    """Frames appended batch by batch, compacted every ``COMPACT_EVERY`` appends.

    Hundreds of batch-sized pieces (a few thousand rows each) interleaved with the
    batches' large temporaries leave the allocator unable to return memory (at 1e9
    events the process grew by twice what it kept), and one concatenation of all of them
    at the end holds everything twice. So every few dozen batches the pending pieces are
    concatenated into one chunk and, given a ``spill`` directory, written there (Arrow
    IPC, lz4: every dtype comes back as it was) and dropped; ``frame`` reads the chunks
    back in order, each file once, deleting it as it goes.
    """

    COMPACT_EVERY = 32

    def __init__(self, spill: Path | None = None, name: str = "kept") -> None:
        self._spill = spill
        self._name = name
        self._chunks: list[pl.DataFrame | Path] = []  # compacted, in order
        self._pending: list[pl.DataFrame] = []

    def append(self, frame: pl.DataFrame) -> None:
        self._pending.append(frame)
        if len(self._pending) >= self.COMPACT_EVERY:
            self._compact(self._spill)

    def _compact(self, spill: Path | None) -> None:
        if not self._pending:
            return
        joined = pl.concat(self._pending, how="diagonal_relaxed", rechunk=True)
        self._pending = []
        if spill is None:
            self._chunks.append(joined)
            return
        path = spill / f"{self._name}-{len(self._chunks):06d}.arrow"
        try:
            joined.write_ipc(path, compression="lz4")
        except OSError as error:
            raise _spill_error(error) from None
        self._chunks.append(path)

    def __len__(self) -> int:
        return len(self._chunks) + len(self._pending)

    def frame(self) -> pl.DataFrame:
        """Everything appended, as one frame (chunked: no copy of the compacted parts)."""
        self._compact(None)
        chunks: list[pl.DataFrame] = []
        for chunk in self._chunks:
            if isinstance(chunk, Path):
                chunks.append(pl.read_ipc(chunk))
                chunk.unlink()
            else:
                chunks.append(chunk)
        self._chunks = []
        if len(chunks) == 1:
            return chunks[0]
        return pl.concat(chunks, how="diagonal_relaxed", rechunk=False)


def sort_in_place(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """``frame.sort(by, nulls_last=True)`` holding one column twice at a time, not all.

    The keys must be unique (request id among them), so the order is the sort's.
    """
    order = frame.select(pl.arg_sort_by(by, nulls_last=True).alias("i"))["i"]
    names = frame.columns
    columns = frame.get_columns()
    del frame
    for i, column in enumerate(columns):
        columns[i] = column.gather(order)  # the unsorted column is freed here
    return pl.DataFrame(columns, schema=dict(zip(names, [c.dtype for c in columns], strict=True)))


@contextmanager
def spill_directory() -> Iterator[Path]:
    """A temporary directory (``TMPDIR``) for what an engine keeps; removed at the end,
    also on error."""
    try:
        tmp = tempfile.TemporaryDirectory(prefix="servetrace-kept-")
    except OSError as error:
        raise _spill_error(error) from None
    with tmp:
        yield Path(tmp.name)


def _spill_error(error: OSError) -> InputError:
    return InputError(
        f"cannot keep per-request rows in {error.filename or 'TMPDIR'}: {error.strerror or error}",
        hint="a batched analysis keeps finished requests as lz4 Arrow files in TMPDIR "
        "(about 0.3 kB per request); point TMPDIR at a disk with room",
    )
