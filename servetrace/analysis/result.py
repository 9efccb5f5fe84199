"""``Analysis``: everything servetrace knows about one run, the one result every view reads.

Every engine (in memory, batched, partitioned, partials merged, Ray) builds one, and
``runs`` completes it with what the run says about itself (``declared``) and how it was
analysed (``by``, ``window``, ``slices``, ``fluidity``). Tables, JSON, HTML, plots and the
timeline all read their facts from it — above all ``summary.unavailable``, what the source
cannot express — so no view shows a number another view calls unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from servetrace.analysis.fluidity import FluidityTargets
from servetrace.analysis.lifecycle import KEY, Timeline
from servetrace.analysis.metric_names import Distribution
from servetrace.analysis.server_findings import ServerComparison
from servetrace.analysis.server_reported import ServerReported, server_reported
from servetrace.analysis.summary import GoodputTarget, Summary
from servetrace.analysis.window import Window
from servetrace.errors import UsageError

if TYPE_CHECKING:
    from servetrace.analysis.stalls import Stalls

EventsReader = Callable[[], pl.LazyFrame]


@dataclass(frozen=True)
class AnalysisOptions:
    goodput: tuple[GoodputTarget, ...] = ()
    formula_abs_tol_ns: int = 1_000_000
    formula_rel_tol: float = 0.01
    fluidity: FluidityTargets | None = None  # --fluidity: Etalon's per-token deadlines
    # --steps: the in-memory engine keeps the timeline's sorted ticks (the stall join reads
    # them) instead of freeing them.
    keep_ticks: bool = False
    # The settings the caller gave (field names): a merge keeps the shards' own for the
    # rest, even where a given value equals the default.
    explicit: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Analysis:
    """One analysed run.

    ``per_request`` is the per-request frame as the engine keeps it (with the internal
    key ``_key`` that joins it to ``gaps`` and the timeline); ``requests`` is that frame
    as users get it. ``groups`` holds one ``Summary`` per value of ``by``; ``events``
    re-reads the run's canonical events for the views that draw them (None when the
    analysis was made without them: merged partials, Ray).
    """

    inputs: tuple[str, ...]
    timeline: Timeline
    per_request: pl.DataFrame  # one row per valid request; see metrics.REQUEST_COLUMNS
    gaps: pl.DataFrame  # every inter-tick gap of completed requests: _key, itl_ns
    summary: Summary
    quarantine_rows: pl.DataFrame  # input rows not analysed, with their rule
    attributes: tuple[str, ...] = field(default_factory=tuple)
    # A streamed trace keeps no gaps; for --by it keeps one ITL distribution per value.
    itl_by: tuple[str, dict[Any, Distribution]] | None = None
    by: str | None = None
    groups: Mapping[object, Summary] | None = None
    read_warnings: tuple[str, ...] = field(default_factory=tuple)
    # What the run declares about itself (runs.model.DECLARED_KEYS); None for a trace.
    declared: Mapping[str, Any] | None = None
    window: Window | None = None  # --window / --steady-state: what was analysed
    slices: pl.DataFrame | None = None  # --slice: analysis.slices.slice_figures
    fluidity: FluidityTargets | None = None
    stalls: Stalls | None = None  # --steps: ITL gaps joined to the engine's steps
    # --server-metrics: the engine's series against this trace (analysis.server_metrics)
    server_metrics: ServerComparison | None = None
    events_reader: EventsReader | None = field(default=None, compare=False, repr=False)

    @property
    def requests(self) -> pl.DataFrame:
        """One row per valid request (the ``--requests-out`` frame)."""
        return self.per_request.drop(KEY)

    @property
    def server_reported(self) -> ServerReported | None:
        """The server's own per-request figures the source carried (vLLM's response
        bodies), summarised apart from the trace's; None for a trace without them."""
        return server_reported(self.per_request)

    @property
    def quarantine(self) -> pl.DataFrame:
        """Input rows not analysed, each with its ``rule`` (the ``--quarantine-out`` frame),
        in one order whatever the engine (``quarantine_order``)."""
        return quarantine_order(self.quarantine_rows)

    @property
    def warnings(self) -> tuple[str, ...]:
        return (*self.read_warnings, *self.summary.warnings)

    def events(self, why: str) -> pl.LazyFrame:
        """The run's canonical events, for a view that draws them (``why`` names it)."""
        if self.events_reader is None:
            raise UsageError(
                f"{', '.join(self.inputs)}: {why}, and this analysis keeps no events "
                "(merged partials and --engine ray keep per-request results only)",
                hint="give the trace itself",
            )
        return self.events_reader()


def events_of(events: pl.LazyFrame | pl.DataFrame, requests: pl.DataFrame) -> pl.LazyFrame:
    """The rows of ``events`` of the requests of ``requests``, matched on their ids as
    strings (the frame's ids and the re-read events' may differ in type)."""
    ids = requests.lazy().select(pl.col("request_id").cast(pl.String))
    text = events.lazy().with_columns(pl.col("request_id").cast(pl.String))
    return text.join(ids, on="request_id", how="semi")


def quarantine_order(rows: pl.DataFrame) -> pl.DataFrame:
    """Quarantined rows by request, then time and event, then every other column: the
    engines that split a trace by request (partitioned, partials, Ray) cannot keep the
    input's order, and a total order makes their files the in-memory one byte for byte.
    Rows without an id (unplaceable) come last."""
    first = [c for c in ("request_id", "ts", "event", "rule") if c in rows.columns]
    rest = [c for c in rows.columns if c not in first and not rows.schema[c].is_nested()]
    return rows.sort([*first, *rest], nulls_last=True, maintain_order=True)
