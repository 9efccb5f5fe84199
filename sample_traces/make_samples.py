"""Regenerate every file in sample_traces/ exactly (see README.md in this folder).

    python sample_traces/make_samples.py            # write the files, print their statistics
    python sample_traces/make_samples.py --check    # regenerate in memory, compare with disk

Every trace comes from `servetrace.sim.simulate` with the fixed workloads and configs below,
except `worked_example.*`, which is written out by hand. The Azure replay needs the
Azure LLM inference trace 2023 (conversation) CSV; pass ``--azure PATH`` if it is not
at the default location.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl

from servetrace.sim.config import EngineConfig
from servetrace.sim.eventlog import Simulation
from servetrace.sim.readers import read_workload
from servetrace.sim.simulate import run_simulation
from servetrace.sim.synthetic import synthetic_workload
from servetrace.sim.workloads import head

HERE = Path(__file__).resolve().parent
# Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_conv.csv (CC-BY-4.0); by default the copy in
# the shared data folder that sits beside a checkout of this repository.
DEFAULT_AZURE = (
    HERE.parent.parent / "shared/data/real/azure-llm-2023/AzureLLMInferenceTrace_conv.csv"
)
MS = 1_000_000

# ---------------------------------------------------------------- the fixed recipes


#: realistic.parquet: 3,000 bursty requests on a vLLM-like engine with a small KV cache.
def realistic_workload() -> pl.DataFrame:
    return synthetic_workload(3000, 4.5, seed=2024, burstiness=0.5)


REALISTIC_CONFIG = EngineConfig(
    policy="fcfs",
    max_batch_tokens=4096,
    kv_blocks=1536,
    cancel_fraction=0.12,
    bundle_prob=0.0005,
    release_delay_ns=1 * MS,
    leak_fraction=0.002,
    seed=7,
)  # horizon_ns is set to the last arrival, so requests are still in flight at the end


#: policy_*.parquet: one Poisson workload, three schedulers, nothing else changed.
def policy_workload() -> pl.DataFrame:
    return synthetic_workload(1500, 4.5, seed=1)


POLICY_CONFIGS = {
    "fcfs": EngineConfig(policy="fcfs", max_batch_tokens=4096, kv_blocks=2048, seed=0),
    "chunked": EngineConfig(policy="chunked", max_batch_tokens=512, kv_blocks=2048, seed=0),
    "sjf": EngineConfig(policy="sjf", max_batch_tokens=4096, kv_blocks=2048, seed=0),
}


#: different_workload.parquet: the fcfs config on another draw of the same generator.
def different_workload_spec() -> pl.DataFrame:
    return synthetic_workload(1500, 4.5, seed=2)


#: azure_conv_replay.parquet: the first 1,500 requests of the real trace, at their own times.
AZURE_REQUESTS = 1500
AZURE_CONFIG = EngineConfig(
    policy="chunked", max_batch_tokens=2048, kv_blocks=6144, max_running=256, seed=0
)


def worked_example() -> pl.DataFrame:
    """The lesson's worked example: one request, written out by hand.

    r1 arrives at 0 ms, is admitted at 30 ms, gets its first token at 80 ms and 100 more
    tokens 5 ms apart (the last at 580 ms), and completes at 580 ms. Expected: queue
    wait 30 ms, prefill 50 ms, TTFT 80 ms, decode 500 ms, response 580 ms, ITL 5 ms,
    TPOT 500 / (101 - 1) = 5 ms.
    """
    rows: list[tuple[str, str, int, int | None, int | None, int | None]] = [
        ("r1", "arrival", 0, None, 512, None),
        ("r1", "admission", 30 * MS, None, None, None),
        ("r1", "first_token", 80 * MS, 1, None, None),
    ]
    rows += [("r1", "token", (80 + 5 * k) * MS, 1, None, None) for k in range(1, 101)]
    rows.append(("r1", "completion", 580 * MS, None, None, 101))
    return pl.DataFrame(
        rows,
        schema={
            "request_id": pl.String,
            "event": pl.String,
            "ts": pl.Int64,
            "tokens": pl.Int64,
            "prompt_tokens": pl.Int64,
            "output_tokens": pl.Int64,
        },
        orient="row",
    )


def realistic() -> Simulation:
    wl = realistic_workload()
    cfg = dataclasses.replace(REALISTIC_CONFIG, horizon_ns=int(wl["arrival_ns"][-1]))
    return run_simulation(wl, cfg)


def policy(name: str) -> Simulation:
    return run_simulation(policy_workload(), POLICY_CONFIGS[name])


def different_workload() -> Simulation:
    return run_simulation(different_workload_spec(), POLICY_CONFIGS["fcfs"])


def azure_replay(path: Path) -> Simulation:
    return run_simulation(head(read_workload(path, "azure"), AZURE_REQUESTS), AZURE_CONFIG)


# ---------------------------------------------------------------- writing and stats


def _parquet_bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf, compression="zstd", compression_level=19, statistics=True)
    return buf.getvalue()


def _csv_bytes(df: pl.DataFrame) -> bytes:
    return df.write_csv().encode()


def stats(sim: Simulation) -> dict[str, object]:
    """Counts for the README, from the event log and the run's request accounting."""
    ev, req = sim.events, sim.requests
    cancelled = req.filter(pl.col("outcome") == "cancelled")
    by_state = dict(cancelled.group_by("cancel_state").len().iter_rows())
    outcomes = dict(req.group_by("outcome").len().iter_rows())
    terminal = req.filter(pl.col("outcome").is_in(["completed", "cancelled", "rejected"]))
    has_release = ev.filter(pl.col("event") == "release").height > 0
    return {
        "requests": req.height,
        "events": ev.height,
        "completed": outcomes.get("completed", 0),
        "cancelled": outcomes.get("cancelled", 0),
        "cancel_queued": by_state.get("queued", 0),
        "cancel_prefill": by_state.get("prefill", 0),
        "cancel_decode": by_state.get("decode", 0),
        "rejected": outcomes.get("rejected", 0),
        "in_flight": outcomes.get("in_flight", 0),
        "preemptions": ev.filter(pl.col("event") == "preemption").height,
        "preempted_requests": int((req["preemptions"] > 0).sum()),
        "multi_token_chunks": ev.filter(pl.col("tokens") > 1).height,
        "releases": ev.filter(pl.col("event") == "release").height,
        "leaked": int((~terminal["released"]).sum()) if has_release else 0,
    }


def latency(ev: pl.DataFrame) -> dict[str, float]:
    """p50/p99 queue wait, TTFT and ITL (ms) of completed requests (docs/design.md)."""
    per = (
        ev.group_by("request_id")
        .agg(
            arrival=pl.col("ts").filter(pl.col("event") == "arrival").first(),
            admission=pl.col("ts").filter(pl.col("event") == "admission").min(),
            first=pl.col("ts").filter(pl.col("event") == "first_token").first(),
            done=pl.col("event").is_in(["completion"]).any(),
        )
        .filter("done")
    )
    ticks = (
        ev.filter(pl.col("event").is_in(["first_token", "token"]))
        .join(per.select("request_id"), on="request_id")
        .select(pl.col("ts").diff().over("request_id").alias("gap"))
        .drop_nulls()
    )
    out: dict[str, float] = {}
    for name, series in (
        ("queue_wait", per["admission"] - per["arrival"]),
        ("ttft", per["first"] - per["arrival"]),
        ("itl", ticks["gap"]),
    ):
        for q in (0.5, 0.99):
            value = series.quantile(q, "linear")
            out[f"{name}_p{round(q * 100)}_ms"] = round(float(value or 0) / MS, 1)
    return out


def build(azure: Path) -> dict[str, tuple[bytes, Simulation | None]]:
    """Every sample file: name -> (bytes, the run that made it)."""
    files: dict[str, tuple[bytes, Simulation | None]] = {}
    example = worked_example()
    files["worked_example.csv"] = (_csv_bytes(example), None)
    files["worked_example.parquet"] = (_parquet_bytes(example), None)
    runs: dict[str, Callable[[], Simulation]] = {
        "realistic.parquet": realistic,
        "policy_fcfs.parquet": lambda: policy("fcfs"),
        "policy_chunked.parquet": lambda: policy("chunked"),
        "policy_sjf.parquet": lambda: policy("sjf"),
        "different_workload.parquet": different_workload,
    }
    if azure.exists():
        runs["azure_conv_replay.parquet"] = lambda: azure_replay(azure)
    else:
        print(f"warning: {azure} not found; azure_conv_replay.parquet skipped", file=sys.stderr)
    for name, make in runs.items():
        sim = make()
        files[name] = (_parquet_bytes(sim.events), sim)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--azure", type=Path, default=DEFAULT_AZURE, help="Azure conv CSV")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder")
    parser.add_argument("--check", action="store_true", help="compare with the files on disk")
    args = parser.parse_args(argv)

    files = build(args.azure)
    if args.check:
        stale = [n for n, (data, _) in files.items() if _read(args.out / n) != data]
        for name in stale:
            print(f"differs: {name}", file=sys.stderr)
        print("all sample traces are up to date" if not stale else f"{len(stale)} file(s) differ")
        return 1 if stale else 0

    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    for name, (data, sim) in files.items():
        (args.out / name).write_bytes(data)
        if sim is not None:
            rows.append({"file": name, "bytes": len(data), **stats(sim), **latency(sim.events)})
    # One markdown table per group of columns, ready to paste into README.md.
    for keys in (list(rows[0])[:9], ["file", *list(rows[0])[9:]]):
        print("| " + " | ".join(keys) + " |")
        print("|" + "---|" * len(keys))
        for row in rows:
            print("| " + " | ".join(_fmt(row[k]) for k in keys) + " |")
        print()
    return 0


def _fmt(value: object) -> str:
    return f"{value:,}" if isinstance(value, (int, float)) else str(value)


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


if __name__ == "__main__":
    raise SystemExit(main())
