"""The golden set: reports a change to the engine must leave byte-identical.

    python benchmarks/golden.py traces                 # writes benchmarks/out/golden/*.parquet
    python benchmarks/golden.py write DIR [--jobs 2]   # every report of the set into DIR
    python benchmarks/golden.py diff DIR_A DIR_B       # exit 1 if any report differs

A speed-up of the kernel must not move a single bit of any report. ``write`` runs
``servetrace analyze --format json`` (and ``--requests-out``) in fresh processes over:

- the bundled sample traces and the four Vidur scheduler traces (``tests/data/vidur``),
  plus the four concatenated with a ``policy`` column, ``--by policy``;
- generated 10⁶-event traces (``generate.py``, seed 0) in the row orders and types the
  engine has separate paths for: time order, sorted by request, shuffled, a dictionary
  ``event``, string ids, ids spread ×2²⁰ and over ±2⁶² (too wide to pack into 64 bits),
  tied ticks of different sizes, and a 300-value ``group`` column (``--by group``);

each in memory (``--no-streaming``) and batched (``--streaming --batch-rows 200000``, so
several batches, and partitioned by request where the order is not time order). ``diff``
compares the JSON reports byte for byte as printed (key order included), and the
per-request Parquet frames value for value. Not a test: a developer's check that takes
about two minutes on the 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "benchmarks" / "out" / "golden"
VIDUR = sorted((ROOT / "tests" / "data" / "vidur").glob("*.parquet"))
MODES = {"mem": ["--no-streaming"], "batched": ["--streaming", "--batch-rows", "200000"]}


def _generated() -> dict[str, Path]:
    names = ("time", "by_request", "shuffled", "dict_event", "string_ids", "ids_x2p20")
    names += ("ids_wide", "tied_ticks", "groups")
    return {name: TRACES / f"{name}.parquet" for name in names}


def make_traces() -> None:
    """The generated traces of the set (deterministic: seed 0)."""
    import polars as pl

    TRACES.mkdir(parents=True, exist_ok=True)
    base = _generated()
    gen = [sys.executable, str(ROOT / "benchmarks" / "generate.py"), "--events", "1e6"]
    subprocess.run([*gen, "-o", str(base["time"]), "--seed", "0"], check=True)
    subprocess.run(
        [*gen, "-o", str(base["dict_event"]), "--seed", "0", "--event-type", "dictionary"],
        check=True,
    )
    subprocess.run([*gen, "-o", str(base["string_ids"]), "--seed", "0", "--string-ids"], check=True)
    frame = pl.read_parquet(base["time"])
    rid = pl.col("request_id")
    frame.sort("request_id", maintain_order=True).write_parquet(base["by_request"])
    frame.sample(fraction=1.0, shuffle=True, seed=0).write_parquet(base["shuffled"])
    frame.with_columns(rid * (1 << 20)).write_parquet(base["ids_x2p20"])
    frame.with_columns(rid * (1 << 40) - (1 << 62)).write_parquet(base["ids_wide"])
    # Every 50th token tick repeated at the same time with one token more: tied ticks of
    # different sizes, which only the written order places (lifecycle's grouped path).
    tick = (pl.col("event") == "token") & (pl.int_range(pl.len()) % 50 == 0)
    extra = frame.filter(tick).with_columns(pl.col("tokens") + 1)
    pl.concat([frame, extra]).sort("ts", maintain_order=True).write_parquet(base["tied_ticks"])
    frame.with_columns((rid % 300).alias("group")).write_parquet(base["groups"])
    # The four schedulers served the same 1000 requests: ids offset per file, so each
    # policy's requests stay distinct (and valid) in the one trace.
    vidur = [
        pl.read_parquet(path).with_columns(
            pl.col("request_id") + index * 1_000_000,
            pl.lit(path.stem.split("__")[-1]).alias("policy"),
        )
        for index, path in enumerate(VIDUR)
    ]
    pl.concat(vidur, how="diagonal_relaxed").write_parquet(TRACES / "vidur_policies.parquet")


def _jobs() -> list[tuple[str, list[str]]]:
    """(name, analyze arguments) of every report in the set."""
    traces: dict[str, tuple[Path, list[str]]] = {}
    for path in sorted((ROOT / "sample_traces").glob("*.parquet")):
        traces[f"sample_{path.stem}"] = (path, [])
    for path in VIDUR:
        traces[f"vidur_{path.stem.split('__')[-1]}"] = (path, [])
    traces["vidur_by_policy"] = (TRACES / "vidur_policies.parquet", ["--by", "policy"])
    for name, path in _generated().items():
        traces[name] = (path, [])
    traces["groups_by"] = (_generated()["groups"], ["--by", "group"])
    jobs = []
    for name, (path, extra) in traces.items():
        if not path.exists():
            raise SystemExit(f"{path}: missing; run `python benchmarks/golden.py traces` first")
        for mode, flags in MODES.items():
            # Relative to the checkout, so a worktree of another commit prints the same
            # inputs and its reports compare byte for byte.
            jobs.append((f"{name}.{mode}", [str(path.relative_to(ROOT)), *flags, *extra]))
    return jobs


def _write_one(out: Path, name: str, args: list[str]) -> str:
    rows = out / f"{name}.requests.parquet"
    command = [sys.executable, "-m", "servetrace", "analyze", *args, "--format", "json"]
    if "--by" not in args:
        command += ["--requests-out", str(rows)]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}
    )
    if done.returncode not in (0, 1):
        return f"{name}: exit {done.returncode}: {done.stderr.strip()[-300:]}"
    json.loads(done.stdout)  # a report, not an error message
    # As printed: key order is part of the contract.
    (out / f"{name}.json").write_text(done.stdout)
    return ""


def write(out: Path, jobs: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(jobs) as pool:
        failures = [m for m in pool.map(lambda j: _write_one(out, *j), _jobs()) if m]
    for message in failures:
        print(message, file=sys.stderr)
    print(f"{len(_jobs())} reports in {out}")
    return 1 if failures else 0


def diff(left: Path, right: Path) -> int:
    import polars as pl
    from polars.testing import assert_frame_equal

    names = sorted({p.name for p in left.iterdir()} | {p.name for p in right.iterdir()})
    differing = []
    for name in names:
        a, b = left / name, right / name
        if not (a.exists() and b.exists()):
            differing.append(f"{name}: only in {'right' if b.exists() else 'left'}")
        elif name.endswith(".json") and a.read_bytes() != b.read_bytes():
            differing.append(f"{name}: reports differ")
        elif name.endswith(".parquet"):
            try:
                assert_frame_equal(pl.read_parquet(a), pl.read_parquet(b))
            except AssertionError as error:
                differing.append(f"{name}: {str(error).splitlines()[0]}")
    for line in differing:
        print(line)
    print(f"{len(names) - len(differing)} of {len(names)} files identical")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("traces")
    writer = sub.add_parser("write")
    writer.add_argument("out", type=Path)
    writer.add_argument("--jobs", type=int, default=2)
    differ = sub.add_parser("diff")
    differ.add_argument("left", type=Path)
    differ.add_argument("right", type=Path)
    args = parser.parse_args()
    if args.command == "traces":
        make_traces()
        return 0
    if args.command == "write":
        return write(args.out, args.jobs)
    return diff(args.left, args.right)


if __name__ == "__main__":
    sys.exit(main())
