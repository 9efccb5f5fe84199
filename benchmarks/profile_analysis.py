"""Where does `analyze` spend its time? In-process bisection of the analysis, step by step.

    python benchmarks/profile_analysis.py benchmarks/out/trace_1e7.parquet [--repeat 3]
    POLARS_VERBOSE=1 python benchmarks/profile_analysis.py TRACE --repeat 1   # engine logs

Part 1 replays ``pipeline._analyze`` as the library's own (partly private) functions,
in the same order, timing each step with ``time.perf_counter`` (median of ``--repeat``
runs of the step on the same inputs) and recording the RSS high-water mark of the step
(``/proc/self/clear_refs``). The replay is checked against ``lifecycle.build_timeline``
so the numbers describe the real code. If the library's internals change, steps that no
longer exist are reported as skipped.

Part 2 times alternative formulations of the most expensive steps next to the current
one, each checked to give the same result on this trace. They are *evidence for
suggestions*, not changes: the library is not modified.

Output: Markdown on stdout, JSON to ``benchmarks/out/profile_<trace>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servetrace.analysis import lifecycle, metrics, summary
from servetrace.analysis import memory as pipeline
from servetrace.analysis.lifecycle import KEY
from servetrace.sources import canonical as ingest

OUT = Path(__file__).resolve().parent / "out"


def rss() -> dict[str, float]:
    out = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) / 1024
    return out


def reset_hwm() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


QUIET = {"threshold": 0.25, "max_wait": 10.0}
CPU_TIMES: list[float] = []


def timed(fn: Callable[[], object], repeat: int) -> tuple[object, float, float, list[float]]:
    """Run ``fn`` ``repeat`` times: last result, median seconds, max peak MB above start.

    Before each run, wait briefly for the machine to be quiet (other users' work inflates
    wall times on 2 cores). The CPU time of each run (all threads) goes to CPU_TIMES.
    """
    from bench_analyze import wait_for_quiet

    times, peaks, cpus, result = [], [], [], None
    for _ in range(repeat):
        result = None
        if QUIET["max_wait"] > 0:
            wait_for_quiet(QUIET["threshold"], QUIET["max_wait"])
        reset_hwm()
        base = rss()["VmRSS"]
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        peaks.append(rss()["VmHWM"] - base)
    CPU_TIMES[:] = cpus
    # the first run allocates; later runs may reuse the allocator's cached pages
    return result, statistics.median(times), max(peaks), times


# ------------------------------------------------------------------ part 1: the pipeline
# The replay mirrors lifecycle.build_timeline and pipeline._analyze as of commit c276271
# (stable sort of time-ordered ticks; ids from control rows; ticks dropped after gaps).
def replay(path: str, repeat: int) -> tuple[list[dict], dict]:
    rows: list[dict] = []
    s: dict = {}
    lc = lifecycle
    if not hasattr(lc, "_request_ids"):
        raise SystemExit("lifecycle has changed shape: update replay() in this script")

    def step(name: str, fn: Callable[[], object], key: str | None = None, note: str = ""):
        result, secs, peak, _times = timed(fn, repeat)
        rows.append(
            {
                "step": name,
                "seconds": secs,
                "peak_above_start_mb": peak,
                "times": _times,
                "cpu_seconds": statistics.median(CPU_TIMES),
                "note": note,
            }
        )
        if key:
            s[key] = result
        return result

    step(
        "ingest.read_events (plan + distinct-event scan)",
        lambda: ingest.read_events([path]),
        "trace",
    )
    step(
        "collect: parquet read + normalise (event→Enum)",
        lambda: s["trace"].events.collect(),
        "events",
    )
    events0 = s["events"]
    attributes = pipeline.attribute_columns(events0.columns)
    # -- build_timeline, step by step
    step(
        "lifecycle.split_row_quarantine (null check)",
        lambda: lc.split_row_quarantine(events0),
        "split",
    )
    events = s["split"][0]
    step("lifecycle.with_request_key (+ _key column)", lambda: lc.with_request_key(events), "ev")
    ev = s["ev"]
    step(
        "lifecycle.trace_facts (any admission/release, ts min/max)",
        lambda: lc.trace_facts(ev),
        "facts",
    )
    facts = s["facts"]
    step(
        "_tick_frame: filter ticks, is_sorted, stable sort by _key, gap diff",
        lambda: lc._tick_frame(ev),
        "ticks",
    )
    step(
        "_tick_aggregates: group_by(_key, maintain_order) on sorted ticks",
        lambda: lc._tick_aggregates(s["ticks"]),
        "tick_aggs",
    )
    step(
        "others: filter non-tick rows",
        lambda: ev.filter(~pl.col("event").is_in(["first_token", "token"])),
        "others",
    )
    step(
        "_control_frame: others + first ticks, sort",
        lambda: lc._control_frame(s["others"], s["tick_aggs"]),
        "control",
    )
    step(
        "_sequence: state machine over control rows",
        lambda: lc._sequence(s["control"], facts.has_admissions, facts.end_ns or 0),
        "seq",
    )
    step(
        "_tokens_while_queued: semi-join ticks of preempted, join_asof",
        lambda: lc._tokens_while_queued(s["ticks"], s["control"]),
        "queued",
    )
    step(
        "_control_aggregates: group_by over control + attribute rows",
        lambda: lc._control_aggregates(s["others"], s["seq"], attributes).with_columns(
            pl.col(KEY).is_in(s["queued"][KEY].implode()).alias("hit_token_while_queued")
        ),
        "control_aggs",
    )
    step(
        "_request_ids (from control rows)",
        lambda: lc._request_ids(ev, s["others"], s["control_aggs"]),
        "ids",
    )

    def assemble():
        return (
            s["control_aggs"]
            .join(s["tick_aggs"], on=KEY, how="left")
            .join(s["ids"], on=KEY, how="left")
            .with_columns(
                (pl.col("n_control").fill_null(0) + pl.col("ticks").fill_null(0)).alias("rows")
            )
            .with_columns(lc._rule_column())
            .with_columns(
                pl.when(pl.col("terminal_event") == "completion")
                .then(pl.lit("completed"))
                .when(pl.col("terminal_event") == "cancellation")
                .then(pl.lit("cancelled"))
                .otherwise(pl.lit("in_flight"))
                .alias("outcome")
            )
            .sort(KEY)
        )

    step("requests: joins + rule column + sort", assemble, "requests_tl")
    step(
        "_transitions",
        lambda: lc._transitions(
            s["seq"], s["requests_tl"].filter(pl.col("rule").is_null()).select(KEY)
        ),
        "transitions",
    )
    timeline = step(
        "= lifecycle.build_timeline (whole, for comparison)",
        lambda: lc.build_timeline(events0, attributes),
        "timeline",
    )
    if not (timeline.requests.equals(s["requests_tl"]) and timeline.ticks.equals(s["ticks"])):
        raise SystemExit("the replay differs from build_timeline: update replay()")
    step(
        "metrics.request_metrics", lambda: metrics.request_metrics(timeline, attributes), "requests"
    )
    step(
        "metrics.gap_frame (filter ticks of completed requests)",
        lambda: metrics.gap_frame(timeline, s["requests"]),
        "gaps",
    )
    # -- summarize, step by step
    req, gaps = s["requests"], s["gaps"]
    completed = req.filter(pl.col("outcome") == "completed")
    step(
        "summary.accounting + violations",
        lambda: (summary.accounting(timeline), summary.violations(timeline)),
    )
    step(
        "summary.latency_distributions (all metrics)",
        lambda: summary.latency_distributions(completed, gaps),
        "dists",
    )
    from servetrace.stats.describe import describe

    step("  of which stats.describe(itl gaps)", lambda: describe(gaps["itl_ns"]), "itl_desc")
    step(
        "summary.concurrency",
        lambda: summary.concurrency(
            timeline.transitions,
            req["arrival_ns"].min(),
            timeline.trace_end_ns,
            timeline.has_admissions,
        ),
    )
    from servetrace.analysis.formula import check_formula

    step("formula.check_formula", lambda: check_formula(req))
    step("= summary.summarize (whole)", lambda: summary.summarize(timeline, req, gaps), "summary")
    n = events0.height
    s["sizes"] = [
        {
            "frame": name,
            "mb": frame.estimated_size() / 2**20,
            "bytes_per_event": frame.estimated_size() / n,
            "columns": frame.columns,
        }
        for name, frame in (
            ("events (collected; alive during build_timeline)", events0),
            (
                "timeline.ticks (_key, ts, tokens, is_first, gap_ns; dropped after gaps)",
                timeline.ticks,
            ),
            ("gaps (_key, itl_ns; kept in Analysis)", gaps),
            ("timeline.requests", timeline.requests),
            ("requests (metrics)", req),
            ("timeline.transitions", timeline.transitions),
        )
    ]
    return rows, s


# ------------------------------------------------------------------ part 2: alternatives
def experiments(s: dict, repeat: int) -> list[dict]:
    out: list[dict] = []
    ev = s["ev"]

    def compare(
        title: str,
        variants: dict[str, Callable[[], object]],
        check: Callable[[object, object], bool] | None = None,
        note: str = "",
    ):
        results, row = {}, {"experiment": title, "variants": [], "note": note}
        for name, fn in variants.items():
            result, secs, peak, _times = timed(fn, repeat)
            results[name] = result
            row["variants"].append(
                {
                    "variant": name,
                    "seconds": secs,
                    "cpu_seconds": statistics.median(CPU_TIMES),
                    "peak_above_start_mb": peak,
                    "times": _times,
                }
            )
        if check is not None:
            names = list(results)
            row["same_result"] = all(check(results[names[0]], results[n]) for n in names[1:])
        out.append(row)
        print(
            f"  {title}: "
            + ", ".join(f"{v['variant']} {v['seconds']:.3f}s" for v in row["variants"]),
            file=sys.stderr,
            flush=True,
        )
        return results

    ts_sorted = bool(ev["ts"].is_sorted())
    tick_rows = ev.filter(pl.col("event").is_in(["first_token", "token"])).select(
        KEY,
        "ts",
        pl.col("tokens").fill_null(1).cast(pl.Int64).alias("tokens"),
        (pl.col("event") == "first_token").alias("is_first"),
    )

    # 1. sorting the ticks (the dominant step before and after commit c276271)
    compare(
        "sort the ticks (already filtered and selected: _key, ts, tokens, is_first)",
        {
            "sort(_key, ts, is_first desc)  [before c276271]": lambda: tick_rows.sort(
                KEY, "ts", "is_first", descending=[False, False, True]
            ),
            "sort(_key, ts)": lambda: tick_rows.sort(KEY, "ts"),
            "sort(_key, maintain_order=True)  [now, time-ordered input]": lambda: tick_rows.sort(
                KEY, maintain_order=True
            ),
            "sort(_key) unstable (not valid: loses time order)": lambda: tick_rows.sort(KEY),
            "only (_key, ts) sorted stably (2 of 4 columns gathered)": lambda: tick_rows.select(
                KEY, "ts"
            ).sort(KEY, maintain_order=True),
            "numpy argsort(_key, kind='stable') + gather": lambda: tick_rows[
                np.argsort(tick_rows[KEY].to_numpy(), kind="stable")
            ],
        },
        check=lambda a, b: True,
        note=f"input ts-sorted: {ts_sorted}. Rows of each variant are not all the same "
        "(unstable sort); the timing is the point.",
    )
    same = pl.col(KEY) == pl.col(KEY).shift(1)
    compare(
        "the whole tick frame (filter, select, stable sort, gap)",
        {
            "lifecycle._tick_frame (eager)  [now]": lambda: lifecycle._tick_frame(ev),
            "one lazy query: filter → select → sort(_key, stable) → gap": lambda: (
                ev.lazy()
                .filter(pl.col("event").is_in(["first_token", "token"]))
                .select(
                    KEY,
                    "ts",
                    pl.col("tokens").fill_null(1).cast(pl.Int64).alias("tokens"),
                    (pl.col("event") == "first_token").alias("is_first"),
                )
                .sort(KEY, maintain_order=True)
                .with_columns(pl.when(same).then(pl.col("ts").diff()).alias("gap_ns"))
                .collect()
            ),
        },
        check=lambda a, b: a.equals(b),
        note="in isolation the lazy plan is faster (projection pushed below the filter); "
        "whatif.py shows how much of that survives end to end",
    )
    compare(
        "filter the ticks out of the events",
        {
            "events.filter(event in ticks) + select 4 columns": lambda: ev.filter(
                pl.col("event").is_in(["first_token", "token"])
            ).select(
                KEY,
                "ts",
                pl.col("tokens").fill_null(1).cast(pl.Int64).alias("tokens"),
                (pl.col("event") == "first_token").alias("is_first"),
            ),
            "ts.is_sorted() (fast-path check)": lambda: ev["ts"].is_sorted(),
        },
    )
    # 2. pooled ITL percentiles
    gaps = s["gaps"]
    itl = gaps["itl_ns"]
    qs = [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]

    def polars_describe(series: pl.Series) -> list[float]:
        col = pl.col("x")
        frame = pl.DataFrame({"x": series.rechunk()}).select(
            col.count().alias("count"),
            col.mean().alias("mean"),
            col.std(ddof=0).alias("std"),
            *[col.quantile(q, interpolation="linear").alias(f"q{q}") for q in qs],
        )
        return list(frame.row(0))

    from servetrace.stats.describe import describe

    res = compare(
        "ITL distribution over the pooled gaps (9.5M values at 1e7 events)",
        {
            "stats.describe: drop_nulls, cast f64, to_numpy, np.percentile  [now]": lambda: (
                describe(itl)
            ),
            "polars count/mean/std/quantile(linear) on the Int64 column": lambda: polars_describe(
                itl
            ),
            "np.percentile on the Int64 buffer (no float copy)": lambda: np.percentile(
                itl.to_numpy(), [q * 100 for q in qs]
            ),
        },
    )
    d = res["stats.describe: drop_nulls, cast f64, to_numpy, np.percentile  [now]"]
    p = res["polars count/mean/std/quantile(linear) on the Int64 column"]
    out[-1]["same_result"] = bool(
        np.allclose(
            [d["min"], d["p50"], d["p90"], d["p95"], d["p99"], d["p99_9"], d["max"]],
            p[3:],
            rtol=1e-12,
        )
    )
    # 3. ingest: the distinct-event scan and the string → Enum cast
    trace = s["trace"]
    path = trace.files[0]
    from servetrace.schema import EVENT_DTYPE

    compare(
        "ingest",
        {
            "ingest.read_events (plan; scans event for distinct values)  [now]": lambda: (
                ingest.read_events([path])
            ),
            "pl.scan_parquet + collect_schema (plan only)": lambda: pl.scan_parquet(
                path
            ).collect_schema(),
            "the distinct scan alone: scan.select(event.unique()).collect()": lambda: (
                pl.scan_parquet(path).select(pl.col("event").unique()).collect()
            ),
            "trace.events.collect()  [now]": lambda: trace.events.collect(),
            "pl.read_parquet (strings as read)": lambda: pl.read_parquet(path),
            "scan + event.cast(Enum) + collect (no alias mapping)": lambda: (
                pl.scan_parquet(path).with_columns(pl.col("event").cast(EVENT_DTYPE)).collect()
            ),
        },
    )
    return out


def markdown(path: str, n: int, rows: list[dict], exps: list[dict], sizes: list[dict]) -> str:
    total = next((r["seconds"] for r in rows if r["step"].startswith("= lifecycle")), None)
    lines = [
        f"## Profile of the analysis of {path} ({n:,} events)",
        "",
        "| step | wall s (median) | CPU s | share of build_timeline | peak above start MB |",
        "|---|---:|---:|---:|---:|",
    ]
    in_tl = False
    for r in rows:
        if r["step"].startswith("lifecycle.split_row"):
            in_tl = True
        share = f"{100 * r['seconds'] / total:.0f} %" if in_tl and total else ""
        if r["step"].startswith("= lifecycle"):
            in_tl = False
            share = "100 %"
        lines.append(
            f"| {r['step']} | {r['seconds']:.3f} | {r['cpu_seconds']:.3f} | {share} | "
            f"{r['peak_above_start_mb']:.0f} |"
        )
    lines += [
        "",
        "### Frames held by an Analysis (Polars estimated_size)",
        "",
        "| frame | MB | B/event |",
        "|---|---:|---:|",
    ]
    for f in sizes:
        lines.append(f"| {f['frame']} | {f['mb']:.0f} | {f['bytes_per_event']:.1f} |")
    lines += ["", "### Alternatives (same trace, same process)", ""]
    for e in exps:
        lines += [
            f"**{e['experiment']}**"
            + (f" — same result: {e['same_result']}" if "same_result" in e else ""),
            "",
            "| variant | wall s (median) | CPU s | peak above start MB |",
            "|---|---:|---:|---:|",
        ]
        for v in e["variants"]:
            lines.append(
                f"| {v['variant']} | {v['seconds']:.3f} | {v['cpu_seconds']:.3f} | "
                f"{v['peak_above_start_mb']:.0f} |"
            )
        if e.get("note"):
            lines += ["", e["note"]]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-experiments", action="store_true")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=10.0,
        help="max seconds to wait for a quiet machine before each run",
    )
    args = parser.parse_args()
    QUIET["max_wait"] = args.quiet_wait
    rows, state = replay(args.trace, args.repeat)
    exps = [] if args.no_experiments else experiments(state, args.repeat)
    n = state["events"].height
    text = markdown(args.trace, n, rows, exps, state["sizes"])
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"profile_{Path(args.trace).stem}.json"
    out.write_text(
        json.dumps(
            {
                "trace": args.trace,
                "events": n,
                "polars": pl.__version__,
                "steps": rows,
                "frame_sizes": state["sizes"],
                "experiments": exps,
            },
            indent=2,
            default=str,
        )
    )
    print(f"written {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
