"""The same per-request metrics as DuckDB SQL and as pandas, checked against servetrace and timed.

    python benchmarks/side_by_side.py check TRACE            # assert all three agree (1e6)
    python benchmarks/side_by_side.py bench TRACE [TRACE...] [--repeat 3] [--max-rss-gb 16]

Metrics (the definitions of ``servetrace/analysis/metrics.py``, DESIGN §4), per request:
queue wait (first admission − arrival; a request cancelled before any admission queued
until its cancellation), prefill (first tick − first admission), TTFT (first tick −
arrival), decode (last tick − first tick), e2e (terminal event − arrival), TPOT (decode /
(output tokens − 1), output tokens ≥ 2), ITL mean (decode / (ticks − 1), ticks ≥ 2),
output tokens (the terminal row's ``output_tokens``, else Σ tokens of the ticks, a
missing ``tokens`` counting 1); pooled TTFT p50/p99 over completed requests, linear
interpolation. These are written once more, independently, for a canonical,
lifecycle-valid trace (``generate.py``: every request valid; nothing here applies
servetrace's validation rules, which is part of what servetrace's time pays for).

``check`` asserts every per-request value equal (exactly: the divisions are the same
IEEE operations) and the percentiles equal to 1e-12 relative. ``bench`` times, in fresh
processes with the order rotated on every repeat: ``pl.read_parquet`` (the reference),
the full ``servetrace analyze`` report (in memory up to 3e7 events, streamed above, as
the CLI chooses), the DuckDB query and the pandas program. Before each pandas run it
checks that ``MemAvailable`` exceeds 80 B/event × 2.5 and skips the run otherwise; every
child is killed if its RSS passes ``--max-rss-gb`` (a watchdog), so a shared machine
is never pushed into swap or the OOM killer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLUMNS = (
    "queue_wait_ns",
    "prefill_ns",
    "ttft_ns",
    "decode_ns",
    "e2e_ns",
    "tpot_ns",
    "itl_mean_ns",
    "output_tokens",
)
PANDAS_BYTES_PER_EVENT = 80 * 2.5  # peak of the pandas program, measured at 1e6/1e7, + margin

SQL = """
WITH r AS (
  SELECT request_id,
    min(ts) FILTER (WHERE event = 'arrival') AS arrival_ns,
    min(ts) FILTER (WHERE event = 'admission') AS admission_ns,
    min(ts) FILTER (WHERE event IN ('first_token', 'token')) AS first_tick_ns,
    max(ts) FILTER (WHERE event IN ('first_token', 'token')) AS last_tick_ns,
    count(*) FILTER (WHERE event IN ('first_token', 'token')) AS ticks,
    sum(coalesce(tokens, 1)) FILTER (WHERE event IN ('first_token', 'token')) AS tokens_sum,
    min(ts) FILTER (WHERE event IN ('completion', 'cancellation')) AS terminal_ns,
    max(output_tokens) FILTER (WHERE event IN ('completion', 'cancellation')) AS reported,
    bool_or(event = 'completion') AS completed,
    bool_or(event = 'cancellation') AS cancelled
  FROM read_parquet(?) GROUP BY request_id
), m AS (
  SELECT request_id, completed,
    CASE WHEN admission_ns IS NULL AND cancelled THEN terminal_ns - arrival_ns
         ELSE admission_ns - arrival_ns END AS queue_wait_ns,
    first_tick_ns - admission_ns AS prefill_ns,
    first_tick_ns - arrival_ns AS ttft_ns,
    last_tick_ns - first_tick_ns AS decode_ns,
    terminal_ns - arrival_ns AS e2e_ns,
    coalesce(reported, tokens_sum, 0) AS output_tokens,
    CASE WHEN coalesce(reported, tokens_sum, 0) >= 2
         THEN (last_tick_ns - first_tick_ns)::DOUBLE / (coalesce(reported, tokens_sum, 0) - 1)
    END AS tpot_ns,
    CASE WHEN ticks >= 2 THEN (last_tick_ns - first_tick_ns)::DOUBLE / (ticks - 1) END
      AS itl_mean_ns
  FROM r
)
SELECT * FROM m ORDER BY request_id
"""
SQL_PERCENTILES = """
SELECT quantile_cont(ttft_ns, 0.5) FILTER (WHERE completed),
       quantile_cont(ttft_ns, 0.99) FILTER (WHERE completed) FROM requests
"""


def duckdb_metrics(path: str):  # -> (pl.DataFrame, (p50, p99))
    import duckdb
    import polars as pl

    con = duckdb.connect()
    con.execute(f"SET threads = {os.cpu_count() or 1}")
    literal = "'" + path.replace("'", "''") + "'"
    requests = pl.from_arrow(con.sql(SQL.replace("?", literal)).to_arrow_table())
    con.register("requests", requests.to_arrow())
    p50, p99 = con.execute(SQL_PERCENTILES).fetchone()
    return requests.with_columns(pl.col("output_tokens").cast(pl.Int64)), (p50, p99)


def pandas_metrics(path: str):  # -> (pd.DataFrame, (p50, p99))
    import numpy as np
    import pandas as pd

    ev = pd.read_parquet(path, columns=["request_id", "event", "ts", "tokens", "output_tokens"])
    ev["ts"] = ev["ts"].astype("Int64")
    kind = ev["event"].astype(str)
    tick = kind.isin(["first_token", "token"])
    terminal = kind.isin(["completion", "cancellation"])
    by = "request_id"
    arrival = ev.loc[kind == "arrival"].groupby(by)["ts"].min().rename("arrival_ns")
    admission = ev.loc[kind == "admission"].groupby(by)["ts"].min().rename("admission_ns")
    ticks = ev.loc[tick, [by, "ts"]].assign(tokens=ev.loc[tick, "tokens"].fillna(1))
    tick_aggs = ticks.groupby(by).agg(
        first_tick_ns=("ts", "min"),
        last_tick_ns=("ts", "max"),
        ticks=("ts", "size"),
        tokens_sum=("tokens", "sum"),
    )
    ends = ev.loc[terminal, [by, "ts", "output_tokens"]]
    ends = ends.assign(completed=kind[terminal] == "completion")
    end_aggs = ends.groupby(by).agg(
        terminal_ns=("ts", "min"), reported=("output_tokens", "max"), completed=("completed", "any")
    )
    r = pd.concat([arrival, admission, tick_aggs, end_aggs], axis=1).sort_index()
    r = r.astype({"ticks": "Int64", "tokens_sum": "Int64", "reported": "Int64"})
    completed = r["completed"].astype("boolean").fillna(False).astype(bool)
    cancelled = r["terminal_ns"].notna() & ~completed
    out = pd.DataFrame(index=r.index)
    wait = r["admission_ns"] - r["arrival_ns"]
    never = r["admission_ns"].isna() & cancelled
    out["queue_wait_ns"] = wait.mask(never, r["terminal_ns"] - r["arrival_ns"])
    out["prefill_ns"] = r["first_tick_ns"] - r["admission_ns"]
    out["ttft_ns"] = r["first_tick_ns"] - r["arrival_ns"]
    decode = r["last_tick_ns"] - r["first_tick_ns"]
    out["decode_ns"] = decode
    out["e2e_ns"] = r["terminal_ns"] - r["arrival_ns"]
    n_out = r["reported"].fillna(r["tokens_sum"]).fillna(0).astype("Int64")
    out["output_tokens"] = n_out
    as_float = decode.astype("Float64")
    out["tpot_ns"] = (as_float / (n_out - 1)).where(n_out >= 2)
    out["itl_mean_ns"] = (as_float / (r["ticks"] - 1)).where(r["ticks"] >= 2)
    done = out.loc[completed, "ttft_ns"].astype("float64")
    p50, p99 = np.percentile(done.to_numpy(), [50, 99])
    return out.reset_index(), (float(p50), float(p99))


def servetrace_metrics(path: str):  # -> (pl.DataFrame, (p50, p99) ns, report dict)
    import servetrace
    from servetrace.units import NS_PER_MS

    analysis = servetrace.analyze(path)
    report = servetrace.to_dict(analysis)
    ttft = report["metrics"]["ttft"]
    return analysis.requests, (ttft["p50"] * NS_PER_MS, ttft["p99"] * NS_PER_MS), report


def check(path: str) -> int:
    """Assert DuckDB and pandas give servetrace's per-request values and TTFT p50/p99."""
    import polars as pl

    ours, ours_p, _ = servetrace_metrics(path)
    ours = ours.select("request_id", *COLUMNS).sort("request_id")
    duck, duck_p = duckdb_metrics(path)
    duck = duck.select("request_id", *COLUMNS)
    panda, panda_p = pandas_metrics(path)
    panda = pl.from_pandas(panda).select("request_id", *COLUMNS)
    for name, other, pct in (("duckdb", duck, duck_p), ("pandas", panda, panda_p)):
        other = other.cast(ours.schema)
        assert other.height == ours.height, (name, other.height, ours.height)
        for column in ("request_id", *COLUMNS):
            a, b = ours[column], other[column]
            same = (a == b) | (a.is_null() & b.is_null())
            bad = (~same.fill_null(False)).sum()
            assert bad == 0, f"{name}: {column} differs on {bad} requests"
        for label, mine, theirs in zip(("p50", "p99"), ours_p, pct, strict=True):
            # servetrace reports ms with 6 decimals (ns exact): compare at 1 ns
            assert abs(mine - theirs) <= max(1.0, 1e-12 * abs(mine)), (name, label, mine, theirs)
        print(
            f"{name}: {ours.height:,} requests x {len(COLUMNS)} metrics equal; "
            f"TTFT p50 {pct[0] / 1e6:.6f} ms, p99 {pct[1] / 1e6:.6f} ms equal"
        )
    return 0


def child(mode: str, path: str) -> int:
    """One timed run (a fresh process per run): prints {"work_s": ...}."""
    started, cpu = time.perf_counter(), time.process_time()
    if mode == "polars":
        import polars as pl

        started, cpu = time.perf_counter(), time.process_time()
        pl.read_parquet(path)
    elif mode == "servetrace":
        import servetrace  # imports outside the timer, as for the others
        import servetrace.api._analyze  # noqa: F401

        started, cpu = time.perf_counter(), time.process_time()
        servetrace_metrics(path)
    elif mode == "duckdb":
        import duckdb  # noqa: F401
        import polars  # noqa: F401

        started, cpu = time.perf_counter(), time.process_time()
        duckdb_metrics(path)
    elif mode == "pandas":
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401

        started, cpu = time.perf_counter(), time.process_time()
        pandas_metrics(path)
    import resource

    work, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"work_s": work, "cpu_s": cpu, "peak_mb": peak_mb}))
    return 0


def _available_bytes() -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _measure(mode: str, path: str, max_rss_gb: float, timeout: float) -> dict:
    sys.path.insert(0, str(HERE))
    from bench_analyze import RssWatchdog

    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, __file__, "child", mode, path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    dog = RssWatchdog(proc.pid, int(max_rss_gb * 2**20))
    dog.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    dog.stop.set()
    wall = time.perf_counter() - started
    if dog.killed or proc.returncode != 0:
        reason = "killed at the RSS limit" if dog.killed else err.decode()[-300:]
        return {"mode": mode, "ok": False, "reason": reason, "wall_s": wall}
    return {"mode": mode, "ok": True, "wall_s": wall, **json.loads(out.decode().splitlines()[-1])}


def bench(paths: list[str], repeat: int, max_rss_gb: float, timeout: float) -> int:
    import pyarrow.parquet as pq

    modes = ["polars", "servetrace", "duckdb", "pandas"]
    results = []
    for path in paths:
        events = pq.ParquetFile(path).metadata.num_rows if Path(path).is_file() else None
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        for i in range(repeat):
            for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:
                need = PANDAS_BYTES_PER_EVENT * (events or 0)
                if mode == "pandas" and _available_bytes() < need:
                    runs[mode].append(
                        {
                            "mode": mode,
                            "ok": False,
                            "reason": (
                                f"skipped: needs ~{need / 2**30:.1f} GiB, "
                                f"{_available_bytes() / 2**30:.1f} GiB available"
                            ),
                        }
                    )
                    continue
                runs[mode].append(_measure(mode, path, max_rss_gb, timeout))
                print(json.dumps({"path": path, **runs[mode][-1]}), file=sys.stderr)
        row: dict = {"path": path, "events": events, "uptime": os.getloadavg()}
        for mode, got in runs.items():
            ok = [r["work_s"] for r in got if r.get("ok")]
            row[mode] = statistics.median(ok) if ok else None
            cpus = [r["cpu_s"] for r in got if r.get("ok") and "cpu_s" in r]
            row[f"{mode}_cpu"] = statistics.median(cpus) if cpus else None
            peaks = [r["peak_mb"] for r in got if r.get("ok")]
            row[f"{mode}_peak_mb"] = max(peaks) if peaks else None
            if not ok:
                row[f"{mode}_reason"] = got[-1].get("reason") if got else None
        results.append(row)
    print(
        "| events | pl.read_parquet: wall s; CPU s; peak RSS | servetrace (× read) | "
        "DuckDB SQL (× read) | pandas (× read) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for row in results:
        read = row["polars"]

        def cell(mode: str, row: dict = row, read: float | None = read) -> str:
            value = row[mode]
            if value is None:
                return str(row.get(f"{mode}_reason", "—"))
            peak, cpu, read_cpu = row[f"{mode}_peak_mb"], row[f"{mode}_cpu"], row["polars_cpu"]
            text = f"{value:.3f} ({value / read:.1f}×)" if read else f"{value:.3f}"
            if cpu is not None and read_cpu:
                text += f"; CPU {cpu:.2f} ({cpu / read_cpu:.1f}×)"
            return f"{text}; {peak:,.0f} MB"

        n = f"{row['events']:.0e}" if row["events"] else row["path"]
        print(
            f"| {n} | {read:.3f}; CPU {row['polars_cpu'] or 0:.2f}; "
            f"{row['polars_peak_mb']:,.0f} MB | {cell('servetrace')} "
            f"| {cell('duckdb')} | {cell('pandas')} |"
        )
    print(json.dumps(results))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("check")
    one.add_argument("trace")
    many = sub.add_parser("bench")
    many.add_argument("traces", nargs="+")
    many.add_argument("--repeat", type=int, default=3)
    many.add_argument("--max-rss-gb", type=float, default=16.0)
    many.add_argument("--timeout", type=float, default=900.0)
    run = sub.add_parser("child")
    run.add_argument("mode")
    run.add_argument("trace")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check(args.trace)
    if args.command == "child":
        return child(args.mode, args.trace)
    return bench(args.traces, args.repeat, args.max_rss_gb, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
