"""What a page of memory costs this machine the first time a process touches it.

    python benchmarks/fresh_memory.py [--arrays 16] [--mb 80]

Allocates ``--arrays`` NumPy arrays of ``--mb`` MB one after the other, keeping them all,
and prints for each the wall time, the user and system CPU and the page faults of filling
it (``np.ones``). Then frees them and fills the same number again, reusing what the
process already holds where the allocator lets it. Not a test: it reads the machine.

Why it matters here: this project's VM (Firecracker, nested virtualisation) runs Linux
with *free page reporting* (``page_reporting.page_reporting_order=11`` on its kernel
command line): free blocks of 8 MB are handed back to the host, and the next touch of
such a page costs the host a fault of its own. On 2026-12-02 the first ~300 MB a process
took were cheap (pages freed moments earlier, not yet reported: 17–22 ms per 80 MB) and
every 80 MB after that cost ≈ 210 ms of system time (≈ 2.6 s per GB, ten times a bare
machine's cost of zeroing pages). So on this VM a figure measured in a fresh process
(the CLI) moves with how much fresh memory it touches and with what ran just before it,
and a figure measured in a loop within one process depends on whether the allocator
keeps freed memory (Polars' jemalloc does for seconds; glibc returns every NumPy array
above 32 MB to the kernel). ``docs/scale.md`` says what this means for the measurements.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def _filled(mb: int) -> tuple[np.ndarray, str]:
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    array = np.ones(mb * 1_000_000 // 8, dtype=np.int64)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return array, (
        f"{wall * 1e3:7.1f} ms  user {(after.ru_utime - before.ru_utime) * 1e3:5.0f} ms  "
        f"sys {(after.ru_stime - before.ru_stime) * 1e3:5.0f} ms  "
        f"faults {after.ru_minflt - before.ru_minflt:6d}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arrays", type=int, default=16)
    parser.add_argument("--mb", type=int, default=80)
    args = parser.parse_args()
    for phase in ("fresh (all kept)", "again (after freeing them)"):
        print(phase)
        kept = []
        for index in range(args.arrays):
            array, line = _filled(args.mb)
            kept.append(array)
            print(f"  {index:3d}  {line}")
        del kept


if __name__ == "__main__":
    main()
