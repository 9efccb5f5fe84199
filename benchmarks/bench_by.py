"""What ``--by`` costs: one analysis with and without a 300-value group column.

    nice -n 10 python benchmarks/bench_by.py [--events 1e6] [--groups 300] [--repeat 3]

It generates a canonical trace with ``generate.py`` (seeded), adds a ``group`` column
(request_id mod G, so every group interleaves with every other over the whole span), and
times, in this process, ``servetrace.analyze(trace)`` and ``servetrace.analyze(trace,
by="group")`` — the library calls the CLI makes — best of ``--repeat`` runs each.
Issue 7 asks for ≤ ~1.5× the analysis without ``--by`` at 300 groups; before the
one-partition ``summarize_by`` it was 5.1× (7.4 s against 1.45 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import generate

import servetrace


def best_of(repeat: int, run: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


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
    print(
        f"{args.events:,} events, {groups} groups: without --by {without:.2f} s, "
        f"with --by {with_by:.2f} s, ratio {with_by / without:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
