"""The numbers behind the charts: CDFs, series over time, slowest requests, residuals.

Everything here is a Polars frame of integer ns (or plain counts and rates) computed from
what the core already holds (the per-request frame, the gaps, the concurrency transitions,
the summary), vectorised; conversion to ms and to words happens in ``charts``/``report``.
Large traces are thinned for the point layers deterministically (every k-th request in
arrival order), and the thinning is returned so the page can say so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from servetrace.analysis.lifecycle import KEY
from servetrace.analysis.result import Analysis
from servetrace.render.slices import (
    bin_index,
    bin_width,
    boundaries,
    counter_series,
    phase_slices,
    requeued_slices,
)
from servetrace.schema import TICK_EVENTS

CDF_METRICS = ("ttft", "tpot", "itl", "e2e")
CDF_POINTS = 250
TIME_BINS = 200
MAX_POINTS = 2_400
SLOWEST = 25
NICE_BINS_NS = [m * 10**e for e in range(6, 13) for m in (1, 2, 5)]


def metric_values(analysis: Analysis, metric: str) -> pl.Series:
    """Values the summary describes: completed requests (ITL: every pooled gap)."""
    if metric == "itl":
        return analysis.gaps["itl_ns"].cast(pl.Float64)
    completed = analysis.per_request.filter(pl.col("outcome") == "completed")
    return completed[f"{metric}_ns"].cast(pl.Float64).drop_nulls()


def cdf(values: pl.Series, points: int = CDF_POINTS) -> pl.DataFrame:
    """At most ``points`` steps of the empirical CDF (always the min and the max):
    ``value_ns`` and ``fraction`` = share of values ≤ it. Non-positive values (which a log
    axis cannot show) are left out of the curve, not of the fractions."""
    ordered = values.sort()
    n = ordered.len()
    if n == 0:
        return pl.DataFrame(schema={"value_ns": pl.Float64, "fraction": pl.Float64})
    ranks = np.unique(np.linspace(0, n - 1, min(points, n)).round().astype(np.int64))
    frame = pl.DataFrame({"value_ns": ordered.gather(ranks), "fraction": (ranks + 1) / n})
    return frame.filter(pl.col("value_ns") > 0)


def cdf_parts(
    analysis: Analysis, metric: str, by: str, name: str, stats: tuple[str, ...]
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The CDF of ``metric`` and its percentile marks (label, ``value_ns``), both with the
    column ``by`` = ``name`` (what the legend calls them); None without values."""
    values = metric_values(analysis, metric)
    if values.len() == 0:
        return None
    curve = cdf(values).with_columns(pl.lit(name).alias(by))
    p = analysis.summary.metrics[metric]
    marks = {by: [name] * len(stats), "label": list(stats)}
    return curve, pl.DataFrame({**marks, "value_ns": [float(p[s] or 0) for s in stats]})


def time_bin_ns(span_ns: int, bins: int = TIME_BINS) -> int:
    """The smallest 1-2-5 bin (≥ 1 ms) giving at most ``bins`` bins over the span."""
    return next((b for b in NICE_BINS_NS if span_ns / b <= bins), NICE_BINS_NS[-1])


@dataclass(frozen=True)
class OverTime:
    """Series over the trace, in bins of ``bin_ns`` from ``origin_ns``."""

    bin_ns: int
    origin_ns: int
    rates: pl.DataFrame  # t_ns, arrivals_per_s, output_tokens_per_s (null: no tick data)
    levels: pl.DataFrame  # t_ns, series (queued/running/in_system), peak


def over_time(analysis: Analysis, events: pl.DataFrame | pl.LazyFrame | None) -> OverTime:
    """Arrivals/s, output tokens/s and the peak queued/running/in-system level per bin."""
    origin = analysis.timeline.trace_start_ns or 0
    end = analysis.timeline.trace_end_ns or origin
    span = max(end - origin, 1)
    step = time_bin_ns(span)
    n_bins = -(-span // step)
    bins = pl.DataFrame({"bin": pl.arange(0, n_bins, eager=True).cast(pl.Int64)})

    def per_bin(frame: pl.DataFrame, ts: str, total: pl.Expr, name: str) -> pl.DataFrame:
        # ``total`` is already an aggregation (a literal would not broadcast over a group).
        return frame.group_by(bin_index(pl.col(ts), origin, step, n_bins)).agg(total.alias(name))

    arrivals = per_bin(analysis.per_request, "arrival_ns", pl.len(), "arrivals")
    rates = bins.join(arrivals, on="bin", how="left")
    per_s = 1e9 / bin_width(step, span)  # the last bin is cut short by the trace's end
    if events is not None:
        # Lazily, so a trace scanned from disk is reduced to bins without being held.
        lazy = events.lazy()
        valid = analysis.per_request.lazy().select(pl.col("request_id").cast(pl.String))
        has_tokens = "tokens" in lazy.collect_schema().names()
        tokens = pl.col("tokens").fill_null(1).sum() if has_tokens else pl.len()
        ticks = (
            lazy.filter(pl.col("event").is_in(TICK_EVENTS))
            .with_columns(pl.col("request_id").cast(pl.String))
            .join(valid, on="request_id", how="semi")
            .group_by(bin_index(pl.col("ts"), origin, step, n_bins))
            .agg(tokens.alias("tokens"))
            .collect()
        )
        rates = rates.join(ticks, on="bin", how="left")
        token_rate = pl.col("tokens").fill_null(0) * per_s
    else:
        token_rate = pl.lit(None, pl.Float64)
    rates = rates.select(
        (pl.col("bin") * step + origin).alias("t_ns"),
        (pl.col("arrivals").fill_null(0) * per_s).alias("arrivals_per_s"),
        token_rate.alias("output_tokens_per_s"),
    )
    levels = counter_series(analysis).with_columns(bin_index(pl.col("ts"), origin, step, n_bins))
    # The level holds between changes: a bin without a change keeps the previous level.
    grid = bins.join(pl.DataFrame({"name": ["queued", "running", "in_system"]}), how="cross")
    peaks = levels.group_by("bin", "name").agg(pl.col("value").max().alias("peak"))
    last = levels.group_by("bin", "name").agg(pl.col("value").last().alias("last"))
    levels_out = (
        grid.join(peaks, on=["bin", "name"], how="left")
        .join(last, on=["bin", "name"], how="left")
        .sort("name", "bin")
        .with_columns(pl.col("last").forward_fill().over("name").fill_null(0))
        .select(
            (pl.col("bin") * step + origin).alias("t_ns"),
            pl.col("name").alias("series"),
            pl.coalesce("peak", "last").alias("peak"),
        )
    )
    return OverTime(step, origin, rates, levels_out)


def rolling_window(n: int) -> int:
    """Requests per rolling window: enough for a stable p99, short enough to show bursts."""
    return max(25, n // 40)


@dataclass(frozen=True)
class RequestPoints:
    """Per-request TTFT and e2e by arrival, and their rolling p50/p99."""

    points: pl.DataFrame  # arrival_ns, request_id, metric, value_ns (sampled)
    rolling: pl.DataFrame  # arrival_ns, metric, quantile (p50/p99), value_ns
    total: int
    shown: int
    window: int


def sample_every(frame: pl.DataFrame, limit: int) -> pl.DataFrame:
    """Every k-th row (deterministic) so that at most ``limit`` remain."""
    if frame.height <= limit:
        return frame
    k = -(-frame.height // limit)
    return frame.gather_every(k)


def request_points(analysis: Analysis, limit: int = MAX_POINTS) -> RequestPoints:
    done = analysis.per_request.filter(pl.col("outcome") == "completed").sort("arrival_ns")
    window = rolling_window(done.height)
    long = done.select(
        "arrival_ns", pl.col("request_id").cast(pl.String), "ttft_ns", "e2e_ns"
    ).unpivot(index=["arrival_ns", "request_id"], variable_name="metric", value_name="value_ns")
    long = long.with_columns(pl.col("metric").str.strip_suffix("_ns")).drop_nulls("value_ns")
    value = pl.col("value_ns").cast(pl.Float64)
    rolling = (
        long.sort("metric", "arrival_ns")
        .with_columns(
            value.rolling_quantile(0.5, "linear", window_size=window, min_samples=window)
            .over("metric")
            .alias("p50"),
            value.rolling_quantile(0.99, "linear", window_size=window, min_samples=window)
            .over("metric")
            .alias("p99"),
        )
        .drop_nulls("p50")
    )
    rolling = (
        pl.concat(
            sample_every(part, 400) for part in rolling.partition_by("metric", maintain_order=True)
        )
        if rolling.height
        else rolling
    )
    rolling_long = rolling.select("arrival_ns", "metric", "p50", "p99").unpivot(
        index=["arrival_ns", "metric"], variable_name="quantile", value_name="value_ns"
    )
    shown = sample_every(done, limit // 2)
    points = long.join(shown.select(pl.col("request_id").cast(pl.String)), on="request_id")
    return RequestPoints(points, rolling_long, done.height, shown.height, window)


def slowest_requests(
    analysis: Analysis, events: pl.DataFrame | pl.LazyFrame | None, n: int = SLOWEST
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ``n`` finished requests with the longest e2e, and their lifecycle slices
    (``request_id``, ``phase``, ``lo``/``hi`` ns from arrival; ``requeued`` included)."""
    trace_end = analysis.timeline.trace_end_ns or 0
    chosen = (
        analysis.per_request.filter(pl.col("e2e_ns").is_not_null())
        .sort("e2e_ns", "request_id", descending=[True, False])
        .head(n)
        .select(
            KEY,
            pl.col("request_id").cast(pl.String),
            "outcome",
            "cancelled_in",
            "e2e_ns",
            "preemptions",
            *boundaries(trace_end),
        )
    )
    phases = phase_slices(chosen, analysis.timeline.has_admissions).rename({"name": "phase"})
    if events is not None:
        ids = chosen["request_id"].implode()
        control = (
            events.lazy()
            .filter(~pl.col("event").is_in(TICK_EVENTS))
            .with_columns(pl.col("request_id").cast(pl.String))
            .filter(pl.col("request_id").is_in(ids))
            .select("request_id", "event", "ts")
            .collect()
        )
        requeued = requeued_slices(
            control, chosen.select(KEY, "request_id"), trace_end
        ).with_columns(pl.lit("requeued").alias("phase"))
        phases = pl.concat([phases, requeued.select(KEY, "phase", "lo", "hi")])
    slices = phases.join(
        chosen.select(KEY, "request_id", "start", "e2e_ns"), on=KEY, maintain_order="left"
    ).select(
        "request_id",
        "phase",
        (pl.col("lo") - pl.col("start")).alias("from_ns"),
        (pl.col("hi") - pl.col("start")).alias("to_ns"),
        "e2e_ns",
    )
    return chosen.drop(KEY), slices


def formula_points(analysis: Analysis, limit: int = MAX_POINTS) -> tuple[pl.DataFrame, int]:
    """Per completed request: response and formula residual (ns), within tolerance or not."""
    tol = analysis.summary.formula
    done = analysis.per_request.filter(
        (pl.col("outcome") == "completed") & pl.col("formula_residual_ns").is_not_null()
    )
    frame = done.sort("arrival_ns").select(
        pl.col("request_id").cast(pl.String),
        "response_ns",
        "formula_residual_ns",
        (
            pl.col("formula_residual_ns").abs()
            <= pl.max_horizontal(pl.lit(float(tol.abs_tol_ns)), pl.col("response_ns") * tol.rel_tol)
        ).alias("within"),
    )
    # Every request that breaks the formula is kept; the ones within it (all near zero)
    # are thinned harder than other scatters.
    broken = frame.filter(~pl.col("within"))
    kept = sample_every(frame.filter(pl.col("within")), max(limit // 3 - broken.height, 100))
    return pl.concat([kept, broken]), frame.height
