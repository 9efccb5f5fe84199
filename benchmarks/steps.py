"""What ``--steps`` costs: ``analyze`` with and without the engine's steps joined.

    nice -n 10 python benchmarks/steps.py [--requests 5000] [--rate 3] [--repeat 3]

The input is the simulator's own run (``servetrace simulate``'s engine, chunked prefill,
seeded): about 1.1e6 events and 1e5 steps with exact membership at the defaults, written
as Parquet. It times, in this process, ``servetrace.analyze(trace)`` and
``servetrace.analyze(trace, steps=steps)`` — the library calls ``analyze`` and
``analyze --steps`` make — best of ``--repeat`` runs each (after one warm-up), and prints
both, their ratio and the join's own phases (reading the steps, the gaps, the join and
attribution). The goal: at 1e7 events and 1e6 steps, ``--steps`` costs at most 1.5× the
plain analysis. At that size time the whole process, one job at a time (the memory a
run first touches is most of its cost): ``--requests 50000 --repeat 1 --keep DIR`` writes
the files, then ``/usr/bin/time -v servetrace analyze DIR/sim_50000_3.parquet [--steps
DIR/sim_50000_3_steps.parquet] --format json`` (benchmarks/HISTORY.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import polars as pl

import servetrace
from servetrace.sim.config import EngineConfig
from servetrace.sim.simulate import run_simulation
from servetrace.sim.steps_record import canonical_steps
from servetrace.sim.synthetic import synthetic_workload


def best_of(repeat: int, run: object) -> tuple[float, float]:
    """Best wall and best CPU seconds of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        run()  # type: ignore[operator]
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def phases(trace: Path, steps: Path) -> dict[str, float]:
    """Seconds of each part of ``--steps`` on top of the plain analysis (one run)."""
    from servetrace.analysis.dispatch import analyze_paths
    from servetrace.analysis.result import AnalysisOptions
    from servetrace.analysis.stall_findings import Running
    from servetrace.analysis.stalls import stall_analysis, tick_gaps
    from servetrace.sources.steps.formats import read_steps

    # As ``analyze(trace, steps=...)`` does: the in-memory engine keeps its sorted ticks.
    analysis = analyze_paths([str(trace)], options=AnalysisOptions(keep_ticks=True))
    out: dict[str, float] = {}
    start = time.perf_counter()
    gaps, ticks, codes = tick_gaps(analysis.timeline.ticks, analysis.per_request)
    out["gaps"] = time.perf_counter() - start
    start = time.perf_counter()
    step_file = read_steps(steps, "canonical", None)
    out["read steps"] = time.perf_counter() - start
    start = time.perf_counter()
    stall_analysis(
        gaps,
        ticks,
        codes,
        step_file,
        Running.of(
            analysis.timeline.transitions, analysis.per_request, analysis.timeline.has_admissions
        ),
        path=str(steps),
        fmt="canonical",
        tail_threshold_ns=None,
    )
    out["join + attribution + findings"] = time.perf_counter() - start
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--keep", type=Path, help="Keep the generated files in this folder (reused if there)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"sim_{args.requests}_{args.rate:g}"
        trace, steps = folder / f"{stem}.parquet", folder / f"{stem}_steps.parquet"
        if not (trace.is_file() and steps.is_file()):
            sim = run_simulation(
                synthetic_workload(args.requests, args.rate, seed=0),
                EngineConfig(policy="chunked", max_batch_tokens=2048, seed=0),
            )
            sim.events.write_parquet(trace)
            canonical_steps(sim).write_parquet(steps)
        events = pl.scan_parquet(trace).select(pl.len()).collect().item()
        step_rows = pl.scan_parquet(steps).select(pl.len()).collect().item()
        servetrace.analyze(trace, streaming=False, steps=steps)  # warm up imports, caches
        plain = best_of(args.repeat, lambda: servetrace.analyze(trace, streaming=False))
        joined = best_of(
            args.repeat, lambda: servetrace.analyze(trace, streaming=False, steps=steps)
        )
        parts = phases(trace, steps)
    print(f"{events:,} events, {step_rows:,} steps (best of {args.repeat})")
    print(f"analyze          {plain[0]:6.2f} s wall  {plain[1]:6.2f} s CPU")
    print(f"analyze --steps  {joined[0]:6.2f} s wall  {joined[1]:6.2f} s CPU")
    print(f"ratio            {joined[0] / plain[0]:6.2f}×      {joined[1] / plain[1]:6.2f}×")
    for name, seconds in parts.items():
        print(f"  {name:32s} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
