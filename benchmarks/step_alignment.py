"""How often vLLM log steps aligned to a trace land on their true end, and how fast.

    python benchmarks/step_alignment.py [--replicas 8] [--steps 2000] [--seed 1]

Simulates ``--replicas`` data-parallel ranks each running ``--steps`` decode steps back to
back: durations drawn from 8–14 ms, 30–300 µs of scheduling between steps (which vLLM's
elapsed time does not count), the log rounding each duration to 10 µs and dating each
line to the second. The trace's ticks are the true step ends of all ranks together.
Prints the wall time of ``read_steps(..., "vllm-log", ticks)``, the alignment note and
the share of steps whose aligned end equals the true one, per rank. Not a test: the
figures in ``docs/reference.md`` (Engine step records) come from it.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl

from servetrace.sources.steps.formats import read_steps

NS = 1_000_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    start = int(datetime(2026, 2, 18, 16, 0, 0, tzinfo=timezone.utc).timestamp()) * NS
    lines, truth, ticks = [], [], []
    for replica in range(args.replicas):
        t = start + replica * 1_234_567
        for step in range(args.steps):
            t += rng.randint(30_000, 300_000)
            duration = rng.randint(8_000_000, 14_000_000)
            t += duration
            ticks.append(t)
            truth.append((str(replica), step, t))
            second = datetime.fromtimestamp((t + 100_000) // NS, tz=timezone.utc)
            lines.append(
                (
                    t,
                    f"(EngineCore_DP{replica} pid=1) INFO {second:%m-%d %H:%M:%S} [core.py:1] "
                    f"Iteration({step}): 0 context requests, 0 context tokens, 4 generation "
                    f"requests, 4 generation tokens, iteration elapsed time: "
                    f"{round(duration / 1e4) / 100:.2f} ms",
                )
            )
    lines.sort()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "vllm.log"
        path.write_text("\n".join(text for _, text in lines) + "\n", encoding="utf-8")
        tick_series = pl.Series(sorted(set(ticks)), dtype=pl.Int64)
        began = time.perf_counter()
        result = read_steps(path, "vllm-log", tick_series)
        wall = time.perf_counter() - began
    true = pl.DataFrame(truth, schema=["replica", "step", "true"], orient="row")
    joined = result.frame.join(true, on=["replica", "step"])
    exact = joined.group_by("replica").agg(exact=(pl.col("ts_end") == pl.col("true")).mean())
    print(f"{wall:.2f} s for {joined.height:,} steps")
    print(result.notes[-1])
    print(f"exact: {(joined['ts_end'] == joined['true']).mean():.4f}")
    print(exact.sort("replica"))


if __name__ == "__main__":
    main()
