"""What ``--by`` costs: one analysis with and without a 300-value group column.

    nice -n 10 python benchmarks/bench_by.py [--events 1e6] [--groups 300] [--repeat 3]

It generates a canonical trace with ``generate.py`` (seeded), adds a ``group`` column
(request_id mod G, so every group interleaves with every other over the whole span), and
times, in this process, ``servetrace.analyze(trace)`` and ``servetrace.analyze(trace,
by="group")`` — the library calls the CLI makes — best of ``--repeat`` runs each; then
the whole CLI, ``servetrace analyze TRACE [--by group]`` in fresh processes with the
default table read through a pipe (from bytecode, as an installed package runs: see
``startup.py``), best of ``--repeat`` after one warm-up run each.
The goal: ``--by`` with a handful of groups adds at most ~0.2 s at 1e6 events, and 300
groups cost at most 2× a plain analysis. The history of these figures is in
``benchmarks/HISTORY.md`` ("The --by figures of bench_by").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generate
from startup import checkout_env

import servetrace


def best_of(repeat: int, run: object) -> tuple[float, float]:
    """Best wall seconds and best CPU seconds (``time.process_time``: every thread of the
    process, the steadier figure on a shared machine, plus any child process's) of
    ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), _cpu()
        run()  # type: ignore[operator]
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu() - cpu)
    return min(walls), min(cpus)


def _cpu() -> float:
    children = os.times()
    return time.process_time() + children.children_user + children.children_system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=generate.parse_count, default=1_000_000)
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain.parquet"
        generate.main(["--events", str(args.events), "-o", str(plain), "--seed", "0"])
        grouped = Path(tmp) / "grouped.parquet"
        pl.read_parquet(plain).with_columns(
            (pl.col("request_id") % args.groups).alias("group")
        ).write_parquet(grouped)
        servetrace.analyze(grouped, streaming=False)  # warm up imports and caches
        without = best_of(args.repeat, lambda: servetrace.analyze(grouped, streaming=False))
        with_by = best_of(
            args.repeat, lambda: servetrace.analyze(grouped, by="group", streaming=False)
        )
        groups = len(servetrace.analyze(grouped, by="group", streaming=False).groups or {})
        cli = [sys.executable, "-m", "servetrace", "analyze", str(grouped)]
        _quiet(cli)  # writes the bytecode, warms the file cache
        _quiet([*cli, "--by", "group"])
        cli_without = best_of(args.repeat, lambda: _quiet(cli))
        cli_with = best_of(args.repeat, lambda: _quiet([*cli, "--by", "group"]))
    print(
        f"{args.events:,} events, {groups} groups: without --by {without[0]:.3f} s, "
        f"with --by {with_by[0]:.3f} s, ratio {with_by[0] / without[0]:.2f}x; CPU "
        f"{without[1]:.3f} s → {with_by[1]:.3f} s, {with_by[1] / without[1]:.2f}x, "
        f"--by adds {with_by[1] - without[1]:+.3f} CPU-s (load average {os.getloadavg()[0]:.1f})"
    )
    print(
        f"CLI (default table to a pipe, whole process): without --by {cli_without[0]:.3f} s, "
        f"with --by {cli_with[0]:.3f} s, ratio {cli_with[0] / cli_without[0]:.2f}x; CPU "
        f"{cli_without[1]:.3f} s → {cli_with[1]:.3f} s, {cli_with[1] / cli_without[1]:.2f}x"
    )
    return 0


def _quiet(command: list[str]) -> None:
    """A CLI run, its report read through a pipe as a user's pager or file would."""
    subprocess.run(command, check=True, stdout=subprocess.PIPE, env=checkout_env())


if __name__ == "__main__":
    raise SystemExit(main())
