"""Streamed analysis of a log that is not in time order.

    python benchmarks/bench_order.py benchmarks/out/trace_1e7.parquet [--batch-rows 2000000]

Writes two copies of a time-ordered trace next to it — sorted by request, and shuffled —
then runs, each in a fresh process (``/usr/bin/time`` for wall time and peak RSS),
``servetrace analyze --no-streaming`` and ``--streaming`` on each order (a log not in time
order is partitioned by request_id, ``analysis/partitioned.py``), and
``pl.read_parquet`` of the same file as the reference. It checks that every run gives the
same per-request frame (``--requests-out``, exact) and the same JSON report (pooled ITL
within ``histogram.RELATIVE_BOUND``; exact below ``EXACT_GAPS`` gaps).
Modes (``--modes``) are CLI flags, or ``batched`` (``--streaming``), or ``partitioned``:
``--streaming`` with the batched engine refused, so the partitioned engine runs on every
order, a time-ordered log included (what replacing the batched engine by it would cost).
Not a test: it times a machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
# ``servetrace analyze`` whose batched engine refuses every log: dispatch partitions it.
FORCE_PARTITIONED = (
    "import sys; from servetrace.analysis import dispatch, streaming\n"
    "def refuse(*a, **k): raise streaming.NotTimeOrdered('forced')\n"
    "dispatch.analyze_streaming = refuse; sys.argv[0] = 'servetrace'\n"
    "from servetrace.cli import main; main()"
)


def _timed(args: list[str], stdout: Path | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (GB) of one fresh process."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        out = open(stdout, "w") if stdout else subprocess.DEVNULL  # noqa: SIM115
        try:
            subprocess.run(
                ["/usr/bin/time", "-o", timing.name, "-f", "%e %M", sys.executable, *args],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=out,
                check=True,
            )
        finally:
            if stdout:
                out.close()  # type: ignore[union-attr]
        seconds, kb = timing.read().split()[-2:]
    return float(seconds), int(kb) / 1e6


def _copies(trace: Path, orders: list[str]) -> dict[str, Path]:
    paths = {"time order": trace}
    frame = None
    for name in ("by request", "shuffled"):
        if name not in orders:
            continue
        path = trace.with_name(f"{trace.stem}.{name.replace(' ', '-')}.parquet")
        if not path.exists():
            frame = pl.read_parquet(trace) if frame is None else frame
            ordered = (
                frame.sort("request_id", maintain_order=True)
                if name == "by request"
                else frame.sample(fraction=1.0, shuffle=True, seed=0)
            )
            ordered.write_parquet(path, row_group_size=1_000_000)
            del ordered
        paths[name] = path
    del frame
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--batch-rows", type=int, default=2_000_000)
    parser.add_argument(
        "--orders", nargs="+", default=["by request", "shuffled"], help="besides time order"
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["--no-streaming", "--streaming"],
        help="analyze modes (partitioned: see above)",
    )
    options = parser.parse_args()
    out = options.trace.parent / "order"
    out.mkdir(exist_ok=True)
    reference = None
    print(f"{'order':<12} {'run':<22} {'wall s':>7} {'peak GB':>8} {'÷ read':>7}  same")
    for order, path in _copies(options.trace, options.orders).items():
        read_s, read_gb = _timed(["-c", f"import polars as pl; pl.read_parquet({str(path)!r})"])
        print(f"{order:<12} {'pl.read_parquet':<22} {read_s:7.2f} {read_gb:8.2f} {1:7.2f}")
        for mode in options.modes:
            stem = f"{order.replace(' ', '-')}{mode}"
            requests, report = out / f"{stem}.parquet", out / f"{stem}.json"
            forced = mode == "partitioned"
            seconds, gb = _timed(
                [
                    *(["-c", FORCE_PARTITIONED] if forced else ["-m", "servetrace"]),
                    "analyze",
                    str(path),
                    "--streaming" if mode in ("batched", "partitioned") else mode,
                    "-f",
                    "json",
                    "--batch-rows",
                    str(options.batch_rows),
                    "--requests-out",
                    str(requests),
                ],
                stdout=report,
            )
            frame = pl.read_parquet(requests).sort("request_id")
            summary = json.loads(report.read_text())
            summary.pop("inputs", None)
            itl = summary["metrics"].pop("itl")
            summary["warnings"] = [w for w in summary["warnings"] if "log histogram" not in w]
            if reference is None:
                reference = (frame, summary, itl)
                same = "reference"
            else:
                same_rows = frame.equals(reference[0])
                same_summary = summary == reference[1]
                worst = max(
                    abs(itl[k] - reference[2][k]) / abs(reference[2][k])
                    for k in ("p50", "p90", "p99", "p99_9")
                    if reference[2][k]
                )
                same = f"requests {same_rows}, summary {same_summary}, ITL rel {worst:.2e}"
            print(
                f"{order:<12} {'analyze ' + mode:<22} {seconds:7.2f} {gb:8.2f} "
                f"{seconds / read_s:7.2f}  {same}"
            )


if __name__ == "__main__":
    main()
