"""The server's clock against the trace's (design §12, "One clock").

Scrape times are the server's (epoch ns, or the trace clock for the simulator).
``offset_ns`` is server clock − trace clock: a scrape at ``t`` is compared with the trace
at ``t − offset``. When the two spans overlap the first guess is 0, else the difference of
their starts; the running gauge is then matched against the trace's running count over
candidate offsets (a coarse grid of one scrape interval over the trace's span around the
guess, then a fine one of 1/100 interval around the best), by the mean absolute difference
over all the scrapes (the trace runs nothing outside its span), the trace's count scaled up
by its least-squares factor when it holds only part of the server's requests. The guess is
kept when nothing does better; else the middle of the best run of candidates is the offset,
said with its resolution. Without a running gauge (or a trace that cannot see its running
set) overlapping spans are taken as one clock and said so; disjoint spans then cannot be
aligned (``InputError``, exit 3), nor can spans whose best match is still off by more than
half the mean running level.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from servetrace.analysis.concurrency import levels_at
from servetrace.analysis.result import Analysis
from servetrace.analysis.server_engines import ENGINES
from servetrace.analysis.server_findings import Alignment
from servetrace.errors import InputError
from servetrace.sources.server_metrics.series import gauge_at

WAITING, RUNNING = "vllm:num_requests_waiting", "vllm:num_requests_running"
# Gauge family → the trace's level, the finding comparing them, what the two count
# (every engine's rows, vLLM's first: ``server_engines``).
GAUGES = {family: row for e in ENGINES.values() for family, row in e.gauges.items()}


def levels_known(analysis: Analysis) -> bool:
    """Whether the trace sees its queued and running levels (it has admissions)."""
    known = analysis.summary.concurrency.get("queued_mean") is not None
    return analysis.timeline.has_admissions and known


def interval_of(instants: np.ndarray) -> int:
    steps = np.diff(instants)
    return int(np.median(steps)) if steps.size else 1


def _mismatch(
    transitions: pl.DataFrame,
    instants: np.ndarray,
    gauge: np.ndarray,
    offsets: np.ndarray,
    span: tuple[int, int],
) -> np.ndarray:
    """Mean |gauge − trace running| per candidate offset over every scrape (inf: too few
    scrapes fall in the trace's span). Outside its span the trace runs nothing, so a
    scrape there counts against the offset too: scored only inside, an offset that pushes
    the busy scrapes out of the trace would win on a trace of part of the server's
    requests (one client among several), whose running count is a fraction of the gauge."""
    shifted = instants[None, :] - offsets[:, None]
    inside = (shifted >= span[0]) & (shifted <= span[1]) & ~np.isnan(gauge)[None, :]
    trace = levels_at(transitions, shifted.ravel())["running"].reshape(shifted.shape)
    scored = ~np.isnan(gauge)[None, :]
    level = np.nan_to_num(gauge)[None, :]
    # The trace may hold a part of the server's requests: its running count is scaled up
    # by the least-squares factor (at least 1) before the difference, so the best offset
    # is where the shapes line up, not where the trace is busiest.
    held = np.where(scored, trace, 0.0)
    scale = np.maximum(
        (held * level).sum(axis=1) / np.maximum((held * held).sum(axis=1), 1e-9), 1.0
    )
    diff = np.where(scored, np.abs(level - scale[:, None] * trace), 0.0)
    n = inside.sum(axis=1)
    need = max(3, instants.size // 4)
    return np.where(n >= need, diff.sum(axis=1) / np.maximum(scored.sum(axis=1), 1), np.inf)


def align(
    metrics: pl.DataFrame,
    analysis: Analysis,
    where: str,
    clock_offset_ns: int | None,
    running: str = RUNNING,
) -> Alignment:
    """The offset between the server's clock and the trace's (module docstring), matched
    on the engine's ``running`` gauge."""
    tl = analysis.timeline
    t0, t1 = tl.trace_start_ns or 0, tl.trace_end_ns or 0
    s0, s1 = int(metrics["ts"].min()), int(metrics["ts"].max())  # type: ignore[arg-type]
    if clock_offset_ns is not None:
        return Alignment(clock_offset_ns, "assumed", "offset given with --clock-offset-ms")
    overlap = s0 <= t1 and s1 >= t0
    base = 0 if overlap else s0 - t0
    rows = metrics.filter(pl.col("family") == running)
    if rows.is_empty() or not levels_known(analysis):
        if not overlap:
            raise InputError(
                f"{where}: the server's clock cannot be aligned with the trace's: their "
                "spans do not overlap and there is no running gauge to match",
                hint="give --clock-offset-ms MS (server clock − trace clock)",
            )
        return Alignment(0, "assumed", "no running gauge to align on: one clock assumed")
    instants = np.unique(rows["ts"].to_numpy())
    gauge = gauge_at(metrics, running, instants)
    assert gauge is not None
    step = interval_of(instants)
    reach = max(t1 - t0, step)
    # At most ~4 M (candidate, scrape) pairs per pass: bounded memory on long scrapes.
    k = min(-(-reach // step), max(10, 2_000_000 // max(instants.size, 1)))
    coarse = base + np.arange(-k, k + 1, dtype=np.int64) * step
    errors = _mismatch(tl.transitions, instants, gauge, coarse, (t0, t1))
    best = int(coarse[int(np.argmin(errors))])
    fine_step = max(step // 100, 1)
    fine = best + np.arange(-100, 101, dtype=np.int64) * fine_step
    fine = np.unique(np.append(fine, base))
    errors = _mismatch(tl.transitions, instants, gauge, fine, (t0, t1))
    low = float(errors.min())
    at_base = float(errors[np.searchsorted(fine, base)])
    mean_level = float(np.nanmean(gauge)) if gauge.size else 0.0
    if not np.isfinite(low) or (not overlap and low > 0.5 * mean_level + 1):
        raise InputError(
            f"{where}: the server's clock cannot be aligned with the trace's: the running "
            f"gauge matches the trace's running count at no offset (best mean difference "
            f"{low:.3g} requests)",
            hint="give --clock-offset-ms MS (server clock − trace clock)",
        )
    if at_base <= low:
        if base == 0:
            return Alignment(0, "same_clock", "one clock: the running gauge matches at 0")
        return Alignment(base, "estimated", "offset of the spans' starts", fine_step)
    run = fine[errors == low]
    offset = int(run[run.size // 2])
    return Alignment(
        offset,
        "estimated",
        "estimated by matching the running gauge with the trace's running count",
        fine_step,
    )
