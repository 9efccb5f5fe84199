"""What would the suggested changes buy? Run `servetrace analyze` with them monkeypatched in.

    python benchmarks/whatif.py benchmarks/out/trace_1e7.parquet --repeat 3

The library is **not** modified: each variant runs `servetrace analyze TRACE --format json`
in a fresh process, after replacing a few functions of the imported modules at run time.
Every variant's JSON report must equal the unpatched one (otherwise the row is flagged),
so a speed-up here is a speed-up of an equivalent computation on this trace.

Patches (combine with commas; ``none`` is the code as it is):

* ``tick_lazy`` — ``lifecycle._tick_frame`` as one lazy query when the events are
  time-ordered: ``events.lazy().filter(ticks).select(4 columns).sort(_key, stable)
  .with_columns(gap)``. The eager version filters all 7 columns of the events before
  selecting 4 and sorts eagerly; the lazy plan pushes the projection down. Same fallback
  as now (3-key sort) for unsorted input or a first_token tied with an earlier token.

* ``describe`` — ``stats.describe`` (as imported by ``summary`` and ``formula``) computes
  count, mean, std and the linear-interpolation percentiles with Polars on the Int64
  column (multi-threaded, no Float64 copy) instead of numpy on a Float64 copy. Reports
  are compared number by number within 1e-9 relative or 1e-9 ms absolute (the last
  bits of a mean can differ between summation orders).
* ``jemalloc`` — no code change: the process runs with
  ``_RJEM_MALLOC_CONF=background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0``, so
  Polars' allocator (jemalloc) returns freed memory to the OS within ~100 ms instead of
  holding it (default decay ~10 s). The CLI could set this before Polars is imported.

Earlier patches (``tick_sort``: stable sort of time-ordered ticks by request; ``ids``:
request ids and row counts from control rows; ``gaps``: no ``request_id`` join onto every
gap) were adopted by the library in commit c276271; see README.md for their measured
effect before that commit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T_START = time.perf_counter()
HERE = Path(__file__).resolve().parent
PATCHES = ("tick_lazy", "describe", "jemalloc")
# Polars' bundled jemalloc reads this at start-up (prefix _RJEM_): return freed pages to
# the OS after ~100 ms (background thread) instead of keeping them for ~10 s.
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"


# ------------------------------------------------------------------------------ patches
def apply(patches: set[str]) -> None:
    import numpy as np
    import polars as pl

    if "tick_lazy" in patches:
        from servetrace.analysis import lifecycle
        from servetrace.analysis.lifecycle import KEY, TICK_EVENTS

        original_tick_frame = lifecycle.tick_frame

        def _tick_frame(events: pl.DataFrame) -> pl.DataFrame:
            # time-ordered events => time-ordered ticks: one lazy query, projection first
            if not events["ts"].is_sorted():
                return original_tick_frame(events)
            tokens = pl.col("tokens") if "tokens" in events.columns else pl.lit(1, pl.Int64)
            same = pl.col(KEY) == pl.col(KEY).shift(1)
            ticks = (
                events.lazy()
                .filter(pl.col("event").is_in(TICK_EVENTS))
                .select(
                    KEY,
                    "ts",
                    tokens.fill_null(1).cast(pl.Int64).alias("tokens"),
                    (pl.col("event") == "first_token").alias("is_first"),
                )
                .sort(KEY, maintain_order=True)
                .with_columns(pl.when(same).then(pl.col("ts").diff()).alias("gap_ns"))
                .collect()
            )
            misordered = ticks.select(
                (pl.col("is_first") & same & (pl.col("gap_ns") == 0)).any()
            ).item()
            return original_tick_frame(events) if misordered else ticks

        lifecycle.tick_frame = _tick_frame

    if "describe" in patches:
        import servetrace.stats.describe as stats
        from servetrace.analysis import formula, summary

        original = stats.describe
        names = [n for n in stats.STATISTICS if n not in ("count", "mean", "std")]
        qs = [stats.percentile_of(n) / 100 for n in names]

        def describe(values):
            if not isinstance(values, pl.Series) or not values.dtype.is_numeric():
                return original(values)
            series = values.drop_nulls()
            if series.dtype.is_float():
                series = series.filter(~series.is_nan())
            if series.len() == 0:
                return original(series)
            col = pl.col("x")
            row = (
                pl.DataFrame({"x": series.rechunk()})
                .select(
                    col.len().alias("count"),
                    col.cast(pl.Float64).mean().alias("mean"),
                    col.cast(pl.Float64).std(ddof=0).alias("std"),
                    *[
                        col.quantile(q, interpolation="linear").alias(n)
                        for n, q in zip(names, qs, strict=True)
                    ],
                )
                .row(0, named=True)
            )
            out = {k: (int(v) if k == "count" else float(v)) for k, v in row.items()}
            return {n: out[n] for n in stats.STATISTICS}

        stats.describe = describe
        summary.describe = describe
        formula.describe = describe
    del np


def child(patches: str, trace: str, result: str) -> None:
    import polars  # noqa: F401

    from servetrace.cli import main

    chosen = set() if patches == "none" else set(patches.split(","))
    apply(chosen)
    t0 = time.perf_counter()
    sys.argv = ["servetrace", "analyze", trace, "--format", "json"]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    sys.stdout.flush()
    t1 = time.perf_counter()
    with open(result, "w") as handle:
        json.dump(
            {
                "work_s": t1 - t0,
                "import_s": t0 - T_START,
                "exit_code": code,
                "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            },
            handle,
        )
    os._exit(0)


# ------------------------------------------------------------------------------- parent
def close(a, b, rel: float = 1e-9, abs_: float = 1e-9) -> bool:
    """Equal reports: numbers within ``rel`` relative or ``abs_`` absolute difference (the
    report's times are in ms; a mean of residuals that cancel to ~1e-13 ms is noise)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel, abs_) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel, abs_) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)
    return a == b


def run(variant: str, trace: str, quiet: float) -> tuple[dict, dict | None]:
    sys.path.insert(0, str(HERE))
    from bench_analyze import wait_for_quiet

    wait_for_quiet(0.25, quiet)
    with tempfile.TemporaryDirectory(prefix="servetrace-whatif-") as tmp:
        result, out = Path(tmp) / "r.json", Path(tmp) / "out.json"
        with open(out, "wb") as stdout:
            t0 = time.perf_counter()
            env = dict(os.environ)
            if "jemalloc" in variant.split(","):
                env["_RJEM_MALLOC_CONF"] = JEMALLOC_CONF
            proc = subprocess.Popen(
                [sys.executable, __file__, "--child", variant, trace, str(result)],
                stdout=stdout,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
        row = json.loads(result.read_text()) if result.exists() else {}
        row.update(
            {
                "variant": variant,
                "wall_s": wall,
                "peak_rss_kb": usage.ru_maxrss,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "returncode": os.waitstatus_to_exitcode(status),
            }
        )
        try:
            report = json.loads(out.read_text())
        except ValueError:
            report = None
        return row, report


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--variants",
        nargs="+",
        default=[
            "none",
            "tick_lazy",
            "describe",
            "jemalloc",
            "tick_lazy,describe",
            "tick_lazy,describe,jemalloc",
        ],
    )
    parser.add_argument("--quiet-wait", type=float, default=15.0)
    args = parser.parse_args()
    import pyarrow.parquet as pq

    n = pq.ParquetFile(args.trace).metadata.num_rows
    rows: dict[str, list[dict]] = {v: [] for v in args.variants}
    reports: dict[str, dict | None] = {}
    for r in range(args.repeat):
        order = args.variants[r % len(args.variants) :] + args.variants[: r % len(args.variants)]
        for variant in order:
            row, report = run(variant, args.trace, args.quiet_wait)
            rows[variant].append(row)
            reports.setdefault(variant, report)
            print(
                f"  repeat {r + 1}: {variant:20s} work {row.get('work_s', 0):6.2f} s  "
                f"cpu {row['cpu_s']:6.2f} s  peak {row['peak_rss_kb'] / 1024:6.0f} MB",
                file=sys.stderr,
                flush=True,
            )

    def same_as_base(report: dict | None) -> bool:
        base = reports.get("none")
        if report is None or base is None:
            return False
        strip = lambda d: {k: v for k, v in d.items() if k != "inputs"}  # noqa: E731
        return close(strip(report), strip(base))

    base = rows.get("none")
    base_work = statistics.median(r["work_s"] for r in base) if base else None
    base_peak = statistics.median(r["peak_rss_kb"] for r in base) if base else None
    lines = [
        f"## What-if on {args.trace} ({n:,} events), medians of {args.repeat}, fresh process each",
        "",
        "| variant | analyze s | CPU s (process) | peak RSS MB | B/event raw "
        "| vs none: time | vs none: peak | same report |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    summary = {}
    for variant, runs in rows.items():
        work = statistics.median(r["work_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        peak = statistics.median(r["peak_rss_kb"] for r in runs)
        same = same_as_base(reports[variant])
        summary[variant] = {
            "work_s": work,
            "cpu_s": cpu,
            "peak_rss_mb": peak / 1024,
            "bytes_per_event_raw": peak * 1024 / n,
            "same_report": same,
            "runs": runs,
        }
        lines.append(
            f"| {variant} | {work:.3f} | {cpu:.2f} | {peak / 1024:.0f} | {peak * 1024 / n:.0f} | "
            f"{work / base_work:.2f}× | {peak / base_peak:.2f}× | {same} |"
        )
    print("\n".join(lines))
    out = HERE / "out" / f"whatif_{Path(args.trace).stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"trace": args.trace, "events": n, "variants": summary}, indent=2))
    print(f"written {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
