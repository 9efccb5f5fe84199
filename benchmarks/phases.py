"""Memory and CPU by phase of one ``servetrace`` command, run in this process.

    python benchmarks/phases.py analyze benchmarks/out/trace_1e9 --format json > r.json

Runs the command exactly as ``python -m servetrace`` would (same allocator setting, same
output on stdout) and prints to stderr, for each phase of a batched analysis (ingest
prescan, whole-trace facts, the kept rows read back, each step of the summary): wall
and CPU seconds since start, RSS before and after, and the highest RSS sampled during
the phase (every 20 ms); at the end of the batch loop also glibc's heap figures and
``/proc/self/smaps_rollup``'s anonymous and lazily freed memory, which tell live data
from memory the allocators hold. ``PHASES_SLEEP=3`` waits that long at the end of the
loop and reports again (memory the allocator returns on its own). Wrapping the phases
costs nothing measurable; the sampler thread about 0.1 % of a core.
"""

from __future__ import annotations

import os

# As servetrace.cli sets it, before Polars loads (a later setting has no effect).
os.environ.setdefault(
    "_RJEM_MALLOC_CONF", "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"
)

import ctypes
import runpy
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")
START_WALL, START_CPU = time.time(), time.process_time()
_peak = [0, 0]  # [since the phase began, whole run]


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE


def _sample() -> None:
    while True:
        now = rss()
        _peak[0], _peak[1] = max(_peak[0], now), max(_peak[1], now)
        time.sleep(0.02)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def wrap(owner: Any, name: str, label: str | None = None) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        before = rss()
        _peak[0] = before
        try:
            return original(*args, **kwargs)
        finally:
            peak = max(_peak[0], rss())
            _say(
                f"{time.time() - START_WALL:8.1f} s  cpu {time.process_time() - START_CPU:7.1f} s"
                f"  {label or name:28s} before {before / 1e9:5.2f}  after {rss() / 1e9:5.2f}"
                f"  peak {peak / 1e9:5.2f} GB"
            )

    setattr(owner, name, timed)


def _memory_report(tag: str) -> None:
    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in [
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            ]
        ]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    with open("/proc/self/smaps_rollup") as handle:
        roll = dict(line.split(":", 1) for line in handle if ":" in line)
    _say(
        f"[{tag}] rss {rss() / 1e9:.2f} GB; glibc heap {info.arena / 1e9:.2f} GB "
        f"({info.uordblks / 1e9:.2f} in use); anonymous {roll['Anonymous'].strip()}, "
        f"lazily freed {roll.get('LazyFree', '?').strip()}"
    )


def main() -> None:
    threading.Thread(target=_sample, daemon=True).start()
    from servetrace.analysis import memory, pieces, summary
    from servetrace.sources import normalise

    wrap(normalise, "prescan")
    wrap(pieces, "whole_trace_facts")
    loop_end = pieces.Pieces.timeline

    def timeline(self: Any, *args: Any, **kwargs: Any) -> Any:
        _memory_report("batch loop ends")
        if os.environ.get("PHASES_SLEEP"):
            time.sleep(float(os.environ["PHASES_SLEEP"]))
            _memory_report("after sleeping")
        return loop_end(self, *args, **kwargs)

    pieces.Pieces.timeline = timeline  # type: ignore[method-assign]
    wrap(pieces.Pieces, "timeline", "kept rows: timeline")
    wrap(pieces.Pieces, "requests", "kept rows: requests")
    wrap(memory, "summarize", "summary (all of it)")
    for name in ("accounting", "violations", "concurrency_by_group", "formula_by_group"):
        wrap(summary, name)
    wrap(summary, "estimate_by_group", "survival")
    sys.argv = ["servetrace", *sys.argv[1:]]
    try:
        runpy.run_module("servetrace", run_name="__main__")
    finally:
        _say(
            f"total: wall {time.time() - START_WALL:.1f} s, "
            f"cpu {time.process_time() - START_CPU:.1f} s, sampled peak {_peak[1] / 1e9:.2f} GB"
        )


if __name__ == "__main__":
    main()
