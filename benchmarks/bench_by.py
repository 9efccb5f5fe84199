"""What ``--by`` costs: one analysis with and without a 300-value group column.

    nice -n 10 python benchmarks/bench_by.py [--events 1e6] [--groups 300] [--repeat 3]

It generates a canonical trace with ``generate.py`` (seeded), adds a ``group`` column
(request_id mod G, so every group interleaves with every other over the whole span), and
times, in this process, ``servetrace.analyze(trace)`` and ``servetrace.analyze(trace,
by="group")`` — the library calls the CLI makes — best of ``--repeat`` runs each; then
the whole CLI, ``servetrace analyze TRACE [--by group]`` in fresh processes with the
default table read through a pipe (from bytecode, as an installed package runs: see
``startup.py``), best of ``--repeat`` after one warm-up run each.
Issue 7 asks for ≤ ~1.5× the analysis without ``--by`` at 300 groups. History at
1e6 events, 300 groups (a shared 2-core machine, so read ranges, not digits):

- a filter per group: 5.1× (7.4 s against 1.45 s);
- one ``group_by`` per figure, but Kaplan–Meier, percentile intervals, float moments,
  errored reports and goodput still per group: 0.23 s → 1.6–2.3 s (7–8×; CPU 0.23 →
  1.6–1.75 s);
- every group at once (one sort of each metric by (group, value) for describe and
  intervals, one grouped Kaplan–Meier per metric, the binomial ranks of every group
  size in one call per percentile, goodput in one ``group_by``): 0.22–0.27 s → 0.42–0.57 s,
  1.6–2.3× best of 3 (typically ~1.85×); CPU seconds (``time.process_time``) 0.23–0.25 →
  0.47–0.49 (~2.0×). The rest above 1.5×: the exact binomial tails behind the ITL
  intervals of 300 different group sizes (~0.07 CPU-s, ~2000 pmf terms per size, so
  O(Σ_g √n_g) against O(√n) for the trace), and assembling 300 reports in Python;
- s17 (same machine, load average 4–7, best of 5): the ranks from short verified tail
  sums (``stats.binomial_ranks``: 55.6 → 6.4 ms for the 238 ITL sizes), the cyclic GC
  paused while the groups are assembled (~60 ms of collections that freed nothing), the
  per-request samples from one select, the gaps' groups looked up in NumPy instead of a
  join, float moments from the sorted sample, each group's Summary built once: at 1e6
  the ``--by`` overhead went from ~0.18 to ~0.11 CPU-s — CPU 0.14 s → 0.24–0.26 s,
  1.75–1.94× (wall 1.74–1.93×; main measured alongside: 2.15–2.18×, wall 1.95–2.32×);
  at 1e7 CPU 1.59 s → 2.60 s, 1.64× (main alongside 1.66 → 2.96 s, 1.79×; wall is
  noisy at this load: 1.5–2.1×). Still above 1.5×, measured per part at 1e6 (CPU ms
  of the ~110): formula per group 22, Kaplan–Meier 15, intervals 17 (ranks 11), the
  gaps' sort by (group, value) 14–18, describe of 13 columns 12, concurrency 7, and
  ~140 small Polars queries (~0.3 ms each, thread-pool wake-ups included); at 1e7 the
  one sort of 9.7 M gaps by (group, value) (75 ms of np.sort alone, 150–310 ms with its
  keys and temporaries) and concurrency (90 ms).
- s18 (shared machine, load average 3.3–4.3 throughout — not quiet; main at the session's
  start measured alongside, alternated): every sample sorted by one packed int64 key
  ``code << bits | (v − min)`` in its own memory (the gaps' codes looked up pre-shifted,
  so the 10^7-gap lookup is the key; group bounds by binary search, values back by a
  mask; two stable sorts, codes by 16-bit radix, when the values do not fit), and flat
  NumPy arrays instead of Polars queries for the formula check, Kaplan–Meier (running
  products stacked by run length), concurrency, and the cancelled / in-flight / errored
  reports (counts, examples, times), each tested against the Polars statement it
  replaces. Reports byte-identical (104 JSON reports: sample traces, Vidur with
  ``--by policy``, generated 1e6 plain / dictionary ``event`` / string ids / null
  groups, streamed and in memory, plus request-ordered and sparse-id traces).
  At 1e6 (best of 9, three pairs): main adds +0.122 to +0.130 CPU-s (CPU 0.151–0.171
  → 0.272–0.299 s, 1.75–1.81×); s18 adds +0.076 to +0.118 CPU-s (0.147–0.173 →
  0.246–0.267 s, 1.44–1.79×; wall 1.44–1.80×). ``memory.summarize_by`` alone (best of
  15): 118–119 ms → 90 ms (118 in one noisy run). At 1e7 (best of 5, two pairs): main
  adds +0.563 / +0.718 CPU-s (1.661–1.671 → 2.225–2.389 s, 1.34–1.43×); s18 adds
  +0.361 / +0.327 CPU-s (1.480–1.768 → 1.841–2.095 s, 1.19–1.24×; wall 1.18–1.35×).
  Per part at 1e6 now (CPU ms of the ~90): intervals 16 (ranks 10), the gaps' sort and
  ITL describe 12, describe of the per-request columns 11, formula 10 (was 22),
  Kaplan–Meier 7 (15), concurrency 3 (7), the rest ~30 (a few dozen small queries and
  building 300 reports in Python); at 1e7: the gaps 110–150 (np.sort of 9.7 M keys
  ~70), formula 33 (60), describe 30, concurrency 20–30 (70–76), intervals 25,
  Kaplan–Meier 18 (53). Not yet ≤ 1.5× at 1e6 on every run.
- s18 merged with the packed tick sort (load 1.3–2.3): the analysis without ``--by`` is
  faster (1e6: 0.16–0.17 → 0.13 CPU-s), so the same cost is a larger ratio. 1e6 (best of
  7, four runs): 0.130 → 0.211–0.268 CPU-s, 1.62–1.98×, ``--by`` adds 0.08–0.13 CPU-s;
  1e7 (best of 3): 1.339 → 1.863 CPU-s, 1.39×, adds 0.52 CPU-s.
- s19 (load 1.1–1.6; the session's start, ``fa42163``, alternated with it): the worst
  rows gathered eagerly (a lazy query with a literal Series: 5–10 ms per call), narrow
  binomial windows in one block and shorter verified tail sums (ranks 13.6 → 8.9 ms),
  reused buffers for the ITL sums, every describe dict as one dict display, a dozen
  query groups merged into single selects (censoring, outcomes, samples, formula),
  spans, windows and concurrency sums over flat arrays, and what ``paused`` built sent
  straight to the oldest GC generation (the next young collection walked ~50 k
  containers: ~8 ms). 1e6, best of 7, eight alternated pairs: start adds 0.144–0.172
  CPU-s (1.57–1.74×), s19 0.100–0.118 (one run 0.140; 1.45–1.62×); split in one
  process (best of 7): ``summarize_by`` 144–150 → 93–94 ms, the GC walk after it
  8–9 → 0.7 ms, freeing the 300 reports ~8 ms either way: ``--by`` adds 166–168 →
  102–110 ms. Left per part (CPU ms of the ~93): ITL ranks and intervals 15, the gaps'
  sort 7 and ITL describe 4, formula 11 (worst rows 6), per-request describe 7,
  Kaplan–Meier and censoring 7, the rest a few dozen queries and 300 reports' dicts.
- s20 (load 0.5–1.0; f9e95cd, s18's end, alternated with it, best of 5, two runs each):
  the CLI, timed here for the first time (from bytecode, as an installed package runs),
  told a different story from the library: with the default table ``--by`` took
  3.79–3.80× the run without it (0.68 → 2.60 s), because rich's ``Table`` spent ~6 ms
  laying out each of the 301 metric tables. ``render/grid.py`` draws a table that fits
  in one pass (whole lines as one segment when no style reaches the output; 0.6 ms per
  group with its other lines): 1.39–1.42× (0.63–0.64 → 0.90 s). The library call, with
  each group's gaps sorted in a second thread beside the per-request figures, went from
  1.49–1.66× wall (1.49–1.61× CPU; ``--by`` adding 0.133–0.172 CPU-s) to 1.49× wall and
  1.49–1.50× CPU (adding 0.105–0.106 CPU-s). At 1e7: 1.25× (library), 1.27× (CLI).
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
