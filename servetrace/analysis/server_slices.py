"""The server's figures per time slice (``analyze --slice W --server-metrics FILE``), each
beside the trace's own figure of the same quantity, by the consistency findings'
definitions (design §12) applied to the slices of ``analysis.slices``:

- ``scrapes``: scrape instants (trace clock) in the slice ``[start, end)`` (the last
  slice holds its end), as ``--slice`` places any instant;
- ``server_waiting_mean`` / ``server_running_mean``: the gauge's mean over those scrapes,
  beside ``trace_queued_mean`` / ``trace_running_mean``: the trace's level at the same
  instants (``concurrency.levels_at``), so the two agree exactly when the server and the
  trace count the same requests (the trace's time-weighted ``queued_mean`` of the slice
  table is a different average: between scrapes the level moves);
- ``server_successes``, ``server_preemptions``, ``server_prompt_tokens``,
  ``server_generation_tokens``: the counter's increase over the scrape intervals that end
  in the slice ``(start, end]`` (``series.total_deltas``), beside ``trace_completions``,
  ``trace_preemptions``, ``trace_prompt_tokens`` (at the first token), ``trace_output_tokens``
  over the same ``(start, end]`` (``server_metrics.trace_counts``). With a slice a multiple
  of the scrape interval on one clock, the intervals tile the slices and the pairs agree
  exactly; otherwise an interval counts whole in the slice where it ends (the last slice
  takes the interval holding the trace's end).

A column the server or the trace cannot give is null, its reason in ``unavailable``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import levels_at
from servetrace.analysis.result import Analysis
from servetrace.analysis.server_buckets import ratio
from servetrace.analysis.server_clock import levels_known
from servetrace.analysis.server_engines import ENGINES
from servetrace.analysis.server_findings import ServerComparison
from servetrace.analysis.server_metrics import finding_deltas, trace_counts
from servetrace.sources.server_metrics.series import gauge_at, total_deltas

# The finding → (server column, trace column) of each counter.
COUNTER_COLUMNS = {
    "success_counter": ("server_successes", "trace_completions"),
    "preemption_counter": ("server_preemptions", "trace_preemptions"),
    "prompt_tokens_counter": ("server_prompt_tokens", "trace_prompt_tokens"),
    "generation_tokens_counter": ("server_generation_tokens", "trace_output_tokens"),
}
# The trace's level → (server column, trace column) of the engine's gauge of it.
GAUGE_COLUMNS = {
    "queued": ("server_waiting_mean", "trace_queued_mean"),
    "running": ("server_running_mean", "trace_running_mean"),
}
COLUMNS = (
    "scrapes",
    *[c for pair in GAUGE_COLUMNS.values() for c in pair],
    *[c for pair in COUNTER_COLUMNS.values() for c in pair],
)


def _mean_by(index: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    ok = ~np.isnan(values)
    total = np.bincount(index[ok], weights=values[ok], minlength=n)
    return ratio(total, np.bincount(index[ok], minlength=n))


def server_slice_figures(
    found: ServerComparison,
    analysis: Analysis,
    slices: pl.DataFrame,
    events: pl.LazyFrame | None,
) -> tuple[pl.DataFrame, dict[str, str]]:
    """One row per slice (the module docstring's columns) and the reason of each column
    left null."""
    metrics = found.metrics
    assert metrics is not None
    off = found.alignment.offset_ns
    starts = slices["start_ns"].to_numpy()
    n = starts.size
    edges = np.append(starts, slices["end_ns"].to_numpy()[-1]).astype(np.int64)
    out: dict[str, np.ndarray] = {}
    unavailable: dict[str, str] = {}
    instants = np.unique(metrics["ts"].to_numpy())
    shifted = instants - off
    inside = (shifted >= edges[0]) & (shifted <= edges[-1])
    index = np.minimum(np.searchsorted(starts, shifted[inside], side="right") - 1, n - 1)
    out["scrapes"] = np.bincount(index, minlength=n).astype(np.float64)
    known = levels_known(analysis)
    at = levels_at(analysis.timeline.transitions, shifted[inside]) if known else None
    engine = ENGINES[found.engine]
    for family, (level_name, _, _) in engine.gauges.items():
        server_col, trace_col = GAUGE_COLUMNS[level_name]
        gauge = gauge_at(metrics, family, instants[inside])
        if gauge is None:
            unavailable[server_col] = f"no {family} series"
        else:
            out[server_col] = _mean_by(index, gauge, n)
        if at is None:
            unavailable[trace_col] = "the trace has no admissions"
        else:
            level = at[level_name].astype(np.float64)
            # Over the scrapes the gauge has a value at (none before its first sample).
            if gauge is not None:
                level = np.where(np.isnan(gauge), np.nan, level)
            out[trace_col] = _mean_by(index, level, n)
    counted = trace_counts(analysis.per_request, events, edges, engine)
    # The last slice takes the scrape interval holding the trace's end: the scrape that
    # counted its last events comes at or after it.
    server_edges = edges.copy()
    after = np.searchsorted(shifted, edges[-1], side="left")
    if after < shifted.size:
        server_edges[-1] = shifted[after]
    for name, (server_col, trace_col) in COUNTER_COLUMNS.items():
        row = engine.counters[name]
        if row.family is None:
            unavailable[server_col] = str(row.absent)
        elif metrics.filter(pl.col("family") == row.family).is_empty():
            unavailable[server_col] = f"no {row.family} series"
        else:
            deltas = finding_deltas(metrics, name, engine)
            out[server_col] = total_deltas(deltas, server_edges + off)
        if name in counted:
            out[trace_col] = counted[name]
        else:
            unavailable[trace_col] = "the trace cannot count it"
    frame = slices.select("slice", "start_ns", "end_ns").with_columns(
        pl.Series(c, out[c], dtype=pl.Float64, nan_to_null=True)
        if c in out
        else pl.lit(None, pl.Float64).alias(c)
        for c in COLUMNS
    )
    return frame.with_columns(pl.col("scrapes").cast(pl.Int64)), unavailable
