"""Where does a difference come from? The decomposition delta and who gained or lost.

``decompose`` splits the e2e difference of paired requests into queue wait, prefill,
decode and delivery tail (means add up; medians do not, so a residual row says so);
``length_buckets`` shows the mean per-request deltas by prompt and output length
quartile; ``tradeoff`` finds what the candidate traded (TTFT against ITL). Every time is
in ns (Float64: means of whole ns); the renderer converts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from servetrace.comparison.measure import Measured

DECOMPOSITION_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("queue_wait", "queue_wait_ns"),
    ("prefill", "prefill_ns"),
    ("decode", "decode_ns"),
    ("delivery_tail", "delivery_tail_ns"),
)


# --------------------------------------------------------------------------- decomposition
def _ns(frame: pl.DataFrame, column: str, how: str) -> float | None:
    if frame.height == 0:
        return None
    series = frame.get_column(column).cast(pl.Float64)
    value = series.mean() if how == "mean" else series.median()
    return None if value is None else float(value)  # type: ignore[arg-type]


def decompose(base: pl.DataFrame, cand: pl.DataFrame) -> pl.DataFrame:
    """Where the end-to-end difference comes from: per component, mean and p50 (ns).

    For every completed request ``e2e = queue_wait + prefill + decode + delivery_tail``,
    so the mean deltas add up to the e2e delta (``share`` is each part of it); medians do
    not add, and the ``residual`` row says by how much they miss.
    """
    records: list[dict[str, Any]] = []
    components = DECOMPOSITION_COMPONENTS
    if _ns(base, "queue_wait_ns", "mean") is None and _ns(cand, "queue_wait_ns", "mean") is None:
        # Client-side traces see no admission: their e2e splits into ttft + decode + tail.
        components = (("ttft", "ttft_ns"), *DECOMPOSITION_COMPONENTS[2:])
    parts = list(components)
    total_b, total_c = _ns(base, "e2e_ns", "mean"), _ns(cand, "e2e_ns", "mean")
    total_delta = None if total_b is None or total_c is None else total_c - total_b

    def record(
        name: str, mb: float | None, mc: float | None, pb: float | None, pc: float | None
    ) -> dict[str, Any]:
        delta = None if mb is None or mc is None else mc - mb
        return {
            "component": name,
            "baseline_mean_ns": mb,
            "candidate_mean_ns": mc,
            "delta_mean_ns": delta,
            "share": (delta / total_delta if delta is not None and total_delta else None),
            "baseline_p50_ns": pb,
            "candidate_p50_ns": pc,
            "delta_p50_ns": None if pb is None or pc is None else pc - pb,
        }

    sums = [0.0, 0.0, 0.0, 0.0]
    known = [True, True, True, True]
    for name, column in parts:
        values = (
            _ns(base, column, "mean"),
            _ns(cand, column, "mean"),
            _ns(base, column, "p50"),
            _ns(cand, column, "p50"),
        )
        records.append(record(name, *values))
        for i, value in enumerate(values):
            if value is None:
                known[i] = False
            else:
                sums[i] += value
    totals = (total_b, total_c, _ns(base, "e2e_ns", "p50"), _ns(cand, "e2e_ns", "p50"))
    # Inputs are whole nanoseconds: a residual under a nanosecond is float noise.
    residual = [
        None if t is None or not k else (0.0 if abs(t - s) < 1.0 else t - s)
        for t, s, k in zip(totals, sums, known, strict=True)
    ]
    records.append(record("residual", *residual))
    records.append(record("e2e", *totals))
    schema = {
        "component": pl.String,
        **{
            name: pl.Float64
            for name in (
                "baseline_mean_ns",
                "candidate_mean_ns",
                "delta_mean_ns",
                "share",
                "baseline_p50_ns",
                "candidate_p50_ns",
                "delta_p50_ns",
            )
        },
    }
    return pl.DataFrame(records, schema=schema)


def _length_labels(lengths: np.ndarray, quartiles: int = 4) -> np.ndarray:
    """Bucket number of each length: quantile edges of the known lengths."""
    known = lengths[~np.isnan(lengths)]
    edges = np.unique(np.quantile(known, np.linspace(0, 1, quartiles + 1)[1:-1]))
    out = np.searchsorted(edges, lengths, side="left").astype(np.float64)
    out[np.isnan(lengths)] = np.nan
    return out


def length_buckets(base: pl.DataFrame, cand: pl.DataFrame) -> pl.DataFrame:
    """Paired requests grouped by baseline prompt/output length quartile, mean deltas (ns).

    Which requests gained or lost: ``delta_*_ns`` are means of ``candidate - baseline``
    over the bucket's requests; ``faster_fraction`` is the share whose e2e improved.
    """
    deltas: dict[str, pl.Series] = {}
    for name, column in (
        ("ttft", "ttft_ns"),
        ("itl", "itl_mean_ns"),
        ("tpot", "tpot_ns"),
        ("e2e", "e2e_ns"),
    ):
        deltas[f"delta_{name}_ns"] = cand.get_column(column).cast(pl.Float64) - base.get_column(
            column
        ).cast(pl.Float64)
    frames: list[pl.DataFrame] = []
    for dimension in ("prompt_tokens", "output_tokens"):
        lengths = base.get_column(dimension).cast(pl.Float64).fill_null(np.nan).to_numpy()
        if base.height == 0 or np.isnan(lengths).all():
            continue
        frame = (
            pl.DataFrame(
                {
                    "length": lengths,
                    "bucket": _length_labels(lengths),
                    **deltas,
                }
            )
            .fill_nan(None)
            .drop_nulls("bucket")
        )
        # Summed in sorted order: a mean split across threads changes its last digit
        # from run to run, and a comparison's JSON must be the same every time.
        aggs = [pl.col(name).sort().mean() for name in deltas]
        aggs.append((pl.col("delta_e2e_ns") < 0).mean().alias("faster_fraction"))
        grouped = (
            frame.group_by("bucket")
            .agg(
                pl.len().alias("requests"),
                pl.col("length").min().alias("lo"),
                pl.col("length").max().alias("hi"),
                *aggs,
            )
            .sort("bucket")
            .with_columns(
                dimension=pl.lit(dimension),
                lo=pl.col("lo").cast(pl.Int64),
                hi=pl.col("hi").cast(pl.Int64),
                requests=pl.col("requests").cast(pl.Int64),
            )
            .with_columns(
                bucket=pl.when(pl.col("lo") == pl.col("hi"))
                .then(pl.col("lo").cast(pl.String))
                .otherwise(pl.format("{}-{}", pl.col("lo"), pl.col("hi")))
            )
        )
        columns = ("dimension", "bucket", "lo", "hi", "requests", *deltas, "faster_fraction")
        frames.append(grouped.select(columns))
    if not frames:
        return pl.DataFrame(
            schema={
                "dimension": pl.String,
                "bucket": pl.String,
                "lo": pl.Int64,
                "hi": pl.Int64,
                "requests": pl.Int64,
            }
        )
    return pl.concat(frames, how="diagonal_relaxed")


# --------------------------------------------------------------------------- trade-off
@dataclass(frozen=True)
class Tradeoff:
    """The candidate got worse on ``lost`` and better on ``gained`` (both significant);
    ``*_ns`` are the absolute deltas of those statistics."""

    lost: Measured
    lost_ns: float
    gained: Measured
    gained_ns: float


def _delta_ns(row: Measured) -> float | None:
    if row.ci.baseline is None or row.ci.candidate is None:
        return None
    return row.ci.candidate - row.ci.baseline


def tradeoff(measured: Sequence[Measured]) -> Tradeoff | None:
    """When TTFT moves one way and ITL (TPOT when ITL was not compared) the other, both
    significantly: the largest such move of each, by absolute delta."""

    def moves(metric: str) -> list[tuple[str, float, Measured]]:
        out: list[tuple[str, float, Measured]] = []
        for m in measured:
            delta = _delta_ns(m)
            if m.spec.name == metric and m.change.significant and delta is not None:
                out.append((m.change.verdict, abs(delta), m))
        return out

    ttft = moves("ttft")
    stream = moves("itl") or moves("tpot")
    for worse_side, better_side in ((ttft, stream), (stream, ttft)):
        worse = [x for x in worse_side if x[0] == "slower"]
        better = [x for x in better_side if x[0] == "faster"]
        if worse and better:
            _, lost, w = max(worse, key=lambda x: x[1])
            _, gained, b = max(better, key=lambda x: x[1])
            return Tradeoff(w, lost, b, gained)
    return None
