"""A trace analysed in pieces of whole requests, and the one ``Analysis`` of them.

The batched engine (``streaming``: the requests a batch of a time-ordered log finishes)
and the partitioned one (``partitioned``: every request of one hash partition) hand
pieces to ``Pieces.add``. Each goes through the in-memory engine's kernel
(``build_timeline``, ``request_metrics``, ``gap_frame``) with the facts of the whole
trace; its keys are renumbered trace-wide; only what is read after the kernel is kept,
spilled to ``TMPDIR`` every few dozen pieces (``stream_state.Retained``); ITL gaps are
pooled (``histogram.PooledGaps``: exact within the budget, then a log histogram within
±``RELATIVE_BOUND``). ``analysis`` then summarizes once over what was kept, as in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from servetrace.analysis.fluidity import fluidity_columns
from servetrace.analysis.histogram import (
    GAP_SCHEMA,
    RELATIVE_BOUND,
    GapBudget,
    PooledGaps,
    add_by_group,
)
from servetrace.analysis.known_facts import whole_trace_facts
from servetrace.analysis.lifecycle import (
    KEY,
    Timeline,
    build_timeline,
    has_invalid,
    key_renumbering,
    quarantined_rows,
)
from servetrace.analysis.memory import attribute_columns, no_event_rows, summary_of, unreadable
from servetrace.analysis.metrics import gap_frame, request_metrics
from servetrace.analysis.result import Analysis, AnalysisOptions
from servetrace.analysis.stream_state import (
    Retained,
    retained_timeline,
    retained_transitions,
    sort_in_place,
    spill_directory,
)
from servetrace.errors import UsageError
from servetrace.sources.trace import Trace


@contextmanager
def pieces_of(
    trace: Trace, options: AnalysisOptions | None, by: str | None, exact_gaps: int
) -> Iterator[Pieces]:
    """``Pieces`` of ``trace``, their spill directory removed at the end, also on error;
    a read failure that surfaces while the scan runs is the user's one-line error."""
    try:
        with spill_directory() as spill:
            yield Pieces(trace, options or AnalysisOptions(), by, exact_gaps, spill)
    except pl.exceptions.PolarsError as error:
        raise unreadable(trace, error) from None


class Pieces:
    """What is kept of every analysed piece: one row per request, pooled gaps."""

    def __init__(
        self, trace: Trace, options: AnalysisOptions, by: str | None, exact_gaps: int, spill: Path
    ) -> None:
        # The span and whether the trace logs admissions and releases: from ingest, or
        # one scan of the whole trace (known_facts).
        self.facts = whole_trace_facts(trace)
        self.schema = trace.events.collect_schema()
        self.attributes = attribute_columns(list(self.schema.names()))
        if by is not None and by not in self.attributes:
            raise UsageError(
                f"--by {by}: no such request column",
                hint="columns: " + ", ".join(self.attributes)
                if self.attributes
                else "the trace has none",
            )
        self.options = options
        self.by = by
        self.grouped = by is not None
        self._timeline = Retained(spill, "timeline")
        self._transitions = Retained(spill, "transitions")
        self._row_quarantine = Retained(spill, "row-quarantine")
        self._requests = Retained(spill, "requests")
        self.has_admissions = False  # of valid requests, as in memory (lifecycle docstring)
        self.quarantine: list[pl.DataFrame] = []
        self.itl = PooledGaps(GapBudget(exact_gaps))
        self.by_budget = GapBudget(exact_gaps)  # shared by the groups: their sum stays bounded
        self.itl_by: dict[object, PooledGaps] = {}
        self.next_key = 0
        self.empty_ticks: pl.DataFrame | None = None
        self._no_rows: pl.DataFrame | None = None  # the row quarantine's schema, empty

    def add(self, frame: pl.DataFrame, unadmitted_queued: bool | None = None) -> None:
        """Every row of each of some requests (and rows of no request)."""
        if frame.height == 0:
            return
        timeline = build_timeline(frame, self.attributes, self.facts, unadmitted_queued)
        metrics = request_metrics(timeline, self.attributes)
        if self.options.fluidity is not None:
            metrics = fluidity_columns(timeline, metrics, self.options.fluidity)
        gaps = gap_frame(timeline, metrics)
        if self.by is not None:
            grouped = gaps.join(metrics.select(KEY, self.by), on=KEY, how="left")
            add_by_group(self.itl_by, grouped, self.by, self.by_budget)
        # Keys are unique within one piece only: renumber them trace-wide.
        rekey = key_renumbering(timeline.requests, self.next_key)
        self.next_key += timeline.requests.height
        # While every gap fits the exact budget keep them with their (trace-wide) keys:
        # the result then carries the in-memory gap frame (intervals, --by, the CDF).
        if self.itl.exact:
            self.itl.add_frame(rekey(gaps))
        else:
            self.itl.add(gaps["itl_ns"])
        # Only what is read after the kernel is kept (stream_state); not the tick frame,
        # the bulk of a piece, whose gaps are counted.
        if self.empty_ticks is None:
            self.empty_ticks = timeline.ticks.clear()
            self._no_rows = timeline.row_quarantine.clear()
        self._timeline.append(rekey(retained_timeline(timeline.requests, self.grouped)))
        self._transitions.append(retained_transitions(rekey(timeline.transitions), self.grouped))
        if timeline.row_quarantine.height:
            self._row_quarantine.append(timeline.row_quarantine)
        self._requests.append(rekey(metrics))
        self.has_admissions = self.has_admissions or timeline.has_admissions
        if has_invalid(timeline):
            self.quarantine.append(quarantined_rows(frame, timeline))

    def analysis(self, inputs: tuple[str, ...]) -> Analysis:
        """The analysis of the whole trace, summarized once over what was kept."""
        if not len(self._timeline) or self.empty_ticks is None:
            raise no_event_rows(inputs)
        timeline = self.timeline(self.empty_ticks)
        requests = self.requests()
        exact = self.itl.frame(GAP_SCHEMA)
        summary = summary_of(
            timeline,
            requests,
            exact if exact is not None else self.itl.describe(),
            self.options,
            self._histogram_warning(),
        )
        rows_out = (
            pl.concat(self.quarantine, how="diagonal_relaxed")
            if self.quarantine
            else pl.DataFrame(schema={**self.schema, "rule": pl.String})
        )
        by = self.by
        return Analysis(
            inputs=inputs,
            timeline=timeline,
            per_request=requests,
            gaps=exact if exact is not None else pl.DataFrame(schema=GAP_SCHEMA),
            summary=summary,
            quarantine_rows=rows_out,
            attributes=tuple(self.attributes),
            itl_by=(by, {value: h.describe() for value, h in self.itl_by.items()}) if by else None,
        )

    def timeline(self, ticks: pl.DataFrame) -> Timeline:
        """The kept timeline, as the in-memory engine has it (the columns read after the
        kernel only)."""
        rows = self._row_quarantine.frame() if len(self._row_quarantine) else self._no_rows
        assert rows is not None, "timeline() before any add()"
        return Timeline(
            requests=self._timeline.frame(),
            ticks=ticks,
            transitions=self._transitions.frame(),
            row_quarantine=rows,
            trace_start_ns=self.facts.start_ns,
            trace_end_ns=self.facts.end_ns,
            has_admissions=self.has_admissions,
            has_releases=self.facts.has_releases,
        )

    def requests(self) -> pl.DataFrame:
        """Every kept request's metrics, sorted as in memory (arrival, id)."""
        return sort_in_place(self._requests.frame(), ["arrival_ns", "request_id"])

    def _histogram_warning(self) -> list[str]:
        """Say so when some ITL percentiles are not exact, with their proven bound."""
        if self.itl.exact and all(group.exact for group in self.itl_by.values()):
            return []
        return [
            f"streamed: more ITL gaps than the {self.itl.budget.limit:,} kept exactly, so ITL "
            f"percentiles come from a log histogram (within ±{RELATIVE_BOUND:.4%})"
        ]
