"""``analyze`` in memory against ``pl.read_parquet`` of the same file, in ONE process and run.

    python benchmarks/read_ratio.py TRACE [TRACE...] [--repeat 5] [--streaming]

For each trace, alternately: ``pl.read_parquet(TRACE)``, the in-memory analysis
(``analysis.dispatch.analyze_paths``, what ``servetrace analyze --no-streaming`` runs, up
to the report dict) and the *skeleton* below, ``--repeat`` times each. Prints the minimum
wall time and the minimum CPU time (user + system of all threads, ``time.process_time``)
of each, their ratios to the read and the load average.

The skeleton is the part of an exact analysis no choice of Polars or NumPy calls has
undercut (``docs/scale.md``): the read, the ``event`` column cast to the kinds, the
ticks packed and sorted by (request, time), and the pooled gaps sorted for their
percentiles. Its ratio to the read is the floor of the analysis' ratio on that machine.

On a shared machine wall time measures the neighbours as much as the code: CPU time is
the steadier figure, the ratio of the two walls the fairer one. Not a test: it times a
machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import polars as pl

from servetrace.analysis.dispatch import analyze_paths
from servetrace.dtypes import EVENT_DTYPE
from servetrace.render.summary import report_dict
from servetrace.schema import TICK_EVENTS


def _report(trace: str, streaming: bool) -> dict:
    analysis = analyze_paths([trace], streaming=streaming)
    return report_dict(analysis.summary, analysis.inputs)


def _skeleton(trace: str) -> None:
    """Read, cast the kinds, sort the packed ticks, sort their gaps (module docstring)."""
    frame = pl.read_parquet(trace).with_columns(pl.col("event").cast(EVENT_DTYPE))
    rid, ts = pl.col("request_id"), pl.col("ts")
    packed = (
        frame.lazy()
        .filter(pl.col("event").is_in(TICK_EVENTS))
        .select(((rid - rid.min()) * (1 << 40) + (ts - ts.min())).alias("p"))
        .collect()
        .to_series()
        .rechunk()
    )
    ordered = np.sort(packed.to_numpy())
    gaps = np.diff(ordered & ((1 << 40) - 1))
    np.sort(gaps[gaps >= 0])


def _timed(work) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--streaming", action="store_true", help="the batched engine instead")
    args = parser.parse_args()
    print(
        "| trace | event column | pl.read_parquet wall / CPU s | analyze wall / CPU s "
        "| × read (wall) | × read (CPU) | skeleton × read (wall / CPU) | load avg |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for trace in args.traces:
        kind = pl.read_parquet_schema(trace)["event"]
        reads, runs, skeletons = [], [], []
        for _ in range(args.repeat):
            reads.append(_timed(lambda t=trace: pl.read_parquet(t)))
            runs.append(_timed(lambda t=trace: _report(t, args.streaming)))
            skeletons.append(_timed(lambda t=trace: _skeleton(t)))
        rw, rc = min(r[0] for r in reads), min(r[1] for r in reads)
        aw, ac = min(r[0] for r in runs), min(r[1] for r in runs)
        sw, sc = min(r[0] for r in skeletons), min(r[1] for r in skeletons)
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"| {Path(trace).name} | {kind} | {rw:.3f} / {rc:.3f} | {aw:.3f} / {ac:.3f} "
            f"| {aw / rw:.2f} | {ac / rc:.2f} | {sw / rw:.2f} / {sc / rc:.2f} | {load} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
